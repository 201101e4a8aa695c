package console

import (
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/orchd/orchd/delegation"
	"github.com/orchd/orchd/policies"
	"github.com/orchd/orchd/registry"
)

// states are the delegation states the list can be filtered by, in the
// order the filter offers them.
var states = []a2a.TaskState{a2a.TaskStateSubmitted, a2a.TaskStateWorking, a2a.TaskStateInputRequired, a2a.TaskStateAuthRequired,
	a2a.TaskStateCompleted, a2a.TaskStateFailed, a2a.TaskStateCanceled, a2a.TaskStateRejected}

// pageSize is how many delegations a page of the list shows.
const pageSize = 50

// maxTreeEvents is how many events the tree page renders; the script
// follows the rest live.
const maxTreeEvents = 1000

type agentsView struct {
	Agents  []*registry.Agent
	Pending []registry.Pending
}

func (c *Console) agents(w http.ResponseWriter, r *http.Request) {
	ags, pending, err := c.cfg.Source.Agents(r.Context())
	if err != nil {
		c.failErr(w, r, err)
		return
	}
	c.render(w, r, http.StatusOK, "agents", "Agents", "agents", agentsView{Agents: ags, Pending: pending})
}

func (c *Console) agent(w http.ResponseWriter, r *http.Request) {
	ag, err := c.cfg.Source.Agent(r.Context(), r.PathValue("id"))
	if err != nil {
		c.failErr(w, r, err)
		return
	}
	c.render(w, r, http.StatusOK, "agent", "Agent "+ag.ID, "agents", ag)
}

type delegationsView struct {
	States   []a2a.TaskState
	State    a2a.TaskState
	Records  []delegation.Record
	Next     string
	Filtered bool
}

func (c *Console) delegations(w http.ResponseWriter, r *http.Request) {
	v := delegationsView{States: states}
	if s := r.URL.Query().Get("state"); s != "" {
		st := a2a.TaskState(s)
		if !slices.Contains(states, st) {
			c.fail(w, r, http.StatusBadRequest, "no such state: "+s)
			return
		}
		v.State, v.Filtered = st, true
	}
	q := delegation.Query{State: v.State, PageSize: pageSize, PageToken: r.URL.Query().Get("pageToken")}
	p, err := c.cfg.Source.Delegations(r.Context(), q)
	if err != nil {
		c.failErr(w, r, err)
		return
	}
	v.Records = p.Records
	if p.NextPageToken != "" {
		next := url.Values{"pageToken": {p.NextPageToken}}
		if v.Filtered {
			next.Set("state", string(v.State))
		}
		v.Next = "/ui/delegations?" + next.Encode()
	}
	c.render(w, r, http.StatusOK, "delegations", "Delegations", "delegations", v)
}

func (c *Console) tree(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	id := r.PathValue("id")
	rec, err := c.cfg.Source.Delegation(ctx, id)
	if err != nil {
		c.failErr(w, r, err)
		return
	}
	evs, ended, err := c.cfg.Source.Events(ctx, id, 0, maxTreeEvents)
	if err != nil {
		c.failErr(w, r, err)
		return
	}
	var down *registry.Agent
	if ag, err := c.cfg.Source.Agent(ctx, rec.Downstream.Agent); err == nil {
		down = ag
	}
	v := newTree(rec, evs, ended, down)
	v.Flash = c.flashFrom(id, r.URL.Query())
	c.render(w, r, http.StatusOK, "tree", "Delegation "+rec.ID, "delegations", v)
}

type policiesView struct {
	Status policies.Status
	// Request is the dry run's request as typed; Candidates and Result
	// its answer, Error why it could not run.
	Request    string
	Candidates int
	Result     *policies.Result
	Error      string
}

// evaluateExample is the dry-run form's request until one is typed.
const evaluateExample = `{
  "request": {"skill": "research", "capabilities": ["streaming"]},
  "agents": []
}`

func (c *Console) policies(w http.ResponseWriter, r *http.Request) {
	st, err := c.cfg.Source.Policies(r.Context())
	if err != nil {
		c.failErr(w, r, err)
		return
	}
	c.render(w, r, http.StatusOK, "policies", "Policies", "policies", policiesView{Status: st, Request: evaluateExample})
}

func (c *Console) evaluate(w http.ResponseWriter, r *http.Request) {
	if !c.readForm(w, r) {
		return
	}
	text := r.PostFormValue("request")
	st, err := c.cfg.Source.Policies(r.Context())
	if err != nil {
		c.failErr(w, r, err)
		return
	}
	v := policiesView{Status: st, Request: text}
	status := http.StatusOK
	if v.Candidates, v.Result, err = c.cfg.Source.Evaluate(r.Context(), text); err != nil {
		status, _ = c.cfg.Classify(err)
		if status == http.StatusForbidden {
			c.failErr(w, r, err)
			return
		}
		v.Error = err.Error()
	}
	c.render(w, r, status, "policies", "Policies", "policies", v)
}

type loginView struct {
	Enabled bool
	Error   string
}

func (c *Console) loginPage(w http.ResponseWriter, r *http.Request) {
	v := loginView{Enabled: c.cfg.Login != nil}
	if r.URL.Query().Has("refused") {
		v.Error = "The daemon refused those credentials, or they expired. Log in again."
	}
	c.render(w, r, http.StatusOK, "login", "Log in", "", v)
}

func (c *Console) login(w http.ResponseWriter, r *http.Request) {
	if !c.readForm(w, r) {
		return
	}
	tok := strings.TrimSpace(r.PostFormValue("token"))
	if c.cfg.Login == nil {
		http.Redirect(w, r, "/ui/", http.StatusSeeOther)
		return
	}
	if tok == "" || c.cfg.Login(r.Context(), tok) != nil {
		c.render(w, r, http.StatusUnauthorized, "login", "Log in", "", loginView{Enabled: true, Error: "The daemon refused that token."})
		return
	}
	http.SetCookie(w, &http.Cookie{Name: CookieName, Value: tok, Path: "/ui/", HttpOnly: true, Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode})
	http.Redirect(w, r, "/ui/", http.StatusSeeOther)
}

func (c *Console) logout(w http.ResponseWriter, r *http.Request) {
	http.SetCookie(w, &http.Cookie{Name: CookieName, Path: "/ui/", MaxAge: -1, HttpOnly: true, Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode})
	http.Redirect(w, r, "/ui/login", http.StatusSeeOther)
}
