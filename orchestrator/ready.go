package orchestrator

import (
	"context"
	"time"
)

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
	if !d.agent.CardReady() {
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
