package httpapi

import (
	"cmp"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/orchd/orchd/delegation"
	"github.com/orchd/orchd/httpgate"
	"github.com/orchd/orchd/policies"
	"github.com/orchd/orchd/registry"
)

// openAPI describes the HTTP API; it is served at /openapi.yaml.
//
//go:embed openapi.yaml
var openAPI []byte

// Deps are what the API serves: the parts of the daemon it reads and
// acts on, and the shared plumbing in front of it.
type Deps struct {
	// Registry is the agent registry (/v1/agents).
	Registry *registry.Registry
	// Policies is the policy engine (/v1/policies, /v1/policy:evaluate),
	// whose authorization policies Authz applies.
	Policies *policies.Engine
	// Delegations is the delegation engine (/v1/delegations).
	Delegations *delegation.Engine
	// Authz decides what each caller may do.
	Authz httpgate.Authorizer
	// Limits bounds the request bodies.
	Limits *httpgate.BodyLimits
	// Stopping is done when the daemon begins to stop: event streams end
	// then, and their clients resume elsewhere or later. nil: never.
	Stopping context.Context
	// Ready lists what keeps the daemon from being ready (GET /readyz);
	// none means ready.
	Ready func() []string
	// Log receives the API's failures; nil discards them.
	Log *slog.Logger
	// Heartbeat is how long an event stream stays silent before it sends
	// a comment, so proxies keep it open; 0 means DefaultHeartbeat.
	Heartbeat time.Duration
}

// DefaultHeartbeat is Deps.Heartbeat unless set: within the idle timeouts
// of common proxies (30-60 s).
const DefaultHeartbeat = 15 * time.Second

// API is orchd's HTTP JSON API: agents, policies and delegations for
// callers that speak JSON over HTTP. It translates each request to the
// registry, the policy engine or the delegation engine, authorized by the
// authorization policies. Build it with New.
type API struct {
	reg         *registry.Registry
	policies    *policies.Engine
	delegations *delegation.Engine
	log         *slog.Logger
	// stopping is done when the daemon begins to stop: event streams end
	// then, and their clients resume elsewhere or later.
	stopping context.Context
	// ready lists what keeps the daemon from being ready (readiness).
	ready func() []string
	// authz decides what each caller may do.
	authz     httpgate.Authorizer
	limits    *httpgate.BodyLimits
	heartbeat time.Duration
}

// New returns the API serving from d.
func New(d Deps) *API {
	log := d.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	ready := d.Ready
	if ready == nil {
		ready = func() []string { return nil }
	}
	stopping := d.Stopping
	if stopping == nil {
		stopping = context.Background()
	}
	return &API{reg: d.Registry, policies: d.Policies, delegations: d.Delegations, authz: d.Authz, limits: d.Limits,
		stopping: stopping, ready: ready, log: log, heartbeat: cmp.Or(d.Heartbeat, DefaultHeartbeat)}
}

