package registry

import (
	"errors"
	"fmt"
)

// Sentinel errors callers decide on. Errors from the registry wrap one of
// these, a *[FetchError], or a *capability.CardError.
var (
	// ErrNotFound means no agent is registered under the id.
	ErrNotFound = errors.New("agent not found")
	// ErrConflict means the id or URL is already registered.
	ErrConflict = errors.New("agent already registered")
	// ErrInvalidURL means an agent URL is not acceptable.
	ErrInvalidURL = errors.New("invalid agent URL")
	// ErrInvalidID means an agent id is not acceptable.
	ErrInvalidID = errors.New("invalid agent id")
	// ErrBlockedAddress means the SSRF guard refused to connect.
	ErrBlockedAddress = errors.New("address not allowed")
	// ErrCardTooLarge means the card body exceeded Config.MaxCardBytes.
	ErrCardTooLarge = errors.New("card exceeds size limit")
	// ErrClosed means the registry was closed.
	ErrClosed = errors.New("registry closed")
)

// FetchError reports a card that could not be fetched. StatusCode is the
// HTTP status when the server answered with one orchd cannot use, and 0
// when no response arrived.
type FetchError struct {
	// URL is the card URL that failed.
	URL string
	// StatusCode is the unusable HTTP status, or 0.
	StatusCode int
	// Err is the cause when no usable response arrived.
	Err error
}

// Error returns "fetch card URL: ...".
func (e *FetchError) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("fetch card %s: server answered HTTP %d", e.URL, e.StatusCode)
	}
	return fmt.Sprintf("fetch card %s: %v", e.URL, e.Err)
}

// Unwrap returns the cause.
func (e *FetchError) Unwrap() error { return e.Err }
