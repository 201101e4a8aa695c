package httpgate

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/google/go-cmp/cmp"

	"github.com/orchd/orchd/internal/testwait"
)

// nested returns a JSON object n levels deep.
func nested(n int) string {
	return strings.Repeat(`{"a":`, n-1) + "{}" + strings.Repeat("}", n-1)
}

// testLimits are the limits the unit tests start from: the http
// section's defaults, changed by set.
func testLimits(set func(*Limits)) Limits {
	l := Limits{MaxBodyBytes: 8 << 20, MaxAPIBodyBytes: 64 << 10, MaxJSONDepth: 64, MaxBufferedBodyBytes: 32 << 20, ReadTimeout: 30 * time.Second}
	if set != nil {
		set(&l)
	}
	return l
}

// writeRefusal answers a refusal with its fields as JSON, for the tests
// to read back (refusal).
func writeRefusal(w http.ResponseWriter, rf *Refusal) { WriteJSON(w, rf.Status, rf, "") }

// standInBody is what the endpoint reads in place of a refused caller's
// body too large to read.
const standInBody = `{"standIn":true}`

func standIn(*http.Request) []byte { return []byte(standInBody) }

// testLogger logs through t.Log with -v, and discards otherwise.
func testLogger(t testing.TB) *slog.Logger {
	if !testing.Verbose() {
		return nil
	}
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type tWriter struct{ t testing.TB }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// countingBody counts the bytes read from it.
type countingBody struct {
	r io.Reader
	n atomic.Int64
}

func (c *countingBody) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n.Add(int64(n))
	return n, err
}

func (c *countingBody) Close() error { return nil }

// endless is a body that never ends.
type endless struct{}

func (endless) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = ' '
	}
	return len(p), nil
}

// TestBodyLimits_ReadsNoFurtherThanTheLimit checks what the limits read of
// a body over the limit: nothing when its Content-Length says so, and
// limit+1 bytes of an endless chunked one; the endpoint never runs.
func TestBodyLimits_ReadsNoFurtherThanTheLimit(t *testing.T) {
	t.Parallel()
	l := NewBodyLimits(testLimits(func(l *Limits) { l.MaxBodyBytes = 1000 }), testLogger(t))
	var ran atomic.Bool
	h := l.A2A(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { ran.Store(true) }), writeRefusal, standIn)
	for _, tc := range []struct {
		name     string
		declared int64
		want     int64
	}{
		{"Content-Length over", 1 << 30, 0},
		{"chunked", -1, 1001},
	} {
		body := &countingBody{r: endless{}}
		req := httptest.NewRequest("POST", "/a2a/jsonrpc", nil)
		req.Body, req.ContentLength = body, tc.declared
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if got := body.n.Load(); got != tc.want {
			t.Errorf("%s: read %d bytes, want %d", tc.name, got, tc.want)
		}
		if rec.Header().Get("Connection") != "close" || !strings.Contains(rec.Body.String(), "over the limit of 1000 bytes") {
			t.Errorf("%s: answer %v %s", tc.name, rec.Header(), rec.Body)
		}
	}
	if ran.Load() {
		t.Error("the endpoint ran on a refused body")
	}
}

// TestBodyLimits_LargestLimits passes bodies on whole under the largest
// limits a config can set, chunked or with their length.
func TestBodyLimits_LargestLimits(t *testing.T) {
	t.Parallel()
	l := NewBodyLimits(testLimits(func(l *Limits) { l.MaxBodyBytes, l.MaxAPIBodyBytes = math.MaxInt64, math.MaxInt64 }), testLogger(t))
	const body = `{"jsonrpc":"2.0","id":1,"method":"SendMessage"}`
	for _, declared := range []int64{int64(len(body)), -1} {
		var got []byte
		h := l.A2A(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) { got, _ = io.ReadAll(r.Body) }), writeRefusal, standIn)
		req := httptest.NewRequest("POST", "/a2a/jsonrpc", strings.NewReader(body))
		req.ContentLength = declared
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if string(got) != body {
			t.Errorf("Content-Length %d: the endpoint read %q (answer %d %s), want the body", declared, got, rec.Code, rec.Body)
		}
	}
}

