package credentials

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/orchd/orchd/internal/limitedfile"
)

// redacted is what every rendering of a secret shows.
const redacted = "[redacted]"

// maxSecretBytes bounds a secret file, and a secret.
const maxSecretBytes = 16 << 10

// statEvery is how often, at most, a secret file is checked for change.
const statEvery = time.Second

// secret is a credential's value. Every way of printing, marshalling or
// logging it shows "[redacted]"; only string(s) gives the value, and only
// where it goes on the wire.
type secret string

func (secret) String() string               { return redacted }
func (secret) GoString() string             { return redacted }
func (secret) Format(f fmt.State, _ rune)   { _, _ = io.WriteString(f, redacted) }
func (secret) MarshalJSON() ([]byte, error) { return []byte(`"` + redacted + `"`), nil }
func (secret) MarshalText() ([]byte, error) { return []byte(redacted), nil }
func (secret) LogValue() slog.Value         { return slog.StringValue(redacted) }

// sealed holds a secret behind a pointer: fmt prints the unexported
// fields of a struct without calling their methods, but at depth it
// prints a pointer as an address, so a struct holding a sealed secret
// shows no value however it is printed.
type sealed struct{ p *secret }

func seal(s secret) sealed { return sealed{p: &s} }

// get returns the secret, "" when none is held.
func (s sealed) get() secret {
	if s.p == nil {
		return ""
	}
	return *s.p
}

// String, Format and LogValue name the source and never show its value:
// fmt prints unexported fields without their methods, so the holder of a
// secret must redact itself too.
func (s *source) String() string             { return s.what }
func (s *source) Format(f fmt.State, _ rune) { _, _ = io.WriteString(f, s.what) }
func (s *source) LogValue() slog.Value       { return slog.StringValue(s.what) }

// controlFree reports whether s has no control characters.
func controlFree(s secret) bool {
	return !strings.ContainsFunc(string(s), func(r rune) bool { return r < ' ' || r == 0x7f })
}

// cookieSafe reports whether s is made of cookie-octets (RFC 6265 §4.1.1)
// only; net/http would log and drop the others.
func cookieSafe(s secret) bool {
	return !strings.ContainsFunc(string(s), func(r rune) bool {
		return r <= ' ' || r >= 0x7f || r == '"' || r == ',' || r == ';' || r == '\\'
	})
}

// scrub replaces every occurrence of each secret in msg, for text that
// comes from elsewhere (a server's answer) and might echo one back.
func scrub(msg string, secrets ...secret) string {
	for _, s := range secrets {
		if len(s) >= 4 {
			msg = strings.ReplaceAll(msg, string(s), redacted)
		}
	}
	return msg
}

// source reads one secret from a file or an environment variable. A file
// is read when first needed and re-read when its modification time or
// size changes, checked at most once a second (and at once after a
// refusal, see reload), so a rotated secret is picked up without a
// restart. A variable is read at each use.
type source struct {
	what      string // "bearer token", for errors
	file, env string
	now       func() time.Time

	mu      sync.Mutex
	val     sealed
	mod     time.Time
	size    int64
	checked time.Time
}

func newSource(what, file, env string, now func() time.Time) *source {
	return &source{what: what, file: file, env: env, now: now}
}

// get returns the secret's current value.
func (s *source) get() (secret, error) {
	if s.env != "" {
		v, ok := os.LookupEnv(s.env)
		if !ok {
			return "", fmt.Errorf("%s: environment variable %s is not set", s.what, s.env)
		}
		return checkSecret(s.what, secret(strings.TrimSpace(v)))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	if v := s.val.get(); v != "" && now.Sub(s.checked) < statEvery && !now.Before(s.checked) {
		return v, nil
	}
	return s.load(now)
}

// reload checks the file now, whatever the last check, and reports
// whether the value changed: after a refusal, a rotated secret is worth
// one more try.
func (s *source) reload() bool {
	if s.env != "" {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	old := s.val.get()
	v, err := s.load(s.now())
	return err == nil && v != old
}

// load reads the file if it changed. Callers hold mu.
func (s *source) load(now time.Time) (secret, error) {
	fi, err := os.Stat(s.file)
	if err != nil {
		return "", fmt.Errorf("%s: %w", s.what, err)
	}
	s.checked = now
	if v := s.val.get(); v != "" && fi.ModTime().Equal(s.mod) && fi.Size() == s.size {
		return v, nil
	}
	if fi.Size() > maxSecretBytes {
		return "", fmt.Errorf("%s: file %s is %d bytes, more than the limit of %d", s.what, s.file, fi.Size(), maxSecretBytes)
	}
	b, err := limitedfile.Read(s.file, maxSecretBytes)
	if err != nil {
		return "", fmt.Errorf("%s: %w", s.what, err)
	}
	v, err := checkSecret(s.what, secret(bytes.TrimSpace(b)))
	if err != nil {
		return "", fmt.Errorf("%w (file %s)", err, s.file)
	}
	s.val, s.mod, s.size = seal(v), fi.ModTime(), fi.Size()
	return v, nil
}

// checkSecret refuses values no header can carry.
func checkSecret(what string, v secret) (secret, error) {
	switch {
	case v == "":
		return "", errors.New(what + " is empty")
	case !controlFree(v):
		return "", errors.New(what + " contains control characters")
	}
	return v, nil
}
