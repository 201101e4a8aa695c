package orchestrator

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/chromedp/chromedp"
	"github.com/google/go-cmp/cmp"

	"github.com/orchd/orchd/delegation"
	"github.com/orchd/orchd/internal/testagent"
	"github.com/orchd/orchd/registry"
	"github.com/orchd/orchd/steering"
)

// chromium returns the browser the console's browser tests drive, or
// skips the test where there is none, unless ORCHD_BROWSER=require (as
// in CI) makes that a failure.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("ORCHD_BROWSER") == "require" {
		t.Fatal("no chromium on PATH, and ORCHD_BROWSER=require: install it (apt-get install -y chromium)")
	}
	t.Skip("no chromium on PATH: the console's browser test is skipped (apt-get install -y chromium; ORCHD_BROWSER=require makes this a failure)")
	return ""
}

// browser starts a headless chromium for the test, with more options
// when given, and returns its tab.
func browser(t *testing.T, more ...chromedp.ExecAllocatorOption) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium(t)), chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1280, 900))
	opts = append(opts, more...)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(allocCtx)
	t.Cleanup(func() { cancel(); cancelAlloc() })
	if err := chromedp.Do(ctx); err != nil { // starts the browser
		t.Fatalf("start chromium: %v", err)
	}
	return ctx
}

// js evaluates expr in the page.
func js[T any](t *testing.T, ctx context.Context, expr string) T {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

// until waits for expr to be true in the page, without reloading it.
func until(t *testing.T, ctx context.Context, what, expr string) {
	t.Helper()
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](expr, chromedp.WithPollingTimeout(10*time.Second))); err != nil {
		page := js[string](t, ctx, `document.querySelector("main").innerText`)
		t.Fatalf("%s: %v; the page reads:\n%s", what, err, page)
	}
}

