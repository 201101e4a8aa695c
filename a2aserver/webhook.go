package a2aserver

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"

	"github.com/orchd/orchd/delegation"
	"github.com/orchd/orchd/httpgate"
)

// The push webhook: where agents that orchd follows by push notifications
// (delegation.follow) POST their tasks' events, one URL per delegation.
// It is not behind the gate: an agent does not hold orchd's callers'
// credentials. Each delegation's URL is authenticated by the token made
// for it alone, and a notification is only a reason to read the task
// from the agent (docs/delegation.md, "Following by push").

// PathPush is the webhook's prefix; a delegation's webhook is
// PathPush/{delegation id}.
const PathPush = "/a2a/push"

// maxPushBytes bounds a notification's body. Nothing in it is believed,
// so a larger one is refused (413) and the task read all the same.
const maxPushBytes = 1 << 20

// notifier takes push notifications: *delegation.Engine.
type notifier interface {
	Notify(ctx context.Context, id, token string, body io.Reader, maxBytes int64) error
}

// pushWebhook serves the push webhook over a notifier.
type pushWebhook struct {
	deleg notifier
	log   *slog.Logger
}

func newPushWebhook(deleg notifier, log *slog.Logger) *pushWebhook {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &pushWebhook{deleg: deleg, log: log}
}

// route registers the webhook on mux.
func (h *pushWebhook) route(mux *http.ServeMux, wrap func(http.Handler) http.Handler) {
	mux.Handle("POST "+PathPush+"/{id}", wrap(h))
}

// ServeHTTP takes one notification: 204 when taken; 404 alike for an
// unknown delegation and a wrong or missing token; 429 over the rate; 413
// over the size (the task is read all the same); 400 for a body that is
// not a notification of the delegation's task; 503 when it cannot be
// checked now.
func (h *pushWebhook) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	err := h.deleg.Notify(r.Context(), r.PathValue("id"), pushToken(r.Header), r.Body, maxPushBytes)
	var e *httpgate.Error
	switch {
	case err == nil:
		w.WriteHeader(http.StatusNoContent)
		return
	case errors.Is(err, delegation.ErrPushRefused):
		e = &httpgate.Error{Status: http.StatusNotFound, Code: "not_found", Msg: "no such push webhook"}
	case errors.Is(err, delegation.ErrPushRate):
		w.Header().Set("Retry-After", "1")
		e = &httpgate.Error{Status: http.StatusTooManyRequests, Code: "rate_limited", Msg: err.Error()}
	case errors.Is(err, delegation.ErrPushTooLarge):
		e = &httpgate.Error{Status: http.StatusRequestEntityTooLarge, Code: "too_large", Msg: err.Error()}
	case errors.Is(err, delegation.ErrBadRequest):
		e = &httpgate.Error{Status: http.StatusBadRequest, Code: "bad_request", Msg: err.Error()}
	default:
		h.log.WarnContext(r.Context(), "push notification not taken", "delegation", r.PathValue("id"), "error", err)
		e = &httpgate.Error{Status: http.StatusServiceUnavailable, Code: "unavailable", Msg: "the notification cannot be taken now"}
	}
	httpgate.WriteError(w, e)
}

// pushToken is the notification's token: in A2A-Notification-Token (as
// a2a-go sends it), X-A2A-Notification-Token (as the Python SDK does), or
// as a bearer token.
func pushToken(h http.Header) string {
	for _, k := range []string{"A2A-Notification-Token", "X-A2A-Notification-Token"} {
		if v := h.Get(k); v != "" {
			return v
		}
	}
	if v, ok := strings.CutPrefix(h.Get("Authorization"), "Bearer "); ok {
		return strings.TrimSpace(v)
	}
	return ""
}

// PushPrefix is the URL prefix of the webhook that agents are given
// (delegation.Engine.SetPushURL): configured (delegation.pushURL, the base
// URL agents reach orchd at), else base, orchd's own (agent.url, else its
// listen address).
func PushPrefix(configured, base string) string {
	if configured != "" {
		base = configured
	}
	return strings.TrimRight(base, "/") + PathPush + "/"
}
