package telemetry

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/orchd/orchd/internal/syncbuf"
)

// noTime drops the time attribute, so two handlers' records compare.
func noTime(groups []string, a slog.Attr) slog.Attr {
	if len(groups) == 0 && a.Key == slog.TimeKey {
		return slog.Attr{}
	}
	return a
}

// constValuer is a slog.LogValuer whose value does not change, so eager
// and lazy resolution agree.
type constValuer string

func (v constValuer) LogValue() slog.Value {
	return slog.GroupValue(slog.String("resolved", string(v)))
}

func TestLazyHandler_WritesWhatTheEagerChainWrites(t *testing.T) {
	t.Parallel()
	tp := sdktrace.NewTracerProvider()
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	traced, span := tp.Tracer("test").Start(t.Context(), "op")
	defer span.End()
	for _, tc := range []struct {
		name   string
		derive func(*slog.Logger) *slog.Logger
		write  func(context.Context, *slog.Logger)
	}{
		{"no derivation", func(l *slog.Logger) *slog.Logger { return l },
			func(ctx context.Context, l *slog.Logger) { l.InfoContext(ctx, "m", "k", 1) }},
		{"attrs", func(l *slog.Logger) *slog.Logger { return l.With("a", 1, "b", "two words") },
			func(ctx context.Context, l *slog.Logger) { l.InfoContext(ctx, "m", "k", 1) }},
		{"as a2a-go derives per request", func(l *slog.Logger) *slog.Logger {
			return l.WithGroup("a2a").With("method", "SendMessage").With(slog.String("request_id", "r-1"))
		}, func(ctx context.Context, l *slog.Logger) { l.WarnContext(ctx, "m", "error", io.EOF) }},
		{"nested groups and attrs", func(l *slog.Logger) *slog.Logger {
			return l.With("top", true).WithGroup("g1").With("x", 1).WithGroup("g2").With("y", 2.5)
		}, func(ctx context.Context, l *slog.Logger) {
			l.InfoContext(ctx, "m", "z", "last", slog.Group("inner", "w", 3))
		}},
		{"empty group at the end is dropped", func(l *slog.Logger) *slog.Logger { return l.With("a", 1).WithGroup("empty") },
			func(ctx context.Context, l *slog.Logger) { l.InfoContext(ctx, "m") }},
		{"empty groups between", func(l *slog.Logger) *slog.Logger {
			return l.WithGroup("e1").WithGroup("e2").With("a", 1).WithGroup("e3")
		},
			func(ctx context.Context, l *slog.Logger) { l.InfoContext(ctx, "m") }},
		{"empty group attrs", func(l *slog.Logger) *slog.Logger { return l.With(slog.Group("none"), "a", 1) },
			func(ctx context.Context, l *slog.Logger) { l.InfoContext(ctx, "m", slog.Group("also none"), "b", 2) }},
		{"With and WithGroup with nothing", func(l *slog.Logger) *slog.Logger { return l.With().WithGroup("").With("a", 1) },
			func(ctx context.Context, l *slog.Logger) { l.InfoContext(ctx, "m") }},
		{"log valuer", func(l *slog.Logger) *slog.Logger { return l.WithGroup("g").With("v", constValuer("x")) },
			func(ctx context.Context, l *slog.Logger) { l.InfoContext(ctx, "m", "v2", constValuer("y")) }},
		{"several records", func(l *slog.Logger) *slog.Logger { return l.WithGroup("g").With("a", 1) },
			func(ctx context.Context, l *slog.Logger) {
				l.InfoContext(ctx, "one")
				l.With("b", 2).InfoContext(ctx, "two")
				l.WithGroup("h").ErrorContext(ctx, "three", "c", 3)
				l.InfoContext(ctx, "four")
			}},
		{"debug is dropped at info", func(l *slog.Logger) *slog.Logger { return l.With("a", 1) },
			func(ctx context.Context, l *slog.Logger) { l.DebugContext(ctx, "dropped"); l.InfoContext(ctx, "kept") }},
	} {
		for _, format := range []string{"text", "json"} {
			for _, ctxName := range []string{"untraced", "traced"} {
				t.Run(tc.name+"/"+format+"/"+ctxName, func(t *testing.T) {
					t.Parallel()
					ctx := t.Context()
					if ctxName == "traced" {
						ctx = traced
					}
					var eager, lazy bytes.Buffer
					tc.write(ctx, tc.derive(slog.New(LogHandler(formatHandler(format, &eager)))))
					tc.write(ctx, tc.derive(slog.New(LazyHandler(LogHandler(formatHandler(format, &lazy))))))
					if eager.Len() == 0 {
						t.Fatal("the eager chain wrote nothing")
					}
					if got, want := lazy.String(), eager.String(); got != want {
						t.Errorf("lazy wrote\n%s\nthe eager chain\n%s", got, want)
					}
				})
			}
		}
	}
}

