package orchestrator

import (
	"context"
	"net/http"
	"time"
)

// Readiness is the body of GET /readyz.
type Readiness struct {
	// Status is "ready" or "not ready".
	Status string `json:"status"`
	// Reasons say what is not ready yet.
	Reasons []string `json:"reasons,omitempty"`
}

// notReady lists what keeps the daemon from taking work: it is not
// listening yet, its agent card is not built, no policy set is loaded,
// its state store cannot take writes (it does not answer within
// readyPing, its writes fail at the disk, or it is full; see
// store.Store.Ready), or it is shutting down. The agents' health does not
// count; /healthz and the registry report it.
func (d *Daemon) notReady() []string {
	var why []string
	select {
	case <-d.stopping:
		why = append(why, "shutting down")
	default:
	}
	if d.Addr() == nil {
		why = append(why, "not listening yet")
	}
	if d.agent.card.Load() == nil {
		why = append(why, "agent card not built yet")
	}
	if d.policies.Set() == nil {
		why = append(why, "policies not loaded")
	}
	ctx, cancel := context.WithTimeout(context.Background(), readyPing)
	defer cancel()
	if err := d.state.ready(ctx); err != nil {
		why = append(why, err.Error())
	}
	return why
}

// readyPing bounds the state store's answer to a readiness check.
const readyPing = time.Second

// readiness serves GET /readyz: 200 once the daemon serves, 503 with the
// reasons before and while it stops.
func (a *api) readiness(w http.ResponseWriter, r *http.Request) {
	if why := a.ready(); len(why) > 0 {
		a.reply(w, http.StatusServiceUnavailable, Readiness{Status: "not ready", Reasons: why})
		return
	}
	a.reply(w, http.StatusOK, Readiness{Status: "ready"})
}
