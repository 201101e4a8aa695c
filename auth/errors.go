package auth

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"unicode/utf8"
)

// Sentinels classify refusals for [errors.Is]. Every [*Error] matches exactly
// one of ErrInvalidCredentials and ErrUnavailable, and possibly one of the
// narrower ErrMalformed or ErrExpired as well.
var (
	// ErrInvalidCredentials is matched by every refusal of credentials the
	// caller presented: answer 401.
	ErrInvalidCredentials = errors.New("invalid credentials")
	// ErrMalformed is matched when the credentials cannot be parsed at all:
	// a bad Authorization header, a token with bad characters, a JWT that is
	// not three base64url parts. It implies ErrInvalidCredentials.
	ErrMalformed = errors.New("malformed credentials")
	// ErrExpired is matched when a JWT is outside its validity window
	// (expired, not yet valid, issued in the future). It implies
	// ErrInvalidCredentials.
	ErrExpired = errors.New("credentials expired")
	// ErrUnavailable is matched when the credentials could not be checked
	// because the issuer's keys cannot be had (discovery or the JWKS fetch
	// fails): answer 503, not 401, as the caller did nothing wrong.
	ErrUnavailable = errors.New("authentication unavailable")
)

// Error is a refusal of presented credentials. Reason says what was wrong in
// words safe to show the caller: it never contains the token, and any value
// it quotes from the credential (a key id, an issuer) is truncated.
type Error struct {
	// Method is the kind of credential refused: [MethodToken], [MethodJWT],
	// [MethodMTLS], or "" when the credential could not be told apart.
	Method string
	// Reason says what was wrong, for the caller and the log.
	Reason string

	kind error // ErrInvalidCredentials, ErrMalformed, ErrExpired or ErrUnavailable
}

// Error returns "authentication refused: " and the reason.
func (e *Error) Error() string {
	if errors.Is(e.kind, ErrUnavailable) {
		return "authentication unavailable: " + e.Reason
	}
	return "authentication refused: " + e.Reason
}

// Unwrap returns the sentinels the error matches.
func (e *Error) Unwrap() []error {
	switch {
	case errors.Is(e.kind, ErrMalformed), errors.Is(e.kind, ErrExpired):
		return []error{ErrInvalidCredentials, e.kind}
	case e.kind == nil:
		return []error{ErrInvalidCredentials}
	default:
		return []error{e.kind}
	}
}

// HTTPStatus is the status to answer: 503 when authentication is
// unavailable, 401 otherwise.
func (e *Error) HTTPStatus() int {
	if errors.Is(e.kind, ErrUnavailable) {
		return http.StatusServiceUnavailable
	}
	return http.StatusUnauthorized
}

// Challenge is a WWW-Authenticate header value for the refusal (RFC 6750
// §3): a Bearer challenge with error="invalid_token" (or
// "temporarily_unavailable") and the reason as error_description.
func (e *Error) Challenge() string {
	code := "invalid_token"
	if errors.Is(e.kind, ErrMalformed) {
		code = "invalid_request"
	}
	if errors.Is(e.kind, ErrUnavailable) {
		code = "temporarily_unavailable"
	}
	desc := strings.Map(func(r rune) rune {
		if r == '"' || r == '\\' || r < 0x20 || r > 0x7e {
			return '\''
		}
		return r
	}, e.Reason)
	return fmt.Sprintf(`Bearer error=%q, error_description="%s"`, code, desc)
}

// refuse returns an *Error of kind ErrInvalidCredentials.
func refuse(method, format string, args ...any) *Error {
	return &Error{Method: method, Reason: fmt.Sprintf(format, args...), kind: ErrInvalidCredentials}
}

// malformed returns an *Error of kind ErrMalformed.
func malformed(method, format string, args ...any) *Error {
	return &Error{Method: method, Reason: fmt.Sprintf(format, args...), kind: ErrMalformed}
}

// expired returns an *Error of kind ErrExpired.
func expired(format string, args ...any) *Error {
	return &Error{Method: MethodJWT, Reason: fmt.Sprintf(format, args...), kind: ErrExpired}
}

// unavailable returns an *Error of kind ErrUnavailable.
func unavailable(method, format string, args ...any) *Error {
	return &Error{Method: method, Reason: fmt.Sprintf(format, args...), kind: ErrUnavailable}
}

// maxQuoted bounds how much of a caller-supplied value a reason quotes.
const maxQuoted = 64

// quote quotes a caller-supplied value for a reason, cut to maxQuoted bytes
// at a rune boundary so that a long value cannot fill the log.
func quote(s string) string {
	if len(s) > maxQuoted {
		cut := maxQuoted
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		return fmt.Sprintf("%q...", s[:cut])
	}
	return fmt.Sprintf("%q", s)
}
