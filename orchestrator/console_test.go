package orchestrator

import (
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/google/go-cmp/cmp"

	"github.com/orchd/orchd/console"
	"github.com/orchd/orchd/delegation"
	"github.com/orchd/orchd/internal/testagent"
	"github.com/orchd/orchd/registry"
)

// browse is one request as a browser makes it: HTML wanted, redirects
// not followed, the bearer token (if any) in a header, cookies given.
func browse(t testing.TB, method, u, token string, form url.Values, cookies ...*http.Cookie) (int, http.Header, string) {
	t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequestWithContext(t.Context(), method, u, body)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "text/html")
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for _, c := range cookies {
		req.AddCookie(c)
	}
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, string(b)
}

func wantIn(t testing.TB, what, page string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(page, w) {
			t.Errorf("%s lacks %q", what, w)
		}
	}
}

func TestConsole_PagesAndControls(t *testing.T) {
	t.Parallel()
	worker := testagent.Start(t, testagent.Options{Name: "Worker", Skill: "research", Streaming: true, Steering: true}, testagent.Steerable())
	cfg := loadDefaults(t)
	cfg.Agent.Name = "orchd test"
	cfg.Agents = []registry.Spec{{ID: "worker", URL: worker.URL}}
	base := startDaemon(t, cfg)

	if code, h, _ := browse(t, "GET", base+"/", "", nil); code != http.StatusSeeOther || h.Get("Location") != "/ui/" {
		t.Errorf("GET / = %d to %q, want 303 to /ui/", code, h.Get("Location"))
	}
	code, _, page := browse(t, "GET", base+"/ui/agents", "", nil)
	if code != 200 {
		t.Fatalf("agents page = %d", code)
	}
	wantIn(t, "agents page", page, `href="/ui/agents/worker"`, "steerable, interruptible", "healthy", "closed", `<meta name="viewport"`, `<main id="main"`)
	code, _, page = browse(t, "GET", base+"/ui/agents/worker", "", nil)
	wantIn(t, "agent page", page, "Protocol versions per binding", "JSONRPC", "Capabilities and tiers", "Drift history", "Circuit breaker", "Signature")
	if code != 200 {
		t.Errorf("agent page = %d", code)
	}
	if code, _, _ := browse(t, "GET", base+"/ui/agents/nosuch", "", nil); code != 404 {
		t.Errorf("unknown agent = %d, want 404", code)
	}

	var rec delegation.Record
	if code := call(t, "POST", base+"/v1/delegations", `{"text": "survey", "skill": "research"}`, &rec); code != 201 {
		t.Fatalf("delegate = %d", code)
	}
	waitFor(t, base, rec.ID, a2a.TaskStateWorking)
	code, _, page = browse(t, "GET", base+"/ui/delegations?state=TASK_STATE_WORKING", "", nil)
	wantIn(t, "working delegations", page, `href="/ui/delegations/`+rec.ID+`"`, "working only")
	if code != 200 {
		t.Errorf("delegations page = %d", code)
	}
	_, _, page = browse(t, "GET", base+"/ui/delegations?state=TASK_STATE_COMPLETED", "", nil)
	if strings.Contains(page, rec.ID) {
		t.Error("the completed filter lists a working delegation")
	}
	for _, q := range []string{"state=bogus", "pageToken=bogus"} {
		if code, _, _ := browse(t, "GET", base+"/ui/delegations?"+q, "", nil); code != 400 {
			t.Errorf("delegations?%s = %d, want 400", q, code)
		}
	}

	// A steer by a plain form post: 303 back to the tree page, which
	// shows the receipt.
	code, h, _ := browse(t, "POST", base+"/ui/delegations/"+rec.ID+"/steer", "", url.Values{"text": {"narrow to 2025"}})
	if code != http.StatusSeeOther || !strings.HasPrefix(h.Get("Location"), "/ui/delegations/"+rec.ID+"?") {
		t.Fatalf("steer form = %d to %q", code, h.Get("Location"))
	}
	code, _, page = browse(t, "GET", base+h.Get("Location"), "", nil)
	if code != 200 {
		t.Fatalf("tree page = %d", code)
	}
	wantIn(t, "tree page", page, "steer done: receipt", "this orchd", "→ Worker #1", // the receipt names the agent by its card name
		"<strong>worker</strong>", "Every candidate", "narrow to 2025", `src="/ui/static/console.js"`)
	// A refused control says why: a steer needs text.
	code, h, _ = browse(t, "POST", base+"/ui/delegations/"+rec.ID+"/steer", "", url.Values{"text": {" "}})
	if code != http.StatusSeeOther || !strings.Contains(h.Get("Location"), "error=") {
		t.Errorf("empty steer = %d to %q", code, h.Get("Location"))
	}
	// A form over the console's limit is refused as one, not read as empty.
	big := url.Values{"text": {strings.Repeat("x", 65<<10)}}
	if code, _, page := browse(t, "POST", base+"/ui/delegations/"+rec.ID+"/steer", "", big); code != http.StatusRequestEntityTooLarge || !strings.Contains(page, "64 KiB") {
		t.Errorf("oversized steer = %d", code)
	}

	// An interrupt, then an answer, by plain form posts.
	code, h, _ = browse(t, "POST", base+"/ui/delegations/"+rec.ID+"/interrupt", "", url.Values{"text": {""}})
	if code != http.StatusSeeOther {
		t.Fatalf("interrupt form = %d to %q, want %d", code, h.Get("Location"), http.StatusSeeOther)
	}
	if loc, err := url.Parse(h.Get("Location")); err != nil {
		t.Fatalf("interrupt form redirects to %q: %v", h.Get("Location"), err)
	} else if q := loc.Query(); q.Get("done") != "interrupt" || len(q["hop"]) != 2 {
		t.Fatalf("interrupt form redirects to %q, want done=interrupt and two hops", loc)
	}
	waitFor(t, base, rec.ID, a2a.TaskStateInputRequired)
	_, _, page = browse(t, "GET", base+"/ui/delegations/"+rec.ID, "", nil)
	wantIn(t, "interrupted tree page", page, `<span id="state" class="state s-input-required">input required</span>`)
	code, h, _ = browse(t, "POST", base+"/ui/delegations/"+rec.ID+"/input", "", url.Values{"text": {"go on"}})
	if code != http.StatusSeeOther {
		t.Fatalf("answer form = %d to %q, want %d", code, h.Get("Location"), http.StatusSeeOther)
	}
	if loc := h.Get("Location"); !strings.Contains(loc, "done=input") || strings.Contains(loc, "error=") {
		t.Fatalf("answer form redirects to %q, want done=input and no error", loc)
	}
	waitFor(t, base, rec.ID, a2a.TaskStateWorking)

	// A cross-origin form post is refused before anything is done.
	req, _ := http.NewRequestWithContext(t.Context(), "POST", base+"/ui/delegations/"+rec.ID+"/cancel", nil)
	req.Header.Set("Origin", "https://evil.example")
	req.Header.Set("Sec-Fetch-Site", "cross-site")
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("cross-origin cancel = %d, want 403", resp.StatusCode)
	}
	if got := waitFor(t, base, rec.ID, a2a.TaskStateWorking); got.State != a2a.TaskStateWorking {
		t.Errorf("the refused cancel canceled: %s", got.State)
	}

	// The script's post gets JSON; a cancel ends the work.
	req, _ = http.NewRequestWithContext(t.Context(), "POST", base+"/ui/delegations/"+rec.ID+"/cancel", nil)
	req.Header.Set("Accept", "application/json")
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(b), `"state":"TASK_STATE_CANCELED"`) {
		t.Errorf("cancel by the script = %d %s", resp.StatusCode, b)
	}

	// Policies: the set in force, and a dry run.
	code, _, page = browse(t, "GET", base+"/ui/policies", "", nil)
	wantIn(t, "policies page", page, "Dry run", "Loaded")
	if code != 200 {
		t.Errorf("policies page = %d", code)
	}
	code, _, page = browse(t, "POST", base+"/ui/policies", "", url.Values{"request": {`{"request": {"skill": "research"}}`}})
	wantIn(t, "dry run", page, "1 candidates; winner: <strong>worker</strong>", "rule by rule</summary>\n<ul>")
	if code != 200 {
		t.Errorf("dry run = %d", code)
	}
	code, _, page = browse(t, "POST", base+"/ui/policies", "", url.Values{"request": {`{"request": `}})
	wantIn(t, "bad dry run", page, "not valid JSON")
	if code != 400 {
		t.Errorf("bad dry run = %d, want 400", code)
	}
	// The request is read as the API reads it, its problems in JSON's terms.
	code, _, page = browse(t, "POST", base+"/ui/policies", "", url.Values{"request": {`{"agents": "worker"}`}})
	wantIn(t, "mistyped dry run", page, `&#34;agents&#34; is a string, want an array`)
	_, _, page = browse(t, "POST", base+"/ui/policies", "", url.Values{"request": {`{"request": {"skill": 7}}`}})
	wantIn(t, "mistyped skill", page, `&#34;request.skill&#34; is a number, want a string`) // not Input.request.skill
	if code != 400 || strings.Contains(page, "Go struct") {
		t.Errorf("mistyped dry run = %d, or reads in Go's terms", code)
	}
}