// Handler returns the API's handler: its routes, behind the check that
// bodies are JSON (jsonRequests) and the body limits. The routes are
//
//	GET    /healthz
//	GET    /readyz
//	GET    /v1/agents
//	POST   /v1/agents              {"url": "...", "id": "..."}
//	GET    /v1/agents/{id}
//	DELETE /v1/agents/{id}
//	POST   /v1/agents/{id}:refresh
//	POST   /v1/agents/{id}:contain  {"reason": "...", "cancel": false}
//	POST   /v1/agents/{id}:release
//	GET    /v1/policies
//	POST   /v1/policies:reload
//	POST   /v1/policy:evaluate
//	POST   /v1/delegations
//	GET    /v1/delegations[?state=S]
//	GET    /v1/delegations/{id}
//	GET    /v1/delegations/{id}/events   (server-sent events)
//	POST   /v1/delegations/{id}/messages
//	POST   /v1/delegations/{id}:cancel
//	POST   /v1/delegations/{id}:steer
//	POST   /v1/delegations/{id}:interrupt
//
// Every route but the health checks is authorized by the authorization
// policies (httpgate.Authorizer). A method a path is not served with is
// answered 405 with Allow; a path no route serves, 404.
func (a *API) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", a.health)
	mux.HandleFunc("GET /readyz", a.readiness)
	mux.HandleFunc("GET /v1/agents", a.listAgents)
	mux.HandleFunc("POST /v1/agents", a.addAgent)
	mux.HandleFunc("GET /v1/agents/{id}", a.notAction(a.getAgent))
	mux.HandleFunc("DELETE /v1/agents/{id}", a.notAction(a.removeAgent))
	mux.HandleFunc("POST /v1/agents/{action}", a.onlyActions(mux, a.agentAction))
	mux.HandleFunc("GET /v1/policies", a.policyStatus)
	mux.HandleFunc("POST /v1/policies:reload", a.reloadPolicies)
	mux.HandleFunc("POST /v1/policy:evaluate", a.evaluatePolicies)
	mux.HandleFunc("POST /v1/delegations", a.delegate)
	mux.HandleFunc("GET /v1/delegations", a.listDelegations)
	mux.HandleFunc("GET /v1/delegations/{id}", a.notAction(a.getDelegation))
	mux.HandleFunc("GET /v1/delegations/{id}/events", a.delegationEvents)
	mux.HandleFunc("POST /v1/delegations/{id}/messages", a.delegationInput)
	mux.HandleFunc("POST /v1/delegations/{action}", a.onlyActions(mux, a.delegationAction))
	mux.HandleFunc("GET /openapi.yaml", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/yaml")
		_, _ = w.Write(openAPI)
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if allow := allowedMethods(mux, r); len(allow) > 0 {
			a.methodNotAllowed(w, r, allow)
			return
		}
		a.fail(w, r, &httpgate.Error{Status: http.StatusNotFound, Code: "not_found", Msg: "no such endpoint: " + r.Method + " " + r.URL.Path})
	})
	return jsonRequests(a.limits.API(mux, writeRefusal), a.log)
}

// apiMethods are the methods allowedMethods tries, in the order an Allow
// header lists them.
var apiMethods = []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete}

// actionVerbs are the verbs POST takes after an id, as in
// /v1/agents/{id}:refresh; the mux routes them as "{action}", since a
// pattern cannot end within a path segment.
var actionVerbs = map[string][]string{"/v1/agents/": {"refresh", "contain", "release"}, "/v1/delegations/": {"cancel", "steer", "interrupt"}}

// isAction reports whether path is an id followed by one of actionVerbs.
func isAction(path string) bool {
	for prefix, verbs := range actionVerbs {
		rest, ok := strings.CutPrefix(path, prefix)
		if !ok || strings.Contains(rest, "/") {
			continue
		}
		if _, verb, ok := strings.Cut(rest, ":"); ok && slices.Contains(verbs, verb) {
			return true
		}
	}
	return false
}

// allowedMethods lists the methods mux serves r's path with, other than
// through its catch-all "/" route; none means the path is unknown. The
// catch-all answers every method, so the mux's own 405 never happens:
// this is how the API tells a wrong method (405) from a wrong path (404).
func allowedMethods(mux *http.ServeMux, r *http.Request) []string {
	if isAction(r.URL.Path) {
		return []string{http.MethodPost}
	}
	var allow []string
	for _, m := range apiMethods {
		probe := &http.Request{Method: m, URL: r.URL, Host: r.Host, Header: http.Header{}}
		// An "{action}" route serves only the actions, which the path
		// is not.
		if _, pattern := mux.Handler(probe); pattern != "" && pattern != "/" && !strings.HasSuffix(pattern, "{action}") {
			allow = append(allow, m)
		}
	}
	return allow
}

// notAction answers a request for an action (isAction) with a method
// other than POST, which the route of h matched because it takes any id,
// with 405.
func (a *API) notAction(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if isAction(r.URL.Path) {
			a.methodNotAllowed(w, r, []string{http.MethodPost})
			return
		}
		h(w, r)
	}
}

