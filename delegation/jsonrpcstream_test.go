package delegation

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/iotest"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"

	"github.com/orchd/orchd/internal/testwait"
)

// rpcEvent is an SSE event carrying a JSON-RPC response with result, an
// a2a.Event in its stream form, or any other value as it is.
func rpcEvent(t *testing.T, result any) string {
	t.Helper()
	if ev, ok := result.(a2a.Event); ok {
		result = a2a.StreamResponse{Event: ev}
	}
	b, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": "1", "result": result})
	if err != nil {
		t.Fatal(err)
	}
	return "id: e\ndata: " + string(b) + "\n\n"
}

// TestJSONRPCStreams_ReadsAsA2AGo serves SSE bodies from a real HTTP
// server and reads each with a2a-go's JSON-RPC transport and with
// jsonrpcStreams: the events, the errors (their A2A codes and words) and
// the requests must be the same.
func TestJSONRPCStreams_ReadsAsA2AGo(t *testing.T) {
	t.Parallel()
	task := &a2a.Task{ID: "t1", ContextID: "c1", Status: a2a.TaskStatus{State: a2a.TaskStateWorking}}
	status := &a2a.TaskStatusUpdateEvent{TaskID: "t1", ContextID: "c1", Status: a2a.TaskStatus{State: a2a.TaskStateCompleted}}
	long := &a2a.TaskArtifactUpdateEvent{TaskID: "t1", ContextID: "c1",
		Artifact: &a2a.Artifact{ID: "a1", Parts: a2a.ContentParts{a2a.NewTextPart(strings.Repeat("long ", 40_000))}}}
	taskEvent := rpcEvent(t, task)
	split := strings.Replace(strings.TrimSuffix(strings.TrimPrefix(taskEvent, "id: e\ndata: "), "\n\n"), ",", ",\ndata: ", 1) // one JSON value over two data lines
	notFound := `data: {"jsonrpc":"2.0","id":"1","error":{"code":-32001,"message":"task t1 is gone"}}` + "\n\n"
	withInfo := `data: {"jsonrpc":"2.0","id":"1","error":{"code":-32602,"message":"bad","data":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"R","domain":"d","metadata":{"k":"v"}}]}}` + "\n\n"
	for _, tc := range []struct {
		name   string
		status int
		body   string
		want   int // events
	}{
		{"events", 200, ": keep-alive\n\n" + rpcEvent(t, task) + rpcEvent(t, status), 2},
		{"one value over two data lines", 200, "data: " + split + "\n\n", 1},
		{"no space after the colon", 200, strings.ReplaceAll(rpcEvent(t, task), "data: ", "data:"), 1},
		{"CRLF", 200, strings.ReplaceAll(rpcEvent(t, task)+rpcEvent(t, status), "\n", "\r\n"), 2},
		{"no blank line at the end", 200, strings.TrimSuffix(rpcEvent(t, task), "\n\n"), 1},
		{"events of empty data", 200, "data:\n\ndata: \n\n" + rpcEvent(t, task), 1},
		{"an event longer than the buffer", 200, rpcEvent(t, task) + rpcEvent(t, long), 2},
		{"an error after an event", 200, rpcEvent(t, task) + notFound + rpcEvent(t, status), 1},
		{"an error with details", 200, withInfo, 0},
		{"not JSON", 200, "data: {\n\n", 0},
		{"a result that is no event", 200, rpcEvent(t, map[string]any{"nothing": 1}), 0},
		{"HTTP 503", 503, "", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var mu sync.Mutex
			var reqs []string
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				b, _ := io.ReadAll(r.Body)
				var req map[string]any
				_ = json.Unmarshal(b, &req)
				delete(req, "id")
				seen, _ := json.Marshal(req)
				mu.Lock()
				defer mu.Unlock()
				reqs = append(reqs, fmt.Sprintf("%s %s %s %s ext=%s %s", r.Method, r.URL.Path, r.Header.Get("Content-Type"),
					r.Header.Get("Accept"), r.Header.Get("A2A-Extensions"), seen))
				w.Header().Set("Content-Type", "text/event-stream")
				w.WriteHeader(tc.status)
				_, _ = io.WriteString(w, tc.body)
			}))
			defer srv.Close()
			params := a2aclient.ServiceParams{"A2A-Extensions": {"urn:x"}}
			req := &a2a.SendMessageRequest{Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("hi"))}
			read := func(tr a2aclient.Transport) (evs []string, err error) {
				for ev, err := range tr.SendStreamingMessage(t.Context(), params, req) {
					if err != nil {
						return evs, err
					}
					b, _ := json.Marshal(ev)
					evs = append(evs, fmt.Sprintf("%T %s", ev, b))
				}
				return evs, nil
			}
			theirs, theirErr := read(a2aclient.NewJSONRPCTransport(srv.URL+"/rpc", srv.Client()))
			ours, ourErr := read(newJSONRPCStreams(srv.URL+"/rpc", srv.Client(), nil))
			if len(ours) != tc.want || !slices.Equal(ours, theirs) {
				t.Errorf("events: ours %d, a2a-go's %d, want %d; equal: %v", len(ours), len(theirs), tc.want, slices.Equal(ours, theirs))
			}
			if (ourErr == nil) != (theirErr == nil) || (ourErr != nil && ourErr.Error() != theirErr.Error()) {
				t.Errorf("error: ours %v, a2a-go's %v", ourErr, theirErr)
			}
			for _, sentinel := range []error{a2a.ErrTaskNotFound, a2a.ErrInvalidParams} {
				if errors.Is(ourErr, sentinel) != errors.Is(theirErr, sentinel) {
					t.Errorf("errors.Is(%v): ours %v, a2a-go's %v", sentinel, errors.Is(ourErr, sentinel), errors.Is(theirErr, sentinel))
				}
			}
			var ourA2A, theirA2A *a2a.Error
			if errors.As(theirErr, &theirA2A) && (!errors.As(ourErr, &ourA2A) || fmt.Sprint(ourA2A.Details) != fmt.Sprint(theirA2A.Details)) {
				t.Errorf("details: ours %+v, a2a-go's %+v", ourA2A, theirA2A)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(reqs) != 2 || reqs[0] != reqs[1] {
				t.Errorf("requests differ:\n a2a-go: %v\n ours:   %v", reqs[:1], reqs[1:])
			}
		})
	}
}