func TestConsole_AuthenticatesAndKeepsDelegationsToTheirOwners(t *testing.T) {
	t.Parallel()
	worker := testagent.Start(t, testagent.Options{Name: "Worker", Skill: "research", Streaming: true, Steering: true}, testagent.Steerable())
	cfg := loadDefaults(t)
	cfg.Auth = authTokens()
	cfg.Agents = []registry.Spec{{ID: "worker", URL: worker.URL}}
	base := startDaemon(t, cfg)

	// No credentials: the pages send a browser to the login page, which
	// is open, as the static files are.
	if code, h, _ := browse(t, "GET", base+"/ui/agents", "", nil); code != http.StatusSeeOther || h.Get("Location") != "/ui/login" {
		t.Errorf("agents without credentials = %d to %q", code, h.Get("Location"))
	}
	if code, _, page := browse(t, "GET", base+"/ui/login", "", nil); code != 200 || !strings.Contains(page, `<label for="token">`) {
		t.Errorf("login page = %d", code)
	}
	if code, _, _ := browse(t, "GET", base+"/ui/static/console.css", "", nil); code != 200 {
		t.Errorf("stylesheet = %d", code)
	}
	if code, _, page := browse(t, "POST", base+"/ui/login", "", url.Values{"token": {"wrong"}}); code != 401 || !strings.Contains(page, "refused") {
		t.Errorf("login with a wrong token = %d", code)
	}
	code, h, _ := browse(t, "POST", base+"/ui/login", "", url.Values{"token": {aliceToken}})
	var cookie *http.Cookie
	for _, c := range (&http.Response{Header: h}).Cookies() {
		if c.Name == console.CookieName {
			cookie = c
		}
	}
	if code != http.StatusSeeOther || cookie == nil {
		t.Fatalf("login = %d, cookie %+v", code, cookie)
	}
	type attrs struct {
		HttpOnly bool
		SameSite http.SameSite
		Path     string
	}
	if diff := cmp.Diff(attrs{true, http.SameSiteStrictMode, "/ui/"}, attrs{cookie.HttpOnly, cookie.SameSite, cookie.Path}); diff != "" {
		t.Fatalf("login cookie (-want +got):\n%s", diff)
	}
	if code, _, page := browse(t, "GET", base+"/ui/agents", "", nil, cookie); code != 200 || !strings.Contains(page, "worker") {
		t.Errorf("agents with the login cookie = %d", code)
	}
	// The cookie stands for the token on the console's routes only.
	if code, _ := callAs(t, "", "GET", base+"/v1/agents", "", nil); code != 401 {
		t.Errorf("API without a token = %d", code)
	}
	// A stale cookie is sent to log in again.
	stale := &http.Cookie{Name: console.CookieName, Value: "expired"}
	if code, h, _ := browse(t, "GET", base+"/ui/agents", "", nil, stale); code != http.StatusSeeOther || h.Get("Location") != "/ui/login?refused" {
		t.Errorf("stale cookie = %d to %q", code, h.Get("Location"))
	}
	// Logging out needs no credentials the daemon accepts: it deletes
	// the cookie, stale or not.
	code, h, _ = browse(t, "POST", base+"/ui/logout", "", url.Values{}, stale)
	if code != http.StatusSeeOther || h.Get("Location") != "/ui/login" {
		t.Errorf("logout with a stale cookie = %d to %q, want %d to /ui/login", code, h.Get("Location"), http.StatusSeeOther)
	}
	if cleared := (&http.Response{Header: h}).Cookies(); len(cleared) != 1 || cleared[0].Name != console.CookieName {
		t.Errorf("logout with a stale cookie sets cookies %+v, want %s alone", cleared, console.CookieName)
	} else if cleared[0].MaxAge >= 0 {
		t.Errorf("logout with a stale cookie keeps it: MaxAge %d", cleared[0].MaxAge)
	}

	var rec delegation.Record
	if code, _ := callAs(t, aliceToken, "POST", base+"/v1/delegations", `{"text": "survey", "skill": "research"}`, &rec); code != 201 {
		t.Fatalf("delegate as alice = %d", code)
	}
	if code, _, page := browse(t, "GET", base+"/ui/delegations/"+rec.ID, aliceToken, nil); code != 200 || !strings.Contains(page, rec.ID) {
		t.Errorf("alice's tree page = %d", code)
	}
	// Bob sees none of it: not listed, not found, not steered.
	if _, _, page := browse(t, "GET", base+"/ui/delegations", bobToken, nil); strings.Contains(page, rec.ID) {
		t.Error("bob's list shows alice's delegation")
	}
	for _, path := range []string{"/ui/delegations/" + rec.ID, "/ui/delegations/" + rec.ID + "/events"} {
		if code, _, _ := browse(t, "GET", base+path, bobToken, nil); code != 404 {
			t.Errorf("bob GET %s = %d, want 404", path, code)
		}
	}
	if code, _, _ := browse(t, "POST", base+"/ui/delegations/"+rec.ID+"/steer", bobToken, url.Values{"text": {"mine now"}}); code != 404 {
		t.Errorf("bob's steer = %d, want 404", code)
	}
	if sigs := worker.Signals(); len(sigs) != 0 {
		t.Errorf("the worker took bob's steer: %+v", sigs)
	}
	callAs(t, aliceToken, "POST", base+"/v1/delegations/"+rec.ID+":cancel", "", nil)
}

