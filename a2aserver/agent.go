package a2aserver

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2acompat/a2av0"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
	"github.com/a2aproject/a2a-go/v2/a2asrv/taskstore"
	"github.com/hashicorp/go-version"
	"github.com/lestrrat-go/jwx/v3/jwk"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/orchd/orchd/capability"
	"github.com/orchd/orchd/delegation"
	"github.com/orchd/orchd/httpgate"
	"github.com/orchd/orchd/registry"
	"github.com/orchd/orchd/steering"
	"github.com/orchd/orchd/telemetry"
)

// Where orchd serves A2A: JSON-RPC and HTTP+JSON for A2A 1.0, and through
// a2a-go's a2av0 handlers for 0.3 clients.
const (
	pathJSONRPC   = "/a2a/jsonrpc"
	pathREST      = "/a2a/rest"
	pathJSONRPC03 = "/a2a/v0.3/jsonrpc"
	pathREST03    = "/a2a/v0.3/rest"
)

// orchdSteering is what orchd advertises of the steering extension: it
// routes both modes, refusing a signal whose hop's card lacks the mode.
var orchdSteering = steering.Modes{Steerable: true, Interruptible: true}

// cardMaxAge is how long clients may cache orchd's card.
const cardMaxAge = 300

// Config is what orchd serves as an A2A agent: its card and its gRPC
// binding (the config file's agent section).
type Config struct {
	// Name and Description are the card's.
	Name, Description string
	// Skills are the skills the card lists first: the work this orchd
	// routes. The skills of the agents it can route to follow.
	Skills []Skill
	// Self is this orchd's identity in delegation chains, advertised in
	// the delegation extension's card params.
	Self string
	// Signer signs the card (LoadSigningKey); nil leaves it unsigned.
	Signer jwk.Key
	// MaxTaskBytes is the most the task store keeps of one task, 0 when
	// it keeps any size: a message that leaves its task no MessageRoom
	// is refused before anything is delegated (messageFit).
	MaxTaskBytes int64
	// GRPC serves the A2A interface over gRPC too, when its Listen is
	// set.
	GRPC GRPCConfig
}

// Skill is one skill orchd's card lists.
type Skill struct {
	// ID is the skill id other orchestrators select by.
	ID string
	// Name is a human-readable name; default the id.
	Name string
	// Description says what the skill does.
	Description string
	// Tags are keywords for the skill.
	Tags []string
}

// Deps are what the server works with: the delegation engine it hands
// the work of every message to, the task store its A2A tasks live in,
// and the shared plumbing in front of it.
type Deps struct {
	// Agents are the agents orchd routes to, whose skills the card
	// lists: *registry.Registry.
	Agents Routable
	// Engine delegates the work of every message.
	Engine *delegation.Engine
	// Tasks keeps the A2A tasks, each caller's apart (store.Tasks).
	Tasks taskstore.Store
	// Authz authorizes each call. Its gate says who the caller is, and
	// how callers authenticate, which the card declares.
	Authz httpgate.Authorizer
	// Limits bounds the request bodies of the HTTP bindings.
	Limits *httpgate.BodyLimits
	// Access logs each gRPC call; nil logs none.
	Access *httpgate.AccessLog
	// Telemetry traces calls.
	Telemetry *telemetry.Telemetry
	// Push delivers push notifications to callers' webhooks (NewPushOut);
	// nil turns push notifications off. Close closes it.
	Push *PushOut
	// Stopping is done when the daemon begins to stop: mirrors end then,
	// so A2A streams end and the HTTP server can shut down.
	Stopping context.Context
	// Log is the daemon's logger; the server logs as the components a2a,
	// grpc and push.
	Log *slog.Logger
}

// Server is orchd as an A2A agent: its card and its endpoints (JSON-RPC
// and HTTP+JSON for A2A 1.0 and 0.3, gRPC, the push webhook), all backed
// by one a2a-go request handler whose executor delegates. doc.go draws
// the path a message takes through it.
type Server struct {
	cfg    Config
	agents Routable
	// gate says how callers authenticate, for the card to declare.
	gate    *httpgate.Gate
	limits  *httpgate.BodyLimits
	tel     *telemetry.Telemetry
	handler a2asrv.RequestHandler
	exec    *executor
	grpc    *grpcServer
	push    *PushOut
	webhook *pushWebhook
	// card is the served card JSON and its ETag, set once the listen
	// address is known and rebuilt when the agents behind it change.
	card atomic.Pointer[servedCard]
	// cardMu serializes rebuilds of the card.
	cardMu sync.Mutex
	// grpcURL is the gRPC interface the card lists (host:port), "" when
	// orchd serves no gRPC; set before the first card is built.
	grpcURL string
}