// onlyActions answers a POST to a plain id, which the "{action}" route
// of h matches as well, with 405 and the methods the id's path takes.
func (a *API) onlyActions(mux *http.ServeMux, h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !strings.Contains(r.PathValue("action"), ":") {
			a.methodNotAllowed(w, r, allowedMethods(mux, r))
			return
		}
		h(w, r)
	}
}

// methodNotAllowed answers 405 with the methods the path takes.
func (a *API) methodNotAllowed(w http.ResponseWriter, r *http.Request, allow []string) {
	list := strings.Join(allow, ", ")
	w.Header().Set("Allow", list)
	a.fail(w, r, &httpgate.Error{Status: http.StatusMethodNotAllowed, Code: "method_not_allowed",
		Msg: fmt.Sprintf("%s %s is not served; this path takes %s", r.Method, r.URL.Path, list)})
}

// Health is the body of GET /healthz.
type Health struct {
	// Status is "ok", or "degraded" while an agent is pending or unhealthy.
	Status string `json:"status"`
	// Agents counts registered agents.
	Agents int `json:"agents"`
	// Healthy counts registered agents that are healthy: their cards
	// refresh and their circuit breakers are closed.
	Healthy int `json:"healthy"`
	// Pending lists configured agents not registered yet.
	Pending []registry.Pending `json:"pending"`
}

func (a *API) health(w http.ResponseWriter, r *http.Request) {
	h := Health{Status: "ok", Agents: a.reg.Len(), Pending: a.reg.Pending()}
	for _, ag := range a.reg.List() {
		if ag.Healthy {
			h.Healthy++
		}
	}
	if len(h.Pending) > 0 || h.Healthy < h.Agents {
		h.Status = "degraded"
	}
	a.reply(w, http.StatusOK, h)
}

// Readiness is the body of GET /readyz.
type Readiness struct {
	// Status is "ready" or "not ready".
	Status string `json:"status"`
	// Reasons say what is not ready yet.
	Reasons []string `json:"reasons,omitempty"`
}

// readiness serves GET /readyz: 200 once the daemon serves, 503 with the
// reasons before and while it stops.
func (a *API) readiness(w http.ResponseWriter, r *http.Request) {
	if why := a.ready(); len(why) > 0 {
		a.reply(w, http.StatusServiceUnavailable, Readiness{Status: "not ready", Reasons: why})
		return
	}
	a.reply(w, http.StatusOK, Readiness{Status: "ready"})
}

// AgentList is the body of GET /v1/agents.
type AgentList struct {
	// Agents are the registered agents, sorted by id.
	Agents []*registry.Agent `json:"agents"`
	// Pending are configured agents whose cards could not be read yet.
	Pending []registry.Pending `json:"pending"`
}

func (a *API) listAgents(w http.ResponseWriter, r *http.Request) {
	if !a.allow(w, r, policies.ActionAgentsList, policies.Resource{Kind: policies.ResourceAgent}) {
		return
	}
	a.reply(w, http.StatusOK, AgentList{Agents: a.reg.List(), Pending: a.reg.Pending()})
}

func (a *API) getAgent(w http.ResponseWriter, r *http.Request) {
	if !a.allow(w, r, policies.ActionAgentsRead, policies.Resource{Kind: policies.ResourceAgent, ID: r.PathValue("id")}) {
		return
	}
	ag, ok := a.reg.Get(r.PathValue("id"))
	if !ok {
		a.fail(w, r, fmt.Errorf("%w: %q", registry.ErrNotFound, r.PathValue("id")))
		return
	}
	a.reply(w, http.StatusOK, ag)
}