func TestConsole_DelegationsArePaged(t *testing.T) {
	t.Parallel()
	worker := testagent.Start(t, testagent.Options{Name: "Worker", Skill: "research"}, testagent.Reply("hi"))
	cfg := loadDefaults(t)
	cfg.Agents = []registry.Spec{{ID: "worker", URL: worker.URL}}
	base := startDaemon(t, cfg)
	for i := range 51 {
		if code := call(t, "POST", base+"/v1/delegations", `{"text": "hello", "skill": "research"}`, nil); code != 201 {
			t.Fatalf("delegate %d = %d", i, code)
		}
	}
	rows := func(page string) int { return strings.Count(page, `<tr><th scope="row"><a href="/ui/delegations/`) }
	_, _, page := browse(t, "GET", base+"/ui/delegations?state=TASK_STATE_COMPLETED", "", nil)
	i := strings.Index(page, `<a href="/ui/delegations?`)
	if rows(page) != 50 || i < 0 {
		t.Fatalf("first page: %d rows, next link at %d", rows(page), i)
	}
	next := page[i+len(`<a href="`):]
	next = strings.ReplaceAll(next[:strings.Index(next, `"`)], "&amp;", "&")
	if !strings.Contains(next, "state=TASK_STATE_COMPLETED") {
		t.Errorf("the next page drops the filter: %s", next)
	}
	_, _, page = browse(t, "GET", base+next, "", nil)
	if rows(page) != 1 || strings.Contains(page, `rel="next"`) {
		t.Errorf("second page: %d rows, want 1 and no next link", rows(page))
	}
}

