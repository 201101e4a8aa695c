package orchestrator

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/orchd/orchd/auth"
	"github.com/orchd/orchd/console"
	"github.com/orchd/orchd/delegation"
	"github.com/orchd/orchd/httpgate"
	"github.com/orchd/orchd/policies"
	"github.com/orchd/orchd/registry"
	"github.com/orchd/orchd/steering"
)

// routeConsole serves the web console at /ui/ and redirects / there. The
// console's pages are behind the same gate as the API (group api), and
// read and act through consoleSource, which authorizes every call as the
// API does; its login and logout pages and static files are open. A browser logged
// in through the console's form presents its bearer token in a cookie,
// which is read for the console's routes alone, as the Authorization
// header it stands for. apiHandler is the API, whose event stream the
// console's live updates reuse; crossOrigin is the daemon's protection
// from other sites' posts, which knows its own origins (browserguard.go);
// name is the daemon's display name.
func routeConsole(mux *http.ServeMux, g *httpgate.Gate, authn *auth.Authenticator, reg *registry.Registry, engine *policies.Engine, delegations *delegation.Engine, authz httpgate.Authorizer,
	apiHandler http.Handler, crossOrigin *http.CrossOriginProtection, name string, log *slog.Logger) error {
	a := &api{reg: reg, policies: engine, delegations: delegations, authz: authz, log: log}
	cfg := console.Config{
		Source:      consoleSource{a},
		Classify:    classify,
		Name:        name,
		Log:         a.log,
		CrossOrigin: crossOrigin,
		Events: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			// The API's own stream, authorized there as any API call.
			r2 := r.Clone(r.Context())
			r2.URL.Path = "/v1/delegations/" + r.PathValue("id") + "/events"
			r2.URL.RawPath = "/v1/delegations/" + url.PathEscape(r.PathValue("id")) + "/events"
			apiHandler.ServeHTTP(w, r2)
		}),
	}
	if g.Enabled() {
		cfg.Login = func(ctx context.Context, token string) error {
			r, err := http.NewRequestWithContext(ctx, http.MethodGet, "/ui/", nil)
			if err != nil {
				return err
			}
			r.Header.Set("Authorization", "Bearer "+token)
			if p, err := authn.Authenticate(r); err != nil || p == nil {
				return console.ErrLogin
			}
			return nil
		}
	}
	c, err := console.New(cfg)
	if err != nil {
		return err
	}
	mux.Handle("/ui/", consoleCredentials(loginOnRefusal(g.Wrap(httpgate.GroupAPI, c))))
	// Logging out only deletes the cookie, so a browser whose token was
	// refused or expired can still do it.
	for _, open := range []string{"/ui/login", "/ui/logout", "/ui/static/"} {
		mux.Handle(open, c)
	}
	mux.Handle("GET /{$}", http.RedirectHandler("/ui/", http.StatusSeeOther))
	return nil
}

// consoleCredentials presents the console's login cookie as the bearer
// token it holds, unless the request carries an Authorization header of
// its own. The token is never logged: the gate logs only why it refused.
func consoleCredentials(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if tok, ok := console.Token(r); ok && r.Header.Get("Authorization") == "" {
			r = r.Clone(r.Context())
			r.Header.Set("Authorization", "Bearer "+tok)
		}
		h.ServeHTTP(w, r)
	})
}

// loginOnRefusal sends a browser the gate refused (401) to the login
// page instead of the API's JSON error, for the page reads a person
// makes; the script's requests and the event stream keep the 401.
func loginOnRefusal(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet || !strings.Contains(r.Header.Get("Accept"), "text/html") {
			h.ServeHTTP(w, r)
			return
		}
		q := ""
		if _, ok := console.Token(r); ok {
			q = "?refused"
		}
		h.ServeHTTP(&loginRedirectWriter{ResponseWriter: w, login: "/ui/login" + q}, r)
	})
}

// loginRedirectWriter turns a 401 into a redirect to the login page and drops
// its body.
type loginRedirectWriter struct {
	http.ResponseWriter
	login   string
	refused bool
}

func (w *loginRedirectWriter) WriteHeader(status int) {
	if status == http.StatusUnauthorized {
		w.refused = true
		h := w.Header()
		h.Del("Content-Type")
		h.Set("Location", w.login)
		w.ResponseWriter.WriteHeader(http.StatusSeeOther)
		return
	}
	w.ResponseWriter.WriteHeader(status)
}

