package httpgate

import (
	"encoding/json"
	"fmt"
	"net/http"
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
		// delegations.
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