func (a *API) addAgent(w http.ResponseWriter, r *http.Request) {
	if !a.allow(w, r, policies.ActionAgentsRegister, policies.Resource{Kind: policies.ResourceAgent}) {
		return
	}
	var spec registry.Spec
	if err := decodeBody(r, &spec); err != nil {
		a.fail(w, r, err)
		return
	}
	if spec.URL == "" {
		a.fail(w, r, &httpgate.Error{Status: http.StatusBadRequest, Code: "invalid_argument", Msg: `body needs "url"`})
		return
	}
	ag, err := a.reg.Add(r.Context(), spec)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	w.Header().Set("Location", "/v1/agents/"+ag.ID)
	a.reply(w, http.StatusCreated, ag)
}

func (a *API) removeAgent(w http.ResponseWriter, r *http.Request) {
	if !a.allow(w, r, policies.ActionAgentsDelete, policies.Resource{Kind: policies.ResourceAgent, ID: r.PathValue("id")}) {
		return
	}
	if err := a.reg.Remove(r.PathValue("id")); err != nil {
		a.fail(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// agentAction serves POST /v1/agents/{id}:{verb}; ids cannot hold ':'.
func (a *API) agentAction(w http.ResponseWriter, r *http.Request) {
	id, verb, ok := strings.Cut(r.PathValue("action"), ":")
	switch {
	case ok && verb == "contain":
		a.contain(w, r, id)
		return
	case ok && verb == "release":
		a.release(w, r, id)
		return
	case !ok || verb != "refresh":
		a.fail(w, r, &httpgate.Error{Status: http.StatusNotFound, Code: "not_found", Msg: "no such endpoint: POST " + r.URL.Path + " (did you mean POST /v1/agents/{id}:refresh, :contain or :release?)"})
		return
	}
	if !a.allow(w, r, policies.ActionAgentsRefresh, policies.Resource{Kind: policies.ResourceAgent, ID: id}) {
		return
	}
	ag, err := a.reg.Refresh(r.Context(), id)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	a.reply(w, http.StatusOK, ag)
}

func (a *API) policyStatus(w http.ResponseWriter, r *http.Request) {
	if !a.allow(w, r, policies.ActionPoliciesRead, policies.Resource{Kind: policies.ResourcePolicies}) {
		return
	}
	a.reply(w, http.StatusOK, a.policies.Status())
}

func (a *API) reloadPolicies(w http.ResponseWriter, r *http.Request) {
	if !a.allow(w, r, policies.ActionPoliciesReload, policies.Resource{Kind: policies.ResourcePolicies}) {
		return
	}
	if err := a.policies.Reload(); err != nil {
		a.fail(w, r, &httpgate.Error{Status: http.StatusUnprocessableEntity, Code: "invalid_policy",
			Msg: "policies not reloaded; the previous ones stay in force:\n" + err.Error()})
		return
	}
	a.reply(w, http.StatusOK, a.policies.Status())
}

// EvaluateRequest is the body of POST /v1/policy:evaluate: the input
// policies see and, optionally, which agents to consider.
type EvaluateRequest struct {
	policies.Input
	// Agents lists candidate agent ids. Empty means the agents with the
	// requested skill (by id or tag), or every agent when no skill is
	// given.
	Agents []string `json:"agents,omitempty"`
}

// EvaluateResponse is the body of a POST /v1/policy:evaluate answer.
type EvaluateResponse struct {
	// Candidates counts the agents considered.
	Candidates int `json:"candidates"`
	*policies.Result
}

// evaluatePolicies is a dry run: it decides every candidate under the
// policies in force and explains each decision, delegating nothing.
func (a *API) evaluatePolicies(w http.ResponseWriter, r *http.Request) {
	if !a.allow(w, r, policies.ActionPoliciesEvaluate, dryRunAs(a.authz.CallerOf(r.Context()))) {
		return
	}
	var req EvaluateRequest
	if err := decodeBody(r, &req); err != nil {
		a.fail(w, r, err)
		return
	}
	res, err := a.dryRun(r.Context(), req)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	a.reply(w, http.StatusOK, res)
}

// dryRunAs is the resource of a dry run as caller c: the policies, for
// c's principal and tenant. The default authorization policy lets
// callers dry-run as themselves, and only admins as anyone else.
func dryRunAs(c policies.Caller) policies.Resource {
	return policies.Resource{Kind: policies.ResourcePolicies, Owner: c.Principal, Tenant: c.Tenant}
}

// dryRun is the dry run req asks the caller of ctx for, as the API and
// the console answer it: as that caller when req names none, and as the
// caller req names only when the authorization policies let the caller
// of ctx dry-run as that one, since the routing of another principal or
// tenant is theirs (403 otherwise).
func (a *API) dryRun(ctx context.Context, req EvaluateRequest) (EvaluateResponse, error) {
	if reflect.ValueOf(req.Caller).IsZero() {
		req.Caller = a.authz.CallerOf(ctx)
	}
	if dec := a.authz.Decide(ctx, policies.ActionPoliciesEvaluate, dryRunAs(req.Caller)); !dec.Allowed {
		return EvaluateResponse{}, httpgate.Denied(policies.ActionPoliciesEvaluate+" as "+callerName(req.Caller), dec)
	}
	return a.evaluate(ctx, req)
}

// callerName names a caller in a refusal: principal@tenant.
func callerName(c policies.Caller) string {
	if c.Tenant == "" {
		return strconv.Quote(c.Principal)
	}
	return strconv.Quote(c.Principal + "@" + c.Tenant)
}

// evaluate decides req's candidates under the policies in force: the
// agents it names, else those with the requested skill, else every agent.
// The console's dry run answers with it too.
func (a *API) evaluate(ctx context.Context, req EvaluateRequest) (EvaluateResponse, error) {
	var candidates []*registry.Agent
	switch {
	case len(req.Agents) > 0:
		for _, id := range req.Agents {
			ag, ok := a.reg.Get(id)
			if !ok {
				return EvaluateResponse{}, fmt.Errorf("%w: %q", registry.ErrNotFound, id)
			}
			candidates = append(candidates, ag)
		}
	case req.Request.Skill != "":
		candidates = a.reg.BySkill(req.Request.Skill)
	default:
		candidates = a.reg.List()
	}
	res := a.policies.Set().Evaluate(ctx, candidates, req.Input)
	return EvaluateResponse{Candidates: len(candidates), Result: res}, nil
}

// decodeBody reads a JSON body strictly (decodeJSON); the body limits bounded
// its size and depth before the handler ran.
func decodeBody(r *http.Request, v any) error {
	if err := decodeJSON(r.Body, v); err != nil {
		return &httpgate.Error{Status: http.StatusBadRequest, Code: "invalid_argument", Msg: "bad JSON body: " + err.Error()}
	}
	return nil
}

// decodeJSON reads one JSON value from rd into v strictly: an unknown
// field or a second value is an error, and nothing at all is an empty
// object. Its errors say what is wrong for a person (jsonProblem).
func decodeJSON(rd io.Reader, v any) error {
	dec := json.NewDecoder(rd)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); errors.Is(err, io.EOF) {
		return nil
	} else if err != nil {
		return errors.New(jsonProblem(err, reflect.TypeOf(v)))
	}
	if dec.More() {
		return errors.New("more than one JSON value")
	}
	return nil
}

// jsonProblem says what is wrong with a JSON body decoded into a value of
// type root for a person: a field of the wrong type by its JSON path and
// JSON types, not by the Go ones.
func jsonProblem(err error, root reflect.Type) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) && te.Field != "" {
		field, want := jsonPath(root, te.Field), article(jsonType(te.Type))
		if num, ok := strings.CutPrefix(te.Value, "number "); ok {
			// A number the field cannot hold: a fraction, or out of range.
			return fmt.Sprintf("%q is %s, which does not fit: want %s", field, num, want)
		}
		got := te.Value
		if got == "bool" {
			got = "boolean"
		}
		return fmt.Sprintf("%q is %s, want %s", field, article(got), want)
	}
	return strings.TrimPrefix(err.Error(), "json: ")
}