// screenshot saves the whole page as a PNG under dir.
func screenshot(t *testing.T, ctx context.Context, dir, name string) {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, name), png, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestConsole_BrowserFollowsAndSteersATwoHopChain drives the tree page of
// a delegation A → B → C in chromium: states and receipts appear as they
// happen, without reloading, and a steer sent from the page crosses every
// hop. It logs the console's figures (docs/console.md).
func TestConsole_BrowserFollowsAndSteersATwoHopChain(t *testing.T) {
	if testing.Short() {
		t.Skip("drives a headless chromium through a two-hop chain (~7 s)")
	}
	ctx := browser(t)
	c := testagent.Start(t, testagent.Options{Name: "C", Skill: "research", Streaming: true, Steering: true}, testagent.Steerable())
	b := orchdNode(t, "b", "research", registry.Spec{ID: "c", URL: c.URL})
	a := orchdNode(t, "a", "research", registry.Spec{ID: "b", URL: b})
	var rec delegation.Record
	if code := call(t, "POST", a+"/v1/delegations", `{"text": "survey", "skill": "research", "requires": ["steerable"]}`, &rec); code != 201 {
		t.Fatalf("delegate = %d", code)
	}
	waitFor(t, a, rec.ID, a2a.TaskStateWorking)
	shots := t.TempDir()
	tree := a + "/ui/delegations/" + rec.ID

	if err := chromedp.Do(ctx, chromedp.Navigate(tree), chromedp.WaitVisible("#events")); err != nil {
		t.Fatal(err)
	}
	until(t, ctx, "the page follows the events", `document.getElementById("live").textContent === "following live"`)
	js[bool](t, ctx, `window.notReloaded = true`)

	// The hop below b is named before any steer: b reports it.
	until(t, ctx, "the lineage names the agent below b", `[...document.querySelectorAll("#hops strong")].map(s => s.textContent).join(",").endsWith(",b,C (c)")`)
	if n := js[int](t, ctx, `document.querySelectorAll("#hops li[data-lineage]").length`); n != 1 {
		t.Errorf("%d hops from the lineage, want C alone", n)
	}
	if js[bool](t, ctx, `(n => n !== null && !n.hidden)(document.getElementById("below-unknown"))`) {
		t.Error("the page says the hops below b are unknown")
	}

	// A steer sent elsewhere (the API) shows up: its receipt, every hop.
	var r steering.Receipt
	if code := call(t, "POST", a+"/v1/delegations/"+rec.ID+":steer", `{"text": "narrow to 2025"}`, &r); code != 200 {
		t.Fatalf("steer = %d", code)
	}
	until(t, ctx, "the receipt appears", `[...document.querySelectorAll("#receipts li")].some(li => li.textContent.includes("a #1 → b #1 → C #1"))`)
	until(t, ctx, "the agent's acknowledgement appears", `[...document.querySelectorAll("#events td")].some(td => td.textContent.includes("narrow to 2025"))`)
	until(t, ctx, "the hop below b stays named once", `[...document.querySelectorAll("#hops strong")].map(s => s.textContent).join(",").endsWith(",b,C (c)")`)
	screenshot(t, ctx, shots, "1-receipt-live.png")

	// A steer from the page: the receipt is shown in place.
	if err := chromedp.Do(ctx, chromedp.SendKeys("#steer-text", "from the page"), chromedp.Click(`form[action$="/steer"] button`)); err != nil {
		t.Fatal(err)
	}
	until(t, ctx, "the page shows the steer's receipt", `document.getElementById("outcome").textContent.includes("steer done: receipt a #2 → b #2 → C #2")`)
	if !slices.ContainsFunc(c.TookSignals(t, 2), func(s steering.Signal) bool { return testagent.Text(s.Message) == "from the page" }) {
		t.Errorf("C did not take the page's steer: %+v", c.Signals())
	}
	screenshot(t, ctx, shots, "2-steered-from-the-page.png")

	// Update latency: an event's arrival at A, and the steer's being sent,
	// to its row in the DOM.
	var sinceSent []time.Duration
	for i := range 20 {
		sent := time.Now()
		if code := call(t, "POST", a+"/v1/delegations/"+rec.ID+":steer", fmt.Sprintf(`{"text": "round %d"}`, i), nil); code != 200 {
			t.Fatalf("steer %d = %d", i, code)
		}
		ack := fmt.Sprintf(`[...document.querySelectorAll("#events tr")].find(tr => tr.lastChild.textContent === "round %d" && tr.children[2].textContent !== "steer")`, i)
		until(t, ctx, "the acknowledgement appears", ack+` !== undefined`)
		shown := js[int64](t, ctx, `Number(`+ack+`.dataset.shownAt)`)
		sinceSent = append(sinceSent, time.UnixMilli(shown).Sub(sent))
	}
	lag := js[[]int64](t, ctx, `[...document.querySelectorAll("#events tr[data-shown-at]")].map(tr => Number(tr.dataset.shownAt) - Date.parse(tr.querySelector("time").dateTime))`)
	if !js[bool](t, ctx, `window.notReloaded === true`) {
		t.Error("the page reloaded")
	}

	// A tree of 3 hops and over 100 events, loaded afresh.
	for i := 0; ; i++ {
		var now delegation.Record
		call(t, "GET", a+"/v1/delegations/"+rec.ID, "", &now)
		if now.LastEvent >= 100 {
			break
		}
		call(t, "POST", a+"/v1/delegations/"+rec.ID+":steer", fmt.Sprintf(`{"text": "more %d"}`, i), nil)
	}
	var loads []time.Duration
	var weight int64
	for i := range 5 {
		if err := chromedp.Do(ctx, chromedp.Navigate(tree), chromedp.WaitVisible("#events")); err != nil {
			t.Fatal(err)
		}
		until(t, ctx, "the page has loaded", `document.readyState === "complete"`)
		ms := js[float64](t, ctx, `performance.getEntriesByType("navigation")[0].loadEventEnd`)
		loads = append(loads, time.Duration(ms*float64(time.Millisecond)))
		if i == 0 {
			// A stylesheet or script from the cache transfers nothing;
			// its body counts as the first visit's transfer would.
			weight = js[int64](t, ctx, `[...performance.getEntriesByType("navigation"), ...performance.getEntriesByType("resource").filter(e => !e.name.includes("/events"))].reduce((n, e) => n + Math.max(e.transferSize, e.encodedBodySize), 0)`)
		}
	}
	if n := js[int](t, ctx, `document.querySelectorAll("#events tr").length`); n < 100 {
		t.Errorf("the tree page shows %d events, want 100 or more", n)
	}
	hops := js[[]string](t, ctx, `[...document.querySelectorAll("#hops strong")].map(s => s.textContent)`)
	if len(hops) != 3 || !strings.HasPrefix(hops[0], "orchd a") {
		t.Errorf("hops = %q, want orchd a, b, C (c)", hops)
	} else if diff := cmp.Diff([]string{"b", "C (c)"}, hops[1:]); diff != "" {
		t.Errorf("hops after orchd a (-want +got):\n%s", diff)
	}
	screenshot(t, ctx, shots, "3-tree-100-events.png")

	// The end of the work, live: the state turns completed.
	until(t, ctx, "the page follows the events", `document.getElementById("live").textContent === "following live"`)
	if err := chromedp.Do(ctx, chromedp.SendKeys("#steer-text", "finish"), chromedp.Click(`form[action$="/steer"] button`)); err != nil {
		t.Fatal(err)
	}
	until(t, ctx, "the state turns completed", `document.getElementById("state").textContent === "completed"`)
	until(t, ctx, "the stream is closed", `document.getElementById("live").textContent === "ended"`)
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(390, 844)); err != nil {
		t.Fatal(err)
	}
	screenshot(t, ctx, shots, "4-completed-phone.png")

	slices.Sort(loads)
	slices.Sort(sinceSent)
	slices.Sort(lag)
	t.Logf("tree page weight: %d bytes transferred (page, stylesheet, script)", weight)
	t.Logf("tree of 3 hops and %d events: loaded and rendered in %v (median of 5; %v to %v)", js[int](t, ctx, `document.querySelectorAll("#events tr").length`), loads[2].Round(100*time.Microsecond), loads[0].Round(100*time.Microsecond), loads[4].Round(100*time.Microsecond))
	t.Logf("update latency, event at A to the DOM: median %d ms, max %d ms over %d events", lag[len(lag)/2], lag[len(lag)-1], len(lag))
	t.Logf("update latency, steer sent at A to the agent's acknowledgement in the DOM (A → B → C and back): median %v, max %v over %d", sinceSent[len(sinceSent)/2].Round(time.Millisecond), sinceSent[len(sinceSent)-1].Round(time.Millisecond), len(sinceSent))
	t.Logf("screenshots in %s", shots)
	if weight > 100<<10 {
		t.Errorf("the tree page weighs %d bytes, over 100 KB", weight)
	}
}