// Routable is where orchd's card finds the skills it can route to:
// *registry.Registry.
type Routable interface {
	List() []*registry.Agent
	Generation() uint64
}

type servedCard struct {
	// json and etag are the dual 0.3/1.0 card; v1 is the strict 1.0 one,
	// modified when either last changed (cardvariants.go).
	json     []byte
	etag     string
	v1       cardVariant
	modified time.Time
	digest   [sha256.Size]byte
	// base is the URL the card's interfaces start with; gen is the
	// registry generation its skills were taken from.
	base string
	gen  uint64
}

// New builds the server of cfg over deps. It serves nothing until its
// routes are on a server (Routes) and its card is built (SetCard); gRPC
// is served once ListenGRPC and ServeGRPC are called. A server that is
// built must be closed.
func New(cfg Config, deps Deps) (*Server, error) {
	log := deps.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	a2aLog := log.With("component", "a2a")
	g := deps.Authz.Gate()
	exec := newExecutor(deps.Engine, deps.Tasks, g, deps.Stopping, a2aLog)
	execs := steering.NewExecutions()
	steer := steerRoute{x: exec, tasks: deps.Tasks, execs: execs, settle: settleTimeout}
	maxMessage := max(cfg.MaxTaskBytes-MessageRoom, 0)
	// a2a-go derives a logger for every request, seldom written to:
	// LazyHandler formats its attributes only for a record written.
	h, err := withSubscribe(a2asrv.NewHandler(exec, a2asrv.WithTaskStore(failGuard{Store: deps.Tasks, x: exec}), a2asrv.WithLogger(slog.New(telemetry.LazyHandler(a2aLog.Handler()))),
		a2asrv.WithCallInterceptors(spanNamer{}, callerInterceptor{gate: g}, developmentUser{gate: g}, authorizeA2A{authz: deps.Authz}, versionCheck{}, historyLimit{}, messageFit{max: maxMessage}, steer, terminalSend{tasks: deps.Tasks}, authInput{x: exec, tasks: deps.Tasks}, earlyDelegation{x: exec}),
		a2asrv.WithExecutorContextInterceptor(execs), deps.Push.handlerOption()), deps.Tasks, exec.changes, deps.Stopping)
	if err == nil {
		h, err = withCancelRetry(h)
	}
	if err != nil {
		return nil, fmt.Errorf("A2A server: %w", err)
	}
	return &Server{cfg: cfg, agents: deps.Agents, gate: g, limits: deps.Limits, tel: deps.Telemetry, handler: h, exec: exec, push: deps.Push,
		grpc:    newGRPCServer(cfg.GRPC, g, h, deps.Telemetry, deps.Access, log.With("component", "grpc")),
		webhook: newPushWebhook(deps.Engine, log.With("component", "push"))}, nil
}

// Resumed takes over the upstream task of a delegation the engine
// carries on from the store, to mirror the delegation into it again:
// give it to delegation.Engine.OnResume before the engine starts.
func (s *Server) Resumed(d *delegation.Delegation) { s.exec.resumed(d) }

// CardReady reports whether the card is built (SetCard), so orchd can be
// found.
func (s *Server) CardReady() bool { return s.card.Load() != nil }

// Close waits for the goroutines the server started (the mirrors of
// carried-on delegations, which end when Stopping is done), then closes
// the push sender, which tries the notifications still queued once more.
// The HTTP and gRPC servers in front must have stopped, and the
// delegation engine closed, first.
func (s *Server) Close() {
	s.exec.wg.Wait()
	s.exec.writes.Close()
	s.push.Close() // after the executions: they send the last notifications
}

// SetCard builds the card for base, the URL this orchd is reached at. It
// is rebuilt whenever the agents behind it change.
func (s *Server) SetCard(ctx context.Context, base string) error {
	s.cardMu.Lock()
	defer s.cardMu.Unlock()
	return s.buildCard(ctx, strings.TrimRight(base, "/"), s.agents.Generation())
}

// currentCard returns the served card, rebuilt first when the registry's
// agents changed since it was built, so the skills it lists stay those
// orchd can route to now.
func (s *Server) currentCard(ctx context.Context) (*servedCard, error) {
	c := s.card.Load()
	if c == nil || c.gen == s.agents.Generation() {
		return c, nil
	}
	s.cardMu.Lock()
	defer s.cardMu.Unlock()
	if c = s.card.Load(); c.gen == s.agents.Generation() {
		return c, nil
	}
	if err := s.buildCard(ctx, c.base, s.agents.Generation()); err != nil {
		return nil, err
	}
	return s.card.Load(), nil
}

