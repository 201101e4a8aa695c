package registry

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/orchd/orchd/capability"
)

// fleet serves n distinct, realistic cards (testdata v1-full.json with the
// name and skills made unique) at /a/{i}/.well-known/agent-card.json and
// registers them all.
func fleet(tb testing.TB, n int) (*Registry, *httptest.Server) {
	tb.Helper()
	tmpl, err := os.ReadFile("../capability/testdata/cards/v1-full.json")
	if err != nil {
		tb.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/a/{i}/.well-known/agent-card.json", func(w http.ResponseWriter, r *http.Request) {
		i := r.PathValue("i")
		card := strings.ReplaceAll(string(tmpl), "Research Agent", "Agent "+i)
		card = strings.ReplaceAll(card, `"web-research"`, `"web-research-`+i+`"`)
		w.Header().Set("Cache-Control", "max-age=3600")
		w.Header().Set("ETag", `"`+i+`"`)
		_, _ = w.Write([]byte(card))
	})
	srv := httptest.NewServer(mux)
	r, err := New(Config{AllowNetworks: []string{"127.0.0.0/8"}, MaxEntries: n}, nil)
	if err != nil {
		tb.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, n)
	next := make(chan int)
	for range 8 {
		wg.Go(func() {
			for i := range next {
				if _, err := r.Add(context.Background(), Spec{ID: fmt.Sprintf("agent-%d", i), URL: fmt.Sprintf("%s/a/%d", srv.URL, i)}); err != nil {
					errs <- err
				}
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	close(errs)
	for err := range errs {
		tb.Fatal(err)
	}
	return r, srv
}

// TestLookups_DoNotAllocate guards the 0 allocs/op target of cached lookups.
func TestLookups_DoNotAllocate(t *testing.T) {
	r, srv := fleet(t, 50)
	defer srv.Close()
	defer r.Close()
	url := srv.URL + "/a/7"
	lookups := map[string]func(){
		"Get":          func() { _, _ = r.Get("agent-7") },
		"ByURL":        func() { _, _ = r.ByURL(url) },
		"BySkill":      func() { _ = r.BySkill("web-research-7") },
		"ByCapability": func() { _ = r.ByCapability("streaming") },
		"ByExtension":  func() { _ = r.ByExtension(capability.SteeringURI) },
		"List":         func() { _ = r.List() },
	}
	for name, fn := range lookups {
		fn() // List builds its slice on first use
		if n := testing.AllocsPerRun(1000, fn); n != 0 {
			t.Errorf("%s allocates %.1f times per call, want 0", name, n)
		}
	}
}

// BenchmarkLookup measures cached lookups among 10,000 agents, next to a
// plain map read (the direct call) in the same run. Registering the
// agents takes far longer than the lookups, so one fleet serves
// lookupRounds rounds of every lookup, taken in turn: go test names the
// repeated sub-benchmarks name#01, name#02.
func BenchmarkLookup(b *testing.B) {
	r, srv := fleet(b, 10_000)
	defer srv.Close()
	defer r.Close()
	direct := make(map[string]*Agent, 10_000)
	for _, a := range r.List() {
		direct[a.ID] = a
	}
	url := srv.URL + "/a/4242"
	var sink *Agent
	var sinks []*Agent
	for range lookupRounds {
		b.Run("direct-map", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				sink = direct["agent-4242"]
			}
		})
		b.Run("Get", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				sink, _ = r.Get("agent-4242")
			}
		})
		b.Run("Get-parallel", func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					_, _ = r.Get("agent-4242")
				}
			})
		})
		b.Run("ByURL", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				sink, _ = r.ByURL(url)
			}
		})
		b.Run("BySkill", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				sinks = r.BySkill("web-research-4242")
			}
		})
		b.Run("ByCapability", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				sinks = r.ByCapability("streaming")
			}
		})
	}
	_, _ = sink, sinks
}

// lookupRounds is how many times BenchmarkLookup measures each lookup.
const lookupRounds = 5

// BenchmarkMemory registers 10,000 agents through a loopback card server
// and reports the live heap they take, per agent. Run it once:
//
//	go test ./registry -run '^$' -bench Memory -benchtime 1x
func BenchmarkMemory(b *testing.B) {
	for b.Loop() {
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		r, srv := fleet(b, 10_000)
		runtime.GC()
		runtime.ReadMemStats(&after)
		if r.Len() != 10_000 {
			b.Fatalf("registered %d agents", r.Len())
		}
		perAgent := float64(after.HeapAlloc-before.HeapAlloc) / 10_000
		b.ReportMetric(perAgent, "B/agent")
		b.ReportMetric(perAgent*10_000/(1<<20), "MiB/10k-agents")
		r.Close()
		srv.Close()
	}
}