// TestConsole_OutcomeIsNotTakenFromALink: the tree page shows a control's
// outcome from the query of the redirect after a form post. A link from
// anywhere can carry such a query; the page shows only an outcome the
// console itself put there, unchanged.
func TestConsole_OutcomeIsNotTakenFromALink(t *testing.T) {
	t.Parallel()
	worker := testagent.Start(t, testagent.Options{Name: "Worker", Skill: "research", Streaming: true}, testagent.Hang())
	cfg := loadDefaults(t)
	cfg.Agents = []registry.Spec{{ID: "worker", URL: worker.URL}}
	base := startDaemon(t, cfg)
	var rec delegation.Record
	if code := call(t, "POST", base+"/v1/delegations", `{"text": "survey", "skill": "research"}`, &rec); code != 201 {
		t.Fatalf("delegate = %d", code)
	}
	waitFor(t, base, rec.ID, a2a.TaskStateWorking)
	tree := base + "/ui/delegations/" + rec.ID

	const lure = "your session expired: log in again at https://evil.example"
	for _, q := range []url.Values{
		{"done": {"steer"}, "error": {lure}},
		{"done": {"cancel"}, "state": {lure}},
		{"done": {"interrupt"}, "hop": {lure}},
		{"done": {"steer"}, "error": {lure}, "sig": {"c2lnbmVk"}},
	} {
		code, _, page := browse(t, "GET", tree+"?"+q.Encode(), "", nil)
		if code != 200 {
			t.Errorf("tree page?%s = %d", q.Encode(), code)
		}
		for _, shown := range []string{"evil.example", "refused:", " done"} {
			if strings.Contains(page, shown) {
				t.Errorf("tree page?%s shows the link's text as an outcome: %q", q.Encode(), shown)
			}
		}
	}

	// The console's own redirect shows its outcome, and only unchanged.
	code, h, _ := browse(t, "POST", tree+"/steer", "", url.Values{"text": {" "}})
	loc, err := url.Parse(h.Get("Location"))
	if code != http.StatusSeeOther || err != nil {
		t.Fatalf("empty steer = %d to %q (%v)", code, h.Get("Location"), err)
	}
	if loc.Query().Get("sig") == "" {
		t.Fatalf("empty steer redirects to %q, with no signature", loc)
	}
	if _, _, page := browse(t, "GET", base+loc.String(), "", nil); !strings.Contains(page, "steer refused: a steer needs text") {
		t.Error("the console's own redirect does not show the refusal")
	}
	q := loc.Query()
	q.Set("error", lure)
	if _, _, page := browse(t, "GET", tree+"?"+q.Encode(), "", nil); strings.Contains(page, "evil.example") {
		t.Error("a signed outcome with its text changed is shown")
	}
}
