package credentials

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/a2aproject/a2a-go/v2/a2a"
)

// ErrUnavailable is matched by the error of a call that never left orchd
// because a credential could not be had: a secret file is missing, the
// token endpoint refused the client. The agent is not at fault.
var ErrUnavailable = errors.New("credential unavailable")

// maxChallenge bounds how much of an agent's WWW-Authenticate header an
// error quotes.
const maxChallenge = 200

// RefusedError is an agent's 401 or 403 answer to a call carrying orchd's
// credentials (or none, when none were configured). It matches
// a2a.ErrUnauthenticated (401) or a2a.ErrUnauthorized (403) with
// errors.Is, so callers tell it from a failing agent: it says nothing of
// the agent's health.
type RefusedError struct {
	// Agent is the agent's id.
	Agent string
	// Status is the HTTP status, 401 or 403; 0 when the agent answered
	// with an A2A error instead.
	Status int
	// Sent describes what the call carried (Status.Using); never a value.
	Sent string
	// Challenge is the agent's WWW-Authenticate header, shortened, with
	// any secret the call carried taken out.
	Challenge string
	// Err is the A2A error the agent answered with, if it did.
	Err error
}

func (e *RefusedError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "agent %s refused orchd's credentials (%s)", e.Agent, e.code())
	var details []string
	if e.Sent != "" {
		details = append(details, "sent "+e.Sent)
	} else {
		details = append(details, "sent no credentials")
	}
	if e.Challenge != "" {
		details = append(details, "the agent asks for "+e.Challenge)
	}
	if e.Err != nil && e.Status == 0 {
		details = append(details, e.Err.Error())
	}
	b.WriteString(": " + strings.Join(details, "; "))
	return b.String()
}

// code is "401 unauthenticated" or "403 unauthorized".
func (e *RefusedError) code() string {
	if e.Status == http.StatusForbidden || e.Status == 0 && errors.Is(e.Err, a2a.ErrUnauthorized) {
		return "403 unauthorized"
	}
	return "401 unauthenticated"
}

// Unwrap gives the A2A sentinel the refusal matches, and the agent's
// error when it answered with one.
func (e *RefusedError) Unwrap() []error {
	sentinel := a2a.ErrUnauthenticated
	if e.code() == "403 unauthorized" {
		sentinel = a2a.ErrUnauthorized
	}
	if e.Err != nil {
		return []error{sentinel, e.Err}
	}
	return []error{sentinel}
}

// Refusal returns err as the agent's refusal of orchd's credentials, if it
// is one: the *RefusedError inside err (so its message comes first,
// without the transport's wrapping), or a new one for an agent that
// answered with A2A's unauthenticated or unauthorized error. Any other
// error is returned as it is.
func Refusal(agent string, err error) error {
	if err == nil {
		return nil
	}
	if re, ok := errors.AsType[*RefusedError](err); ok {
		return re
	}
	if errors.Is(err, a2a.ErrUnauthenticated) || errors.Is(err, a2a.ErrUnauthorized) {
		return &RefusedError{Agent: agent, Err: err}
	}
	return err
}

// unavailableError is a credential that could not be had for a call.
type unavailableError struct {
	agent string
	err   error
}

func (e *unavailableError) Error() string {
	return fmt.Sprintf("credentials for agent %s: %v", e.agent, e.err)
}

func (e *unavailableError) Unwrap() []error { return []error{ErrUnavailable, e.err} }

// sanitizeChallenge keeps the printable start of a WWW-Authenticate
// header, without the secrets the call carried.
func sanitizeChallenge(h string, sent []secret) string {
	h = scrub(h, sent...)
	h = strings.Map(func(r rune) rune {
		if r < ' ' || r == 0x7f {
			return ' '
		}
		return r
	}, h)
	if len(h) > maxChallenge {
		h = strings.ToValidUTF8(h[:maxChallenge], "") + "…"
	}
	return strings.TrimSpace(h)
}