func TestScanJSON(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		in    string
		depth int
		id    string // the text at idAt, or "" for none
	}{
		{"empty", ``, 0, ""},
		{"scalar", `"x"`, 0, ""},
		{"flat", `{"jsonrpc":"2.0","id":1,"method":"m"}`, 1, "1"},
		{"id last", `{"params":{"id":"inner"},"id":"outer"}`, 2, `"outer"`},
		{"id with spaces", "{ \"id\" :\n\t\"x\" }", 1, `"x"`},
		{"id as a value", `{"method":"id","x":1}`, 1, ""},
		{"nested id only", `{"params":{"id":5}}`, 2, ""},
		{"brackets in strings", `{"a":"[[[{{{","b":["]]]"]}`, 2, ""},
		{"escaped quotes", `{"a":"\"[[[\"","b":[[1]]}`, 3, ""},
		{"escaped backslash ends string", `{"a":"\\","b":[[[1]]]}`, 4, ""},
		{"three backslashes", `{"a":"\\\"[","b":[1]}`, 2, ""},
		{"unterminated string", `{"a":[["abc`, 3, ""},
		{"arrays", `[[[[]]],[[[[[]]]]]]`, 6, ""},
		{"deep", nested(3000), 3000, ""},
		{"id in an array", `[{"id":1}]`, 2, ""},
	}
	for _, tc := range tests {
		depth, at := scanJSON([]byte(tc.in))
		got := ""
		if at >= 0 {
			got = strings.TrimSpace(strings.SplitN(strings.SplitN(tc.in[at:], ",", 2)[0], "}", 2)[0])
		}
		if depth != tc.depth || got != tc.id {
			t.Errorf("%s: scanJSON(%.40q) = depth %d, id %q; want %d, %q", tc.name, tc.in, depth, got, tc.depth, tc.id)
		}
	}
	for _, tc := range []struct {
		in   string
		want any
	}{
		{`{"id":"a\"b"}`, `a"b`},
		{`{"id":12,"x":1}`, json.Number("12")},
		{`{"id":-1.5e3}`, json.Number("-1.5e3")},
		{`{"id":null}`, nil},
		{`{"id":{"x":1}}`, nil},
		{`{"id":true}`, nil},
		{`{"id":"trunc`, nil},
		{`{"x":1}`, nil},
	} {
		if got := JSONRPCID([]byte(tc.in)); got != tc.want {
			t.Errorf("JSONRPCID(%s) = %#v, want %#v", tc.in, got, tc.want)
		}
	}
}

