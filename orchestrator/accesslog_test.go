package orchestrator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/google/go-cmp/cmp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"google.golang.org/grpc"

	"github.com/orchd/orchd/internal/syncbuf"
	"github.com/orchd/orchd/internal/testwait"
	"github.com/orchd/orchd/telemetry"
)

// loggedDaemon runs a daemon built from cfg, logging JSON at level into
// the buffer returned, until the test ends; it returns the base URL too.
func loggedDaemon(t *testing.T, cfg Config, level slog.Level) (string, *syncbuf.Buffer) {
	t.Helper()
	logs := &syncbuf.Buffer{}
	log, err := telemetry.NewLogger(logs, "json", level)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Listen = "127.0.0.1:0"
	d, err := New(cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	testwait.Until(t, 10*time.Second, "the daemon binding its port", func() bool { return d.Addr() != nil })
	return "http://" + d.Addr().String(), logs
}

// accessRecords are the access log's records in logs.
func accessRecords(t *testing.T, logs *syncbuf.Buffer) []map[string]any {
	t.Helper()
	var recs []map[string]any
	for line := range strings.Lines(logs.String()) {
		var r map[string]any
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if r["component"] == "access" {
			recs = append(recs, r)
		}
	}
	return recs
}

// waitRecord waits for the access record that match accepts.
func waitRecord(t *testing.T, logs *syncbuf.Buffer, match func(map[string]any) bool) map[string]any {
	t.Helper()
	var found map[string]any
	testwait.Succeeds(t, 10*time.Second, "the access record", func() error {
		for _, r := range accessRecords(t, logs) {
			if match(r) {
				found = r
				return nil
			}
		}
		return fmt.Errorf("none such in:\n%s", logs)
	})
	return found
}

func pathIs(p string) func(map[string]any) bool {
	return func(r map[string]any) bool { return r["path"] == p }
}

// TestAccessLog_OneRecordPerRequest sends the daemon requests with and
// without credentials and trace context, over HTTP and gRPC, and finds one
// record for each, with what it should say and nothing secret: neither the
// token nor the query string.
func TestAccessLog_OneRecordPerRequest(t *testing.T) {
	t.Parallel()
	cfg := loadDefaults(t)
	cfg.Auth = authTokens()
	cfg.Log.Access = accessInfo
	cfg.Agent.GRPC.Listen = "127.0.0.1:0"
	base, logs := loggedDaemon(t, cfg, slog.LevelInfo)

	const traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	for _, tc := range []struct {
		name, token, path, traceparent string
		// want is the record's fields; absent lists fields it must not have.
		want   map[string]any
		absent []string
	}{
		{name: "anonymous health", path: "/healthz",
			want: map[string]any{"method": "GET", "status": 200.0, "level": "INFO", "msg": "request"}, absent: []string{"principal", "trace_id"}},
		{name: "authenticated, query left out", token: aliceToken, path: "/v1/agents?access_token=query-secret-42",
			want: map[string]any{"path": "/v1/agents", "status": 200.0, "principal": "alice", "tenant": "acme"}},
		{name: "refused", path: "/v1/delegations",
			want: map[string]any{"status": 401.0}, absent: []string{"principal"}},
		{name: "no such route", token: rootToken, path: "/nosuch",
			want: map[string]any{"status": 404.0, "principal": "root"}, absent: []string{"tenant"}},
		{name: "caller's trace", path: "/readyz", traceparent: "00-" + traceID + "-00f067aa0ba902b7-01",
			want: map[string]any{"status": 200.0, "trace_id": traceID}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequestWithContext(t.Context(), "GET", base+tc.path, nil)
			if err != nil {
				t.Fatal(err)
			}
			if tc.token != "" {
				req.Header.Set("Authorization", "Bearer "+tc.token)
			}
			if tc.traceparent != "" {
				req.Header.Set("traceparent", tc.traceparent)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			path, _, _ := strings.Cut(tc.path, "?")
			r := waitRecord(t, logs, pathIs(path))
			for k, v := range tc.want {
				if r[k] != v {
					t.Errorf("%s = %v, want %v in %v", k, r[k], v, r)
				}
			}
			for _, k := range tc.absent {
				if _, ok := r[k]; ok {
					t.Errorf("record has %s: %v", k, r)
				}
			}
			if d, ok := r["duration"].(float64); !ok || d <= 0 {
				t.Errorf("duration = %v, want a positive number of nanoseconds", r["duration"])
			}
			if b, ok := r["bytes"].(float64); !ok || b <= 0 {
				t.Errorf("bytes = %v, want the answer's size", r["bytes"])
			}
			if _, ok := r["remote"].(string); !ok {
				t.Errorf("no remote address in %v", r)
			}
		})
	}

	// An A2A call over gRPC, refused and then accepted.
	msg := &a2a.SendMessageRequest{Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("x"))}
	if _, err := grpcClient(t, base, "1.0").SendMessage(t.Context(), msg); !errors.Is(err, a2a.ErrUnauthenticated) {
		t.Fatalf("SendMessage without credentials: %v", err)
	}
	r := waitRecord(t, logs, func(r map[string]any) bool { return r["method"] == "gRPC" })
	want := map[string]any{"path": "/lf.a2a.v1.A2AService/SendMessage", "status": "Unauthenticated", "principal": nil}
	if diff := cmp.Diff(want, map[string]any{"path": r["path"], "status": r["status"], "principal": r["principal"]}); diff != "" {
		t.Errorf("gRPC record %v (-want +got):\n%s", r, diff)
	}
	alice := grpcClient(t, base, "1.0", grpc.WithPerRPCCredentials(tokenCredentials(aliceToken)))
	if _, err := alice.GetTask(t.Context(), &a2a.GetTaskRequest{ID: "nosuch"}); !errors.Is(err, a2a.ErrTaskNotFound) {
		t.Fatalf("GetTask: %v", err)
	}
	r = waitRecord(t, logs, pathIs("/lf.a2a.v1.A2AService/GetTask"))
	if r["status"] != "NotFound" || r["principal"] != "alice" {
		t.Errorf("gRPC record %v, want GetTask NotFound by alice", r)
	}

	for _, secret := range []string{"query-secret-42", aliceToken, rootToken} {
		if all := logs.String(); strings.Contains(all, secret) {
			t.Errorf("the log holds %q:\n%s", secret, all)
		}
	}
}