// buildCard builds and stores the card for base from the configuration
// and the agents of registry generation gen. Callers hold cardMu.
func (s *Server) buildCard(ctx context.Context, base string, gen uint64) error {
	card := &a2a.AgentCard{
		Name:        s.cfg.Name,
		Description: s.cfg.Description,
		Version:     "1.0.0",
		SupportedInterfaces: []*a2a.AgentInterface{
			{URL: base + pathJSONRPC, ProtocolBinding: a2a.TransportProtocolJSONRPC, ProtocolVersion: "1.0"},
			{URL: base + pathREST, ProtocolBinding: a2a.TransportProtocolHTTPJSON, ProtocolVersion: "1.0"},
			{URL: base + pathJSONRPC03, ProtocolBinding: a2a.TransportProtocolJSONRPC, ProtocolVersion: "0.3"},
			{URL: base + pathREST03, ProtocolBinding: a2a.TransportProtocolHTTPJSON, ProtocolVersion: "0.3"},
		},
		Capabilities: a2a.AgentCapabilities{
			Streaming:         true,
			PushNotifications: true,
			Extensions: []a2a.AgentExtension{
				delegation.CardExtension(s.cfg.Self, s.cfg.Name),
				orchdSteering.Extension(),
			},
		},
		DefaultInputModes:  []string{"text/plain", "application/json"},
		DefaultOutputModes: []string{"text/plain", "application/json"},
		Skills:             cardSkills(s.cfg.Skills, s.agents.List()),
	}
	if s.grpcURL != "" { // one port serves both versions (grpcserver.go)
		card.SupportedInterfaces = append(card.SupportedInterfaces,
			&a2a.AgentInterface{URL: s.grpcURL, ProtocolBinding: a2a.TransportProtocolGRPC, ProtocolVersion: "1.0"},
			&a2a.AgentInterface{URL: s.grpcURL, ProtocolBinding: a2a.TransportProtocolGRPC, ProtocolVersion: "0.3"})
	}
	card.SecuritySchemes, card.SecurityRequirements = cardSecurity(s.gate)
	producer := a2av0.NewStaticAgentCardProducer(card).(a2asrv.AgentCardJSONProducer)
	b, err := producer.CardJSON(ctx)
	if err == nil {
		b, err = dualSecuritySchemes(b, card.SecuritySchemes)
	}
	var v1 []byte
	if err == nil {
		v1, err = v1CardJSON(card)
	}
	if err != nil {
		return fmt.Errorf("agent card: %w", err)
	}
	digest := cardDigest(b, v1)
	if prev := s.card.Load(); prev != nil && prev.digest == digest {
		same := *prev // unchanged: the same bytes, ETags and Last-Modified
		same.base, same.gen = base, gen
		s.card.Store(&same)
		return nil
	}
	if s.cfg.Signer != nil {
		if b, err = capability.SignCard(b, s.cfg.Signer); err == nil {
			v1, err = capability.SignCard(v1, s.cfg.Signer)
		}
		if err != nil {
			return fmt.Errorf("agent card: %w", err)
		}
	}
	sum := sha256.Sum256(b)
	s.card.Store(&servedCard{json: b, etag: `"` + hex.EncodeToString(sum[:12]) + `"`, v1: newCardVariant(v1),
		modified: time.Now().UTC().Truncate(time.Second), digest: digest, base: base, gen: gen})
	return nil
}

// cardSkills lists the skills orchd's card offers: the configured ones,
// then every skill of the registered agents orchd can talk to, once per
// skill id, so an orchd chained behind another is found by skill.
func cardSkills(configured []Skill, agents []*registry.Agent) []a2a.AgentSkill {
	skills := []a2a.AgentSkill{}
	seen := map[string]bool{}
	for _, sk := range configured {
		name := sk.Name
		if name == "" {
			name = sk.ID
		}
		tags := sk.Tags
		if tags == nil {
			tags = []string{}
		}
		seen[sk.ID] = true
		skills = append(skills, a2a.AgentSkill{ID: sk.ID, Name: name, Description: sk.Description, Tags: tags})
	}
	routed := map[string]int{} // skill id → index in skills
	for _, a := range agents {
		if !a.ClientCompatible {
			continue
		}
		for _, sk := range a.Skills {
			if seen[sk.ID] {
				continue
			}
			if i, ok := routed[sk.ID]; ok {
				skills[i].Description += ", " + a.ID
				for _, t := range sk.Tags {
					if !slices.Contains(skills[i].Tags, t) {
						skills[i].Tags = append(skills[i].Tags, t)
					}
				}
				continue
			}
			name := sk.Name
			if name == "" {
				name = sk.ID
			}
			routed[sk.ID] = len(skills)
			skills = append(skills, a2a.AgentSkill{ID: sk.ID, Name: name,
				Description: "Routed by this orchd to: " + a.ID, Tags: append([]string{}, sk.Tags...)})
		}
	}
	return skills
}