func formatHandler(format string, w io.Writer) slog.Handler {
	opts := &slog.HandlerOptions{Level: slog.LevelInfo, ReplaceAttr: noTime}
	if format == "json" {
		return slog.NewJSONHandler(w, opts)
	}
	return slog.NewTextHandler(w, opts)
}

// countingHandler is a text handler that counts the derivations made of
// it and of the handlers derived from it.
type countingHandler struct {
	slog.Handler
	derived *atomic.Int64
}

func (h countingHandler) WithAttrs(as []slog.Attr) slog.Handler {
	h.derived.Add(1)
	return countingHandler{h.Handler.WithAttrs(as), h.derived}
}

func (h countingHandler) WithGroup(name string) slog.Handler {
	h.derived.Add(1)
	return countingHandler{h.Handler.WithGroup(name), h.derived}
}

func TestLazyHandler_DerivesOnlyWhenARecordIsWritten(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name        string
		writers     int // goroutines writing through the derived logger
		wantDerived int64
	}{
		{"never written", 0, 0},
		{"written once", 1, 3},
		{"written by many at once", 16, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var buf syncbuf.Buffer
			derived := new(atomic.Int64)
			base := slog.New(LazyHandler(countingHandler{slog.NewTextHandler(&buf, &slog.HandlerOptions{ReplaceAttr: noTime}), derived}))
			l := base.WithGroup("a2a").With("method", "SendMessage").With("request_id", "r-1")
			if got := derived.Load(); got != 0 {
				t.Fatalf("deriving ran %d derivations of the wrapped handler, want none", got)
			}
			if l.Enabled(t.Context(), slog.LevelDebug) || !l.Enabled(t.Context(), slog.LevelInfo) {
				t.Error("Enabled differs from the wrapped handler's (info and above)")
			}
			var wg sync.WaitGroup
			for range tc.writers {
				wg.Go(func() { l.Info("m") })
			}
			wg.Wait()
			if got := derived.Load(); got != tc.wantDerived {
				t.Errorf("ran %d derivations of the wrapped handler, want %d", got, tc.wantDerived)
			}
			want := strings.Repeat("level=INFO msg=m a2a.method=SendMessage a2a.request_id=r-1\n", tc.writers)
			if got := buf.String(); got != want {
				t.Errorf("wrote %q, want %q", got, want)
			}
		})
	}
}

func TestLazyHandler_WrapsOnce(t *testing.T) {
	t.Parallel()
	h := LazyHandler(slog.DiscardHandler)
	if LazyHandler(h) != h {
		t.Error("wrapping a lazy handler again made a new one")
	}
}

// BenchmarkLazyHandler derives a logger as a2a-go does for every request
// and writes nothing with it, through the daemon's handler chain as it is
// and made lazy.
func BenchmarkLazyHandler(b *testing.B) {
	for _, bc := range []struct {
		name string
		wrap func(slog.Handler) slog.Handler
	}{
		{"eager", func(h slog.Handler) slog.Handler { return h }},
		{"lazy", LazyHandler},
	} {
		b.Run(bc.name, func(b *testing.B) {
			log := slog.New(bc.wrap(LogHandler(slog.NewTextHandler(io.Discard, nil)))) //nolint:sloglint // the text handler formats each record, as a real one does
			b.ReportAllocs()
			for b.Loop() {
				l := log.WithGroup("a2a").With("method", "SendMessage").With(slog.String("request_id", "0b6f1f9e-8f4c-4c43-9d7c-5a1f0c2e3d4b"))
				if l.Enabled(context.Background(), slog.LevelDebug) {
					b.Fatal("debug enabled")
				}
			}
		})
	}
}