// jsonPath is a field's path as encoding/json names it in a type error,
// from root, as the body writes it: without the Go names of embedded
// structs ("Input.request.skill" is "request.skill"), which JSON does not
// see.
func jsonPath(root reflect.Type, path string) string {
	segs, t := strings.Split(path, "."), root
	out := segs[:0:0]
	for _, seg := range segs {
		for t != nil && (t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Array || t.Kind() == reflect.Map) {
			t = t.Elem()
		}
		if t == nil || t.Kind() != reflect.Struct {
			t, out = nil, append(out, seg)
			continue
		}
		if f, ok := t.FieldByName(seg); ok && f.Anonymous {
			t = f.Type
			continue
		}
		next := reflect.Type(nil)
		for _, f := range reflect.VisibleFields(t) {
			if name, _, _ := strings.Cut(f.Tag.Get("json"), ","); name == seg || name == "" && f.Name == seg {
				next = f.Type
				break
			}
		}
		t, out = next, append(out, seg)
	}
	return strings.Join(out, ".")
}

// jsonType names the JSON type a Go type is decoded from.
func jsonType(t reflect.Type) string {
	switch t.Kind() {
	case reflect.String:
		return "string"
	case reflect.Bool:
		return "boolean"
	case reflect.Slice, reflect.Array:
		return "array"
	case reflect.Map, reflect.Struct:
		return "object"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return "whole number"
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "whole number of 0 or more"
	case reflect.Float32, reflect.Float64:
		return "number"
	case reflect.Pointer:
		return jsonType(t.Elem())
	}
	return "other value"
}