// FuzzScanJSON checks scanJSON's depth against encoding/json's reading of
// every valid JSON document: they agree, and its top-level id, when it
// finds one, is the one encoding/json decodes.
func FuzzScanJSON(f *testing.F) {
	f.Add(typicalSendMessage())
	f.Add([]byte(`{"jsonrpc":"2.0","id":"req-7","method":"SendMessage","params":{"message":{"parts":[{"text":"a \"quoted\" [text]"}],"metadata":{"extra":` +
		nested(5) + `}}}}`))
	f.Add([]byte(`{"message":{"parts":[{"text":"a \"quoted\" [text]"}],"metadata":{"extra":` + nested(5) + `}}}`))
	f.Add([]byte(`[[[{"a":"\\"}]],{"id":1}]`))
	f.Add([]byte(`{"id" : "x", "b": "\\\\\"]"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		depth, at := scanJSON(b)
		if !json.Valid(b) {
			return
		}
		want, wantID := tokenDepth(t, b)
		if depth != want {
			t.Fatalf("scanJSON(%q) depth = %d, encoding/json says %d", b, depth, want)
		}
		if got := jsonRPCIDAt(b, at); at >= 0 && fmt.Sprint(got) != fmt.Sprint(wantID) {
			t.Fatalf("scanJSON(%q) id = %v, encoding/json says %v", b, got, wantID)
		}
	})
}

// tokenDepth returns b's nesting depth as encoding/json's tokens give it,
// and the value of the last top-level "id" member when it is a string or
// a number.
func tokenDepth(t *testing.T, b []byte) (int, any) {
	t.Helper()
	var top map[string]json.RawMessage
	var id any
	if json.Unmarshal(b, &top) == nil {
		if raw, ok := top["id"]; ok {
			id = jsonRPCIDAt(raw, 0)
		}
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	depth, d := 0, 0
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			return depth, id
		}
		if err != nil {
			t.Fatalf("token: %v", err)
		}
		switch tok {
		case json.Delim('{'), json.Delim('['):
			d++
			depth = max(depth, d)
		case json.Delim('}'), json.Delim(']'):
			d--
		}
	}
}

// typicalSendMessage is a SendMessage request as orchd receives one from
// another orchd: a text part and the delegation chain context.
func typicalSendMessage() []byte {
	return []byte(`{"jsonrpc":"2.0","id":"9d6c1f0e-5f4e-4a43-9c43-7d0e1b7c2a11","method":"SendMessage","params":{"message":{` +
		`"messageId":"0b7f6a4e-3c2d-4f1a-8e9b-5a6c7d8e9f01","contextId":"c-12","role":"ROLE_USER",` +
		`"parts":[{"text":"Survey the recent literature on steering long-running agent tasks and summarise the three most cited approaches."}],` +
		`"metadata":{"skill":"research","https://orchd.dev/ext/delegation/v1":{"path":["a","b"],"depth":2,` +
		`"deadline":"2026-08-01T12:00:00Z","skill":"research","requires":["streaming"],"trace":{"id":"4bf92f3577b34da6a3ce929d0e0e4736"}}},` +
		`"extensions":["https://orchd.dev/ext/delegation/v1"]},"configuration":{"acceptedOutputModes":["text/plain"]}}}`)
}

// BenchmarkBodyLimits measures what the limits cost each request: the
// depth scan alone, and the whole check (reading the body into a pooled
// buffer, scanning it, passing it on) against handing the body straight
// to the endpoint. decode is what encoding/json, as a2a-go uses it, takes
// to decode the same body, for scale.
func BenchmarkBodyLimits(b *testing.B) {
	body := typicalSendMessage()
	b.Run("decode", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		b.ReportAllocs()
		for b.Loop() {
			var req struct {
				Params a2a.SendMessageRequest `json:"params"`
			}
			if err := json.Unmarshal(body, &req); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("scan", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		b.ReportAllocs()
		for b.Loop() {
			if d, _ := scanJSON(body); d != 6 {
				b.Fatalf("depth %d", d)
			}
		}
	})
	read := http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) { _, _ = io.Copy(io.Discard, r.Body) })
	for _, tc := range []struct {
		name string
		h    http.Handler
	}{
		{"direct", read},
		{"limited", NewBodyLimits(testLimits(nil), nil).A2A(read, writeRefusal, standIn)},
	} {
		b.Run(tc.name, func(b *testing.B) {
			rd := bytes.NewReader(body)
			rc := io.NopCloser(rd)
			req := httptest.NewRequest("POST", "/a2a/jsonrpc", nil)
			w := httptest.NewRecorder()
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				rd.Reset(body)
				req.Body, req.ContentLength = rc, int64(len(body))
				tc.h.ServeHTTP(w, req)
			}
		})
	}
}

// TestBodyLimits_BudgetBoundsBodiesHeldAtOnce holds the whole budget with
// two bodies still arriving: a third, small one waits for room, and is
// read once one of them ends. With the wait bounded, it is refused as
// busy in the endpoint's shape, naming the setting.
func TestBodyLimits_BudgetBoundsBodiesHeldAtOnce(t *testing.T) {
	t.Parallel()
	const maxBody = 1 << 10
	l := NewBodyLimits(testLimits(func(l *Limits) { l.MaxBodyBytes, l.MaxBufferedBodyBytes = maxBody, 2*(maxBody+1)+1 }), testLogger(t))
	l.readTimeout = time.Hour
	var served atomic.Int64
	srv := httptest.NewServer(l.A2A(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		served.Add(1)
	}), writeRefusal, standIn))
	t.Cleanup(srv.Close)
	post := func(body io.Reader, n int64) <-chan error {
		done := make(chan error, 1)
		go func() {
			req, _ := http.NewRequest("POST", srv.URL, body)
			req.ContentLength = n
			resp, err := srv.Client().Do(req)
			if err == nil {
				resp.Body.Close()
			}
			done <- err
		}()
		return done
	}
	var holders []*io.PipeWriter
	var held []<-chan error
	for range 2 {
		pr, pw := io.Pipe()
		holders = append(holders, pw)
		held = append(held, post(pr, maxBody))
		if _, err := pw.Write([]byte(`{"jsonrpc":"2.0",`)); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		for _, pw := range holders {
			pw.Close()
		}
	})
	held3 := func() { // until both bodies hold their room
		t.Helper()
		testwait.Until(t, 10*time.Second, "the bodies taking the budget", func() bool {
			if l.budget.TryAcquire(3) {
				l.budget.Release(3)
				return false
			}
			return true
		})
	}
	held3()
	third := post(strings.NewReader(`{}`), 2)
	select {
	case err := <-third:
		t.Fatalf("a body was read while the budget was held: %v", err)
	case <-time.After(300 * time.Millisecond):
	}
	if _, err := holders[0].Write([]byte(strings.Repeat(" ", maxBody-17))); err != nil {
		t.Fatal(err)
	}
	for _, done := range []<-chan error{held[0], third} {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	if n := served.Load(); n != 2 {
		t.Errorf("served %d requests, want 2", n)
	}

	// Bounded waits: the budget is held again, and the next body is
	// refused once its wait ran out.
	l.readTimeout = 100 * time.Millisecond
	pr, pw := io.Pipe()
	holders = append(holders, pw)
	post(pr, maxBody)
	if _, err := pw.Write([]byte(`{`)); err != nil {
		t.Fatal(err)
	}
	held3()
	resp, err := srv.Client().Post(srv.URL, "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":"req-9","method":"GetTask"}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var rf Refusal
	if err := json.NewDecoder(resp.Body).Decode(&rf); err != nil {
		t.Fatalf("a body with no room: %d: %v", resp.StatusCode, err)
	}
	type busy struct {
		Status  int
		Busy    bool
		Setting string
	}
	if diff := cmp.Diff(busy{http.StatusServiceUnavailable, true, "http.maxBufferedBodyBytes"}, busy{resp.StatusCode, rf.Busy, rf.Setting}); diff != "" {
		t.Errorf("a body with no room (-want +got):\n%s", diff)
	}
	if !strings.Contains(rf.Msg, "http.maxBufferedBodyBytes") {
		t.Errorf("a body with no room: %q, want it to name http.maxBufferedBodyBytes", rf.Msg)
	}
}

// TestBodyLimits_BudgetHeldUntilTheAnswer: a body's budget is held while
// the endpoint reads and decodes it, and given back once the endpoint
// starts its answer, before it returns (as an event stream's may be much
// later).
func TestBodyLimits_BudgetHeldUntilTheAnswer(t *testing.T) {
	t.Parallel()
	const budget = 4 * maxPooledBody
	l := NewBodyLimits(testLimits(func(l *Limits) { l.MaxBodyBytes, l.MaxBufferedBodyBytes = 2*maxPooledBody, budget }), testLogger(t))
	var heldWhileRead, freeOnceAnswered atomic.Bool
	h := l.A2A(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		if !l.budget.TryAcquire(budget) {
			heldWhileRead.Store(true)
		} else {
			l.budget.Release(budget)
		}
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		if l.budget.TryAcquire(budget) {
			freeOnceAnswered.Store(true)
			l.budget.Release(budget)
		}
	}), writeRefusal, standIn)
	req := httptest.NewRequest("POST", "/a2a/jsonrpc", strings.NewReader(strings.Repeat(" ", 2*maxPooledBody)))
	h.ServeHTTP(httptest.NewRecorder(), req)
	if !heldWhileRead.Load() || !freeOnceAnswered.Load() {
		t.Errorf("budget held while the body was decoded: %v; given back at the answer: %v", heldWhileRead.Load(), freeOnceAnswered.Load())
	}
	if !l.budget.TryAcquire(budget) {
		t.Error("budget not given back")
	}
}

// TestBodyLimits_RefusedCallersTakeNoBudget holds many bodies of callers
// the gate refused, each arriving slowly: they take room of their own, so
// an authenticated body is read at once; once that room is full, a
// refused caller's body is not read at all.
func TestBodyLimits_RefusedCallersTakeNoBudget(t *testing.T) {
	t.Parallel()
	const maxBody = 1 << 10
	l := NewBodyLimits(testLimits(func(l *Limits) { l.MaxBodyBytes, l.MaxBufferedBodyBytes = maxBody, 2*(maxBody+1)+1 }), testLogger(t))
	l.readTimeout = time.Hour
	var standIns atomic.Int64
	inner := l.A2A(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if string(b) == standInBody {
			standIns.Add(1)
		}
	}), writeRefusal, standIn)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Refused") != "" {
			r = r.WithContext(context.WithValue(r.Context(), refusalKey{}, "no credentials"))
		}
		inner.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	post := func(body io.Reader, n int64, refused bool) <-chan error {
		done := make(chan error, 1)
		go func() {
			req, _ := http.NewRequest("POST", srv.URL, body)
			req.ContentLength = n
			if refused {
				req.Header.Set("X-Refused", "1")
			}
			resp, err := srv.Client().Do(req)
			if err == nil {
				resp.Body.Close()
			}
			done <- err
		}()
		return done
	}
	const stalled = maxRefusedBodies/(maxBody+1) + 8 // more than the refused room holds
	for range stalled {
		pr, pw := io.Pipe()
		t.Cleanup(func() { pw.Close() })
		post(pr, maxBody, true)
		go func() { _, _ = pw.Write([]byte("{")) }()
	}
	select {
	case err := <-post(strings.NewReader(strings.Repeat(" ", maxBody)), maxBody, false):
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("an authenticated body waited behind refused callers' bodies")
	}
	testwait.Until(t, 10*time.Second, "refused bodies past the room answered unread", func() bool { return standIns.Load() > 0 })
}