// TestConsole_TreePageWeight measures what the tree page costs to load
// with its stylesheet and script, uncompressed, without a browser.
func TestConsole_TreePageWeight(t *testing.T) {
	t.Parallel()
	worker := testagent.Start(t, testagent.Options{Name: "Worker", Skill: "research", Streaming: true, Steering: true}, testagent.Steerable())
	cfg := loadDefaults(t)
	cfg.Agents = []registry.Spec{{ID: "worker", URL: worker.URL}}
	base := startDaemon(t, cfg)
	var rec delegation.Record
	if code := call(t, "POST", base+"/v1/delegations", `{"text": "survey", "skill": "research"}`, &rec); code != 201 {
		t.Fatalf("delegate = %d", code)
	}
	waitFor(t, base, rec.ID, a2a.TaskStateWorking)
	for i := range 50 {
		call(t, "POST", base+"/v1/delegations/"+rec.ID+":steer", fmt.Sprintf(`{"text": "steer number %d"}`, i), nil)
	}
	total := 0
	for _, path := range []string{"/ui/delegations/" + rec.ID, "/ui/static/console.css", "/ui/static/console.js"} {
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("GET %s = %d", path, resp.StatusCode)
		}
		total += len(b)
	}
	call(t, "GET", base+"/v1/delegations/"+rec.ID, "", &rec)
	t.Logf("tree page of %d events with its stylesheet and script: %d bytes uncompressed", rec.LastEvent, total)
	if total > 100<<10 {
		t.Errorf("tree page weighs %d bytes, over 100 KB", total)
	}
	call(t, "POST", base+"/v1/delegations/"+rec.ID+":cancel", "", nil)
}
