package telemetry

import (
	"context"
	"log/slog"
	"sync"
)

// A server that derives a logger for every request (a2a-go's request
// handler adds a group and a request id to each one) pays for the
// derivation whether or not the request logs anything: slog's text and
// JSON handlers format the attributes of WithAttrs at once, so that each
// record written later only copies them. On a hop that logs nothing that
// work is thrown away. LazyHandler defers it to the first record.

// LazyHandler wraps h for loggers derived often (Logger.With,
// Logger.WithGroup) but seldom written to: WithAttrs and WithGroup only
// note what they were asked, and h's own WithAttrs and WithGroup run, in
// the same order and with the same arguments, when a record is first
// handled by the derived logger; a logger that never writes never pays
// for them. The records written are those h itself would have written
// after the same calls, byte for byte.
//
// Enabled asks h: it does not depend on attributes or groups added
// later, which holds for slog's handlers and LogHandler. Attribute values
// that are slog.LogValuers are resolved when the first record is handled
// rather than when they are added. Wrapping a LazyHandler again returns
// it as it is.
func LazyHandler(h slog.Handler) slog.Handler {
	if l, ok := h.(*lazyHandler); ok {
		return l
	}
	return &lazyHandler{base: h}
}

// lazyHandler is one step of a derivation: the root (parent nil) is the
// wrapped handler itself; every other node adds either a group or some
// attributes to its parent's handler.
type lazyHandler struct {
	base   slog.Handler // the wrapped handler, for Enabled
	parent *lazyHandler
	group  string      // a WithGroup step, when attrs is nil
	attrs  []slog.Attr // a WithAttrs step

	once  sync.Once
	built slog.Handler // the parent's handler with this step applied
}

var _ slog.Handler = (*lazyHandler)(nil)

func (h *lazyHandler) Enabled(ctx context.Context, level slog.Level) bool {
	return h.base.Enabled(ctx, level)
}

func (h *lazyHandler) Handle(ctx context.Context, r slog.Record) error {
	return h.handler().Handle(ctx, r)
}

// WithAttrs keeps as, which slog hands over to the handler, for the
// derivation.
func (h *lazyHandler) WithAttrs(as []slog.Attr) slog.Handler {
	if len(as) == 0 {
		return h
	}
	return &lazyHandler{base: h.base, parent: h, attrs: as}
}

func (h *lazyHandler) WithGroup(name string) slog.Handler {
	if name == "" {
		return h // as slog.Handler's contract asks
	}
	return &lazyHandler{base: h.base, parent: h, group: name}
}

// handler is the wrapped handler with every step up to h applied, built
// once: each step's WithAttrs or WithGroup runs exactly once, however many
// records and goroutines share the logger.
func (h *lazyHandler) handler() slog.Handler {
	if h.parent == nil {
		return h.base
	}
	h.once.Do(func() {
		p := h.parent.handler()
		if h.attrs != nil {
			h.built = p.WithAttrs(h.attrs)
		} else {
			h.built = p.WithGroup(h.group)
		}
	})
	return h.built
}