func (w *loginRedirectWriter) Write(b []byte) (int, error) {
	if w.refused {
		return len(b), nil
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (w *loginRedirectWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// Flush passes a flush on, for the event stream.
func (w *loginRedirectWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// consoleSource is the console's view of the daemon: what the API shows
// the same caller, authorized the same way.
type consoleSource struct{ a *api }

var _ console.Source = consoleSource{}

// check fails with the API's 403 unless the caller of ctx may do action
// to res.
func (s consoleSource) check(ctx context.Context, action string, res policies.Resource) error {
	if dec := s.a.authz.Decide(ctx, action, res); !dec.Allowed {
		return httpgate.Denied(action, dec)
	}
	return nil
}

func (s consoleSource) Agents(ctx context.Context) ([]*registry.Agent, []registry.Pending, error) {
	if err := s.check(ctx, policies.ActionAgentsList, policies.Resource{Kind: policies.ResourceAgent}); err != nil {
		return nil, nil, err
	}
	return s.a.reg.List(), s.a.reg.Pending(), nil
}

func (s consoleSource) Agent(ctx context.Context, id string) (*registry.Agent, error) {
	if err := s.check(ctx, policies.ActionAgentsRead, policies.Resource{Kind: policies.ResourceAgent, ID: id}); err != nil {
		return nil, err
	}
	ag, ok := s.a.reg.Get(id)
	if !ok {
		return nil, fmt.Errorf("%w: %q", registry.ErrNotFound, id)
	}
	return ag, nil
}

func (s consoleSource) Delegations(ctx context.Context, q delegation.Query) (delegation.Page, error) {
	if err := s.check(ctx, policies.ActionDelegationsList, s.a.authz.Own(ctx, policies.ResourceDelegation)); err != nil {
		return delegation.Page{}, err
	}
	q.Visible = s.a.authz.Visible(ctx)
	return s.a.delegations.List(ctx, q)
}

func (s consoleSource) Delegation(ctx context.Context, id string) (delegation.Record, error) {
	return s.a.authz.Read(ctx, s.a.delegations, id)
}

func (s consoleSource) Events(ctx context.Context, id string, after int64, limit int) ([]delegation.Event, bool, error) {
	if _, err := s.a.authz.Lookup(ctx, s.a.delegations, id, policies.ActionDelegationsRead); err != nil {
		return nil, false, err
	}
	return s.a.delegations.Events(ctx, id, after, limit)
}

func (s consoleSource) Policies(ctx context.Context) (policies.Status, error) {
	if err := s.check(ctx, policies.ActionPoliciesRead, policies.Resource{Kind: policies.ResourcePolicies}); err != nil {
		return policies.Status{}, err
	}
	return s.a.policies.Status(), nil
}

func (s consoleSource) Evaluate(ctx context.Context, request string) (int, *policies.Result, error) {
	if err := s.check(ctx, policies.ActionPoliciesEvaluate, dryRunAs(s.a.authz.CallerOf(ctx))); err != nil {
		return 0, nil, err
	}
	var req EvaluateRequest
	if err := decodeJSON(strings.NewReader(request), &req); err != nil {
		return 0, nil, &httpgate.Error{Status: http.StatusBadRequest, Code: "invalid_argument", Msg: "the request is not valid JSON for a dry run: " + err.Error()}
	}
	res, err := s.a.dryRun(ctx, req)
	if err != nil {
		return 0, nil, err
	}
	return res.Candidates, res.Result, nil
}

func (s consoleSource) Steer(ctx context.Context, id string, c steering.Control, text string) (steering.Receipt, error) {
	if _, err := s.a.authz.Lookup(ctx, s.a.delegations, id, policies.ActionDelegationsSteer); err != nil {
		return steering.Receipt{}, err
	}
	if text == "" {
		text = string(c) // an interrupt may give no reason, as over the API
	}
	return s.a.delegations.Steer(ctx, id, c, a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart(text)))
}

func (s consoleSource) Cancel(ctx context.Context, id string) (delegation.Record, error) {
	if _, err := s.a.authz.Lookup(ctx, s.a.delegations, id, policies.ActionDelegationsCancel); err != nil {
		return delegation.Record{}, err
	}
	return s.a.delegations.Cancel(ctx, id)
}

func (s consoleSource) Send(ctx context.Context, id string, text string) (delegation.Record, error) {
	if _, err := s.a.authz.Lookup(ctx, s.a.delegations, id, policies.ActionDelegationsSteer); err != nil {
		return delegation.Record{}, err
	}
	return s.a.delegations.Send(ctx, id, a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart(text)))
}