// Routes adds the card, the A2A endpoints and the push webhook to mux: the
// endpoints traced, their request bodies bounded and their callers
// authenticated by the gate, which lets them refuse a caller in A2A's
// terms (httpgate.Gate.Admit). The push webhook is not behind the gate:
// each delegation's webhook has its own token.
func (s *Server) Routes(mux *http.ServeMux) {
	tel, limits, g := s.tel, s.limits, s.gate
	ext := []string{delegation.ExtensionURI, steering.URI}
	handle := func(path, version string, h http.Handler) {
		mux.Handle(path, tel.Handler(g.Admit(httpgate.GroupA2A, served(version, ext, h)), "A2A"))
	}
	mux.Handle("GET "+a2asrv.WellKnownAgentCardPath, g.Wrap(httpgate.GroupCard, s.cardHandler(false)))
	mux.Handle("OPTIONS "+a2asrv.WellKnownAgentCardPath, http.HandlerFunc(cardOptions))
	mux.Handle("GET "+LegacyCardPath, g.Wrap(httpgate.GroupCard, s.cardHandler(true)))
	mux.Handle("OPTIONS "+LegacyCardPath, http.HandlerFunc(cardOptions))
	jsonRPC := boundJSONRPC(limits, jsonRPCMediaType(a2asrv.NewJSONRPCHandler(s.handler)))
	handle(pathJSONRPC, "1.0", jsonRPC)
	handle(pathJSONRPC+"/{$}", "1.0", jsonRPC)
	handle(pathREST+"/", "1.0", boundREST(limits, restMediaType(false, http.StripPrefix(pathREST, restFallback(false, a2asrv.NewRESTHandler(s.handler))))))
	jsonRPC03 := boundJSONRPC03(limits, jsonRPCMediaType(a2av0.NewJSONRPCHandler(s.handler)))
	handle(pathJSONRPC03, "0.3", jsonRPC03)
	handle(pathJSONRPC03+"/{$}", "0.3", jsonRPC03)
	handle(pathREST03+"/", "0.3", boundREST03(limits, restMediaType(true, acceptProtoNames(legacyRESTErrors(http.StripPrefix(pathREST03, restFallback(false, a2av0.NewRESTHandler(s.handler))))))))
	unknown := tel.Handler(http.HandlerFunc(unknownA2APath), "A2A")
	for _, p := range []string{pathA2A, pathREST, pathREST03} {
		mux.Handle(p, unknown)
	}
	s.webhook.route(mux, func(h http.Handler) http.Handler { return tel.Handler(h, "orchd.push") })
}

// cardHandler serves the card at the well-known path, or at the 0.2-era
// path when legacy (cardvariants.go).
func (s *Server) cardHandler(legacy bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { s.serveCard(w, r, legacy) })
}

// serveCard serves the card variant the caller's A2A-Version asks for,
// or the path's default (cardvariants.go), with Cache-Control, Vary, an
// ETag per variant and Last-Modified, answering a matching If-None-Match,
// or else an If-Modified-Since not older than the card, with 304.
func (s *Server) serveCard(w http.ResponseWriter, r *http.Request, legacy bool) {
	c, err := s.currentCard(r.Context())
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	if c == nil {
		http.Error(w, "agent card not ready", http.StatusServiceUnavailable)
		return
	}
	v := c.variant(r, legacy)
	h := w.Header()
	cardCORS(h, r)
	h.Add("Vary", a2a.SvcParamVersion)
	h.Set("Cache-Control", fmt.Sprintf("public, max-age=%d", cardMaxAge))
	h.Set("ETag", v.etag)
	h.Set("Last-Modified", c.modified.Format(http.TimeFormat))
	if notModified(r, v.etag, c.modified) {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	h.Set("Content-Type", "application/json")
	_, _ = w.Write(v.json)
}

// endpointVersionKey carries the A2A version an endpoint serves to the
// version check.
type endpointVersionKey struct{}

// served wraps an A2A endpoint: it tells the version check which version
// the endpoint serves and echoes, in the A2A-Extensions response header,
// the requested extensions orchd supports (a2a-go echoes them only over
// gRPC).
func served(v string, supported []string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var active []string
		for _, h := range append(r.Header.Values(a2a.SvcParamExtensions), r.Header.Values("X-A2A-Extensions")...) {
			for _, uri := range strings.Split(h, ",") {
				uri = strings.TrimSpace(uri)
				if slices.Contains(supported, uri) && !slices.Contains(active, uri) {
					active = append(active, uri)
				}
			}
		}
		if len(active) > 0 {
			w.Header().Set(a2a.SvcParamExtensions, strings.Join(active, ", "))
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), endpointVersionKey{}, v)))
	})
}

