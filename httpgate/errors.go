package httpgate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/orchd/orchd/capability"
	"github.com/orchd/orchd/delegation"
	"github.com/orchd/orchd/registry"
)

// Error is an error with its HTTP status and code already decided, as the
// plain HTTP routes answer it (the HTTP API, health, metrics, the card,
// the push webhook): with ErrorBody.
type Error struct {
	// Status is the HTTP status.
	Status int
	// Code is ErrorBody's code: a stable machine-readable string (see
	// docs/api.md).
	Code string
	// Msg says what went wrong, for a person.
	Msg string
	// Details is ErrorBody's details, nil for none.
	Details any
}

// Error returns the message.
func (e *Error) Error() string { return e.Msg }

// ErrorBody is the JSON body of every error the plain HTTP routes answer:
// the HTTP API's, and the refusals of the gate and the browser guard on
// every route but the A2A endpoints.
type ErrorBody struct {
	// Error describes what went wrong.
	Error struct {
		// Code is a stable machine-readable string; see docs/api.md.
		Code string `json:"code"`
		// Message says what went wrong, for a person.
		Message string `json:"message"`
		// Details carries structured data for some errors: the decision
		// (every candidate and why it was refused) for refused or failed
		// delegations, the limit (delegation.LimitError) for work refused
		// as over one.
		Details any `json:"details,omitempty"`
	} `json:"error"`
}

// WriteError answers with e as ErrorBody.
func WriteError(w http.ResponseWriter, e *Error) {
	var body ErrorBody
	body.Error.Code, body.Error.Message, body.Error.Details = e.Code, e.Msg, e.Details
	WriteJSON(w, e.Status, body, "  ")
}

// WriteJSON writes v as a JSON answer with status, its lines indented by
// indent ("" for none).
func WriteJSON(w http.ResponseWriter, status int, v any, indent string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", indent)
	_ = enc.Encode(v)
}

// QuoteCut quotes a value a client sent, cut to 100 bytes, for a
// refusal's message.
func QuoteCut(s string) string {
	if len(s) > 100 {
		s = s[:100] + "…"
	}
	return fmt.Sprintf("%q", s)
}

// Classify maps an error to its HTTP status and code, as the HTTP API
// answers it and the other fronts name it (the console, the MCP tools).
// It is the one place where delegation, registry and card errors meet
// the wire.
func Classify(err error) (int, string) {
	var ae *Error
	var fe *registry.FetchError
	var ne net.Error
	var refused *delegation.RefusedError
	var failed *delegation.FailedError
	switch {
	case errors.As(err, &ae):
		return ae.Status, ae.Code
	case errors.As(err, &refused):
		return http.StatusUnprocessableEntity, "refused"
	case errors.As(err, &failed):
		return http.StatusBadGateway, "delegation_failed"
	case errors.Is(err, delegation.ErrResourceExhausted):
		return http.StatusTooManyRequests, "resource_exhausted"
	case errors.Is(err, delegation.ErrBadRequest):
		return http.StatusBadRequest, "invalid_argument"
	case errors.Is(err, delegation.ErrUnknownAgent), errors.Is(err, delegation.ErrNotFound):
		return http.StatusNotFound, "not_found"
	case errors.Is(err, delegation.ErrNotWaiting), errors.Is(err, delegation.ErrEnded),
		errors.Is(err, delegation.ErrNotSteerable), errors.Is(err, a2a.ErrUnsupportedOperation),
		errors.Is(err, delegation.ErrContained):
		return http.StatusConflict, "failed_precondition"
	case errors.Is(err, delegation.ErrCycle), errors.Is(err, delegation.ErrTooDeep), errors.Is(err, delegation.ErrDeadline):
		return http.StatusUnprocessableEntity, "refused"
	case errors.Is(err, delegation.ErrClosed), errors.Is(err, delegation.ErrUnavailable), errors.Is(err, registry.ErrUnavailable):
		return http.StatusServiceUnavailable, "unavailable"
	case errors.Is(err, registry.ErrNotFound):
		return http.StatusNotFound, "not_found"
	case errors.Is(err, registry.ErrConflict):
		return http.StatusConflict, "conflict"
	case errors.Is(err, registry.ErrInvalidURL), errors.Is(err, registry.ErrInvalidID):
		return http.StatusBadRequest, "invalid_argument"
	case errors.Is(err, registry.ErrBlockedAddress):
		return http.StatusForbidden, "blocked_address"
	case errors.Is(err, capability.ErrInvalidCard), errors.Is(err, registry.ErrCardTooLarge):
		return http.StatusUnprocessableEntity, "invalid_card"
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return http.StatusGatewayTimeout, "timeout"
	case errors.As(err, &fe):
		return http.StatusBadGateway, "card_unreachable"
	case errors.Is(err, registry.ErrClosed):
		return http.StatusServiceUnavailable, "unavailable"
	}
	return http.StatusInternalServerError, "internal"
}