// TestAccessLog_TracedRequestNamesItsTrace: with tracing on, a request
// that brought no trace context, over HTTP or gRPC, gets the trace id of
// the server span orchd recorded for it, once.
func TestAccessLog_TracedRequestNamesItsTrace(t *testing.T) {
	t.Parallel()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	cfg := loadDefaults(t)
	cfg.Telemetry.Providers = telemetry.WithProviders(tp, nil)
	cfg.Log.Access = accessInfo
	cfg.Agent.GRPC.Listen = "127.0.0.1:0"
	base, logs := loggedDaemon(t, cfg, slog.LevelInfo)
	if code := call(t, "GET", base+"/v1/agents", "", nil); code != 200 {
		t.Fatalf("GET /v1/agents: %d", code)
	}
	if _, err := grpcClient(t, base, "1.0").GetTask(t.Context(), &a2a.GetTaskRequest{ID: "nosuch"}); !errors.Is(err, a2a.ErrTaskNotFound) {
		t.Fatalf("GetTask: %v", err)
	}
	// spanTrace is the trace id of the span named name, once it ended (a
	// gRPC call's span ends after its record is logged).
	spanTrace := func(name string) string {
		t.Helper()
		var trace string
		testwait.Until(t, 10*time.Second, "the span "+name+" ended", func() bool {
			for _, s := range rec.Ended() {
				if s.Name() == name {
					trace = s.SpanContext().TraceID().String()
					return true
				}
			}
			return false
		})
		return trace
	}
	for path, span := range map[string]string{
		"/v1/agents":                    "orchd GET /v1/agents",
		"/lf.a2a.v1.A2AService/GetTask": "A2A GetTask",
	} {
		r := waitRecord(t, logs, pathIs(path))
		if want := spanTrace(span); want == "" || r["trace_id"] != want {
			t.Errorf("%s: record's trace_id %v, want the server span's %q", path, r["trace_id"], want)
		}
	}
	// A record names its trace once: the log handler adds none of its own.
	for line := range strings.Lines(logs.String()) {
		if strings.Contains(line, `"component":"access"`) && strings.Count(line, `"trace_id"`) > 1 {
			t.Errorf("access record with more than one trace_id: %s", line)
		}
	}
}

// TestAccessLog_Levels: records go at the configured level, so the
// default (debug) shows only with the logger at debug, and off logs none.
func TestAccessLog_Levels(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		access string
		logger slog.Level
		want   bool
	}{
		{access: "", logger: slog.LevelInfo, want: false},
		{access: accessDebug, logger: slog.LevelDebug, want: true},
		{access: accessInfo, logger: slog.LevelInfo, want: true},
		{access: accessOff, logger: slog.LevelDebug, want: false},
	} {
		t.Run(tc.access+"@"+tc.logger.String(), func(t *testing.T) {
			t.Parallel()
			cfg := loadDefaults(t)
			cfg.Log.Access = tc.access
			base, logs := loggedDaemon(t, cfg, tc.logger)
			for range 2 {
				if code := call(t, "GET", base+"/healthz", "", nil); code != 200 {
					t.Fatalf("GET /healthz: %d", code)
				}
			}
			if got := len(accessRecords(t, logs)); got != map[bool]int{true: 2}[tc.want] {
				t.Errorf("%d access records, want %d:\n%s", got, map[bool]int{true: 2}[tc.want], logs)
			}
		})
	}
}

func TestLogConfig_Access(t *testing.T) {
	t.Parallel()
	cfg := loadDefaults(t)
	if cfg.Log.Access != accessDebug {
		t.Errorf("default log.access %q, want debug", cfg.Log.Access)
	}
	cfg.Log.Access = "verbose"
	if err := cfg.validate(); err == nil || err.Error() != `config: log.access "verbose": want debug, info or off` {
		t.Errorf("validate: %v", err)
	}
}
