package capability

import (
	"errors"
	"fmt"
)

// ErrInvalidCard is matched by every error [Build] returns for a card it
// cannot use, so callers can tell a bad card from other failures with
// errors.Is.
var ErrInvalidCard = errors.New("invalid agent card")

// CardError reports why a card was refused. Path names the offending field
// in JSON path form, for example "supportedInterfaces[1].url"; it is empty
// when the document as a whole is at fault (not JSON, too large, too deep).
type CardError struct {
	// Path is the field that is wrong, or "" for the whole document.
	Path string
	// Msg says what is wrong with it.
	Msg string
	// Err is the underlying cause, if any (for example a JSON syntax error).
	Err error
}

// Error returns "invalid agent card: PATH: MSG".
func (e *CardError) Error() string {
	msg := e.Msg
	if e.Err != nil {
		msg = fmt.Sprintf("%s: %v", msg, e.Err)
	}
	if e.Path == "" {
		return "invalid agent card: " + msg
	}
	return "invalid agent card: " + e.Path + ": " + msg
}

// Unwrap returns the underlying cause.
func (e *CardError) Unwrap() error { return e.Err }

// Is reports whether target is [ErrInvalidCard].
func (e *CardError) Is(target error) bool { return target == ErrInvalidCard }
