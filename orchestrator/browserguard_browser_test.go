package orchestrator

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/chromedp/chromedp"

	"github.com/orchd/orchd/delegation"
	"github.com/orchd/orchd/httpapi"
	"github.com/orchd/orchd/internal/testagent"
	"github.com/orchd/orchd/registry"
)

// TestBrowserGuard_InChromium runs the attacks on a development daemon in
// chromium, whose resolver is told that attacker.test and rebind.test are
// 127.0.0.1: a page of another site posts what a browser sends without
// asking first (no-cors fetches: a bare POST, a text/plain body, an A2A
// 0.3 task with no type), and a page whose name was rebound to orchd's
// address reads and cancels from what the browser takes for its own
// origin. Nothing is done, which the daemon's records show.
func TestBrowserGuard_InChromium(t *testing.T) {
	if testing.Short() {
		t.Skip("drives a headless chromium")
	}
	ctx := browser(t, chromedp.Flag("host-resolver-rules", "MAP attacker.test 127.0.0.1, MAP rebind.test 127.0.0.1"))
	worker := testagent.Start(t, testagent.Options{Name: "Worker", Skill: "research", Streaming: true}, testagent.Hang())
	card, _ := agentServer(t, testCard(t, "v1-minimal.json"))
	cfg := loadDefaults(t)
	cfg.Agents = []registry.Spec{{ID: "worker", URL: worker.URL}}
	d := runDaemon(t, cfg)
	port := d.Addr().String()[strings.LastIndex(d.Addr().String(), ":")+1:]
	base := "http://127.0.0.1:" + port
	var rec delegation.Record
	if code := call(t, "POST", base+"/v1/delegations", `{"text": "survey", "skill": "research"}`, &rec); code != 201 {
		t.Fatalf("delegate = %d", code)
	}
	waitFor(t, base, rec.ID, a2a.TaskStateWorking)

	// Another site's page: every fetch is sent, its answer opaque.
	attacks := fmt.Sprintf(`const d = "http://127.0.0.1:%s";
Promise.allSettled([
  fetch(d + "/v1/delegations/%s:cancel", {method: "POST", mode: "no-cors"}),
  fetch(d + "/v1/agents", {method: "POST", mode: "no-cors", headers: {"Content-Type": "text/plain"}, body: JSON.stringify({url: %q})}),
  fetch(d + "/a2a/v0.3/jsonrpc", {method: "POST", mode: "no-cors", body: new Blob([%s])}),
]).then(r => { document.title = "sent " + r.filter(x => x.status === "fulfilled").length; });`, port, rec.ID, card.URL, strconv.Quote(sendMessage03))
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprintf(w, "<!doctype html><title>loading</title><script>%s</script>", attacks)
	}))
	t.Cleanup(site.Close)
	sitePort := site.URL[strings.LastIndex(site.URL, ":")+1:]
	if err := chromedp.Do(ctx, chromedp.Navigate("http://attacker.test:"+sitePort+"/")); err != nil {
		t.Fatal(err)
	}
	until(t, ctx, "the page sent its requests", `document.title === "sent 3"`)

	// A rebound name: the browser takes orchd for the page's own origin,
	// so the page may read the answers.
	if err := chromedp.Do(ctx, chromedp.Navigate("http://rebind.test:"+port+"/ui/delegations/"+rec.ID)); err != nil {
		t.Fatal(err)
	}
	got, err := chromedp.Run(ctx, chromedp.Evaluate[string](`Promise.all([
  fetch("/v1/delegations").then(r => r.status),
  fetch("/v1/delegations/`+rec.ID+`:cancel", {method: "POST"}).then(r => r.status),
  fetch("/ui/delegations/`+rec.ID+`/cancel", {method: "POST", body: new URLSearchParams({text: ""})}).then(r => r.status),
  fetch("/a2a/jsonrpc", {method: "POST", headers: {"Content-Type": "application/json", "A2A-Version": "1.0"}, body: `+strconv.Quote(sendMessage)+`}).then(r => r.status),
]).then(s => s.join(" "))`, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatal(err)
	}
	if got != "403 403 403 403" {
		t.Errorf("the rebound page's requests were answered %s, want 403 to each", got)
	}
	if page := js[string](t, ctx, `document.body.innerText`); strings.Contains(page, rec.ID) && !strings.Contains(page, "permission_denied") {
		t.Errorf("the rebound page shows the delegation: %.200s", page)
	}

	if st := waitFor(t, base, rec.ID, a2a.TaskStateWorking).State; st != a2a.TaskStateWorking {
		t.Errorf("the delegation is %s", st)
	}
	if n := countDelegations(t, base, ""); n != 1 {
		t.Errorf("%d delegations, want the test's one", n)
	}
	var agents httpapi.AgentList
	if call(t, "GET", base+"/v1/agents", "", &agents); len(agents.Agents) != 1 {
		t.Errorf("%d agents, want the worker alone", len(agents.Agents))
	}
}