// versionCheck refuses a request whose A2A-Version the endpoint does not
// serve with VersionNotSupportedError (-32009). A request that names no
// version (no A2A-Version, or an empty one) is served in the version of
// the endpoint it reached: at a 0.3 endpoint that is 0.3, as the
// specification reads an empty version; at a 1.0 endpoint the request's
// method, path or gRPC service exists only in 1.0, so it cannot be a 0.3
// request, and the draft conformance suite expects it served (VER-NEG-002,
// a SHOULD), as a2a-go serves it (docs/a2a.md, "Versions").
type versionCheck struct {
	a2asrv.PassthroughCallInterceptor
}

func (versionCheck) Before(ctx context.Context, cc *a2asrv.CallContext, _ *a2asrv.Request) (context.Context, any, error) {
	served, _ := ctx.Value(endpointVersionKey{}).(string)
	if served == "" {
		return ctx, nil, nil
	}
	var asked string
	if vals, ok := cc.ServiceParams().Get(a2a.SvcParamVersion); ok && len(vals) > 0 {
		asked = strings.TrimSpace(vals[0])
	}
	if asked != "" && !sameVersion(asked, served) {
		return ctx, nil, a2a.NewError(a2a.ErrVersionNotSupported,
			fmt.Sprintf("A2A-Version %s is not served at this interface, which speaks %s; the agent card lists an interface per version", asked, served))
	}
	return ctx, nil, nil
}

// messageFit refuses a message larger than orchd's task store can keep
// in a task, before anything is delegated: the task that would hold it
// could not be stored, and the caller would get an internal error after
// the work had gone to an agent. max is 0 for a store with no bound (in
// memory).
type messageFit struct {
	a2asrv.PassthroughCallInterceptor
	max int64
}

func (f messageFit) Before(ctx context.Context, cc *a2asrv.CallContext, req *a2asrv.Request) (context.Context, any, error) {
	smr, ok := req.Payload.(*a2a.SendMessageRequest)
	if f.max <= 0 || !ok || smr.Message == nil {
		return ctx, nil, nil
	}
	if n := delegation.MessageSize(smr.Message); n > f.max {
		return ctx, nil, a2a.NewError(a2a.ErrInvalidParams, fmt.Sprintf(
			"the message takes about %d bytes, more than the %d orchd keeps of a message in a task (its state store's largest task, less room for the work's answer)", n, f.max))
	}
	return ctx, nil, nil
}

// MessageRoom is what a task needs besides the caller's message: the
// status messages and metadata of the work. A message is refused when
// the task store's largest task less MessageRoom cannot hold it.
const MessageRoom = 256 << 10

// sameVersion compares A2A versions as a2a-go selects transports: equal
// majors, and below 1.0 equal minors too.
func sameVersion(a, b string) bool {
	if a == b {
		return true
	}
	va, errA := version.NewVersion(a)
	vb, errB := version.NewVersion(b)
	if errA != nil || errB != nil {
		return false
	}
	sa, sb := va.Segments(), vb.Segments()
	return sa[0] == sb[0] && (sa[0] != 0 || sa[1] == sb[1])
}

// spanNamer names the server span of an A2A call after its method
// ("A2A SendMessage"), which the HTTP layer cannot see in a JSON-RPC body,
// and records the protocol version the caller asked for.
type spanNamer struct {
	a2asrv.PassthroughCallInterceptor
}

func (spanNamer) Before(ctx context.Context, cc *a2asrv.CallContext, _ *a2asrv.Request) (context.Context, any, error) {
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return ctx, nil, nil
	}
	telemetry.NameSpan(ctx, "A2A "+cc.Method())
	span.SetAttributes(attribute.String("a2a.method", cc.Method()))
	if vals, ok := cc.ServiceParams().Get(a2a.SvcParamVersion); ok && len(vals) > 0 {
		span.SetAttributes(attribute.String("a2a.version", vals[0]))
	}
	return ctx, nil, nil
}