// article puts "a" or "an" before a JSON type's name.
func article(s string) string {
	if s != "" && strings.ContainsRune("aeiou", rune(s[0])) {
		return "an " + s
	}
	return "a " + s
}

// ErrorBody is the JSON body of every API error (httpgate.ErrorBody,
// which the gate's refusals share).
type ErrorBody = httpgate.ErrorBody

func (a *API) fail(w http.ResponseWriter, r *http.Request, err error) {
	status, code := httpgate.Classify(err)
	level := slog.LevelInfo
	if status >= 500 {
		level = slog.LevelWarn
	}
	a.log.Log(r.Context(), level, "request failed", "method", r.Method, "path", r.URL.Path, "status", status, "error", err)
	var body ErrorBody
	body.Error.Code, body.Error.Message = code, err.Error()
	var ae *httpgate.Error
	var refused *delegation.RefusedError
	var failed *delegation.FailedError
	var limit *delegation.LimitError
	switch {
	case errors.As(err, &ae):
		body.Error.Details = ae.Details
	case errors.As(err, &refused):
		body.Error.Details = refused.Decision
	case errors.As(err, &failed):
		body.Error.Details = failed.Decision
	case errors.As(err, &limit):
		body.Error.Details = limit
	}
	a.reply(w, status, body)
}

func (a *API) reply(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		a.log.Warn("write response", "error", err)
	}
}

// allow answers 403 and returns false unless the caller of r may do
// action to res.
func (a *API) allow(w http.ResponseWriter, r *http.Request, action string, res policies.Resource) bool {
	dec := a.authz.Decide(r.Context(), action, res)
	if !dec.Allowed {
		a.fail(w, r, httpgate.Denied(action, dec))
	}
	return dec.Allowed
}

// delegationFor reads the delegation named in the path for action. A
// delegation the caller may not act on is answered as one that does not
// exist (404), so callers learn nothing of others' work.
func (a *API) delegationFor(w http.ResponseWriter, r *http.Request, id, action string) (delegation.Record, bool) {
	rec, err := a.authz.Lookup(r.Context(), a.delegations, id, action)
	if err != nil {
		a.fail(w, r, err)
		return delegation.Record{}, false
	}
	return rec, true
}