// TestJSONRPCStreams_SubscribeToTask checks the resubscription method
// goes out as a2a-go sends it.
func TestJSONRPCStreams_SubscribeToTask(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var methods []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Method string         `json:"method"`
			Params map[string]any `json:"params"`
		}
		_ = json.NewDecoder(r.Body).Decode(&req)
		mu.Lock()
		methods = append(methods, fmt.Sprint(req.Method, req.Params))
		mu.Unlock()
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, rpcEvent(t, &a2a.Task{ID: "t1", ContextID: "c1", Status: a2a.TaskStatus{State: a2a.TaskStateWorking}}))
	}))
	defer srv.Close()
	req := &a2a.SubscribeToTaskRequest{ID: "t1"}
	for _, tr := range []a2aclient.Transport{a2aclient.NewJSONRPCTransport(srv.URL, srv.Client()), newJSONRPCStreams(srv.URL, srv.Client(), nil)} {
		for _, err := range tr.SubscribeToTask(t.Context(), nil, req) {
			if err != nil {
				t.Fatalf("%T: %v", tr, err)
			}
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(methods) != 2 || methods[0] != methods[1] || !strings.HasPrefix(methods[0], methodSubscribeToTask) {
		t.Errorf("requests: %v", methods)
	}
}

// TestSSEData_Bounds checks an event over the bound, in one line or over
// several, ends the stream with an error, and a broken body's error is
// passed on.
func TestSSEData_Bounds(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		body io.Reader
		want error
	}{
		{"a long line", strings.NewReader("data: " + strings.Repeat("x", 100) + "\n\n"), errStreamEventTooLong},
		{"long over lines", strings.NewReader(strings.Repeat("data: "+strings.Repeat("x", 30)+"\n", 5) + "\n"), errStreamEventTooLong},
		{"a broken body", io.MultiReader(strings.NewReader("data: x\n"), iotest.ErrReader(io.ErrUnexpectedEOF)), io.ErrUnexpectedEOF},
	} {
		var got error
		for _, err := range sseData(tc.body, 64) {
			got = err
		}
		if !errors.Is(got, tc.want) {
			t.Errorf("%s: error %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestSSEData_LetsALongEventGo reads a 4 MiB event, then waits in the
// read of the next: a stream can wait hours so, and what it gathered for
// the long line and the event must not stay with it.
func TestSSEData_LetsALongEventGo(t *testing.T) {
	const size = 4 << 20
	base := heapInUse()
	r, w := io.Pipe()
	defer r.Close()
	go func() { _, _ = io.WriteString(w, "data: "+strings.Repeat("x", size)+"\n\n") }()
	body := &countedReader{r: r}
	type event struct{ size, readsBefore int64 }
	got, done := make(chan event, 1), make(chan struct{})
	go func() {
		defer close(done)
		for data, err := range sseData(body, 2*size) {
			if err != nil {
				return
			}
			got <- event{int64(len(data)), body.reads.Load()}
		}
	}()
	ev := <-got
	if ev.size != size {
		t.Fatalf("read an event of %d bytes, want %d", ev.size, size)
	}
	testwait.Until(t, 10*time.Second, "the stream reading again", func() bool { return body.reads.Load() > ev.readsBefore })
	held := int64(heapInUse()) - int64(base)
	r.Close()
	<-done
	if held > size/4 {
		t.Errorf("waiting for the next event, the stream holds %d bytes", held)
	}
}

// countedReader counts the reads made of r.
type countedReader struct {
	r     io.Reader
	reads atomic.Int64
}

func (c *countedReader) Read(p []byte) (int, error) {
	c.reads.Add(1)
	return c.r.Read(p)
}

// heapInUse is the heap in use after a collection.
func heapInUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}

// referenceSSE reads an SSE stream line by line with a bufio.Scanner,
// the way a2a-go's reader does, as FuzzSSEData's reference.
func referenceSSE(body []byte) (events []string, failed bool) {
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 0, 64), len(body)+64)
	var event bytes.Buffer
	flush := func() {
		if event.Len() > 0 {
			events = append(events, event.String())
			event.Reset()
		}
	}
	for sc.Scan() {
		line := sc.Bytes()
		if len(line) == 0 {
			flush()
			continue
		}
		if v, ok := bytes.CutPrefix(line, []byte("data:")); ok {
			if event.Len() > 0 {
				event.WriteByte('\n')
			}
			event.Write(bytes.TrimPrefix(v, []byte(" ")))
		}
	}
	if sc.Err() != nil {
		return events, true
	}
	flush()
	return events, false
}

// FuzzSSEData checks sseData yields what a line scanner reading as
// a2a-go does yields, for any stream.
func FuzzSSEData(f *testing.F) {
	for _, s := range []string{"data: a\n\ndata: b\n\n", "data:x\r\ndata: y\r\n\r\n", ": c\nid: 1\ndata: z", "data:\n\n\n", "\r\n\rdata: q\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		if len(body) > 1<<16 {
			t.Skip()
		}
		want, failed := referenceSSE(body)
		var got []string
		for data, err := range sseData(bytes.NewReader(body), 1<<20) {
			if err != nil {
				t.Fatalf("sseData failed: %v", err)
			}
			got = append(got, string(data))
		}
		if !failed && !slices.Equal(got, want) {
			t.Errorf("sseData(%q) = %q, the reference %q", body, got, want)
		}
	})
}
