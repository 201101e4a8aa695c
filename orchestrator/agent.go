package orchestrator

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2acompat/a2av0"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
	"github.com/a2aproject/a2a-go/v2/a2asrv/taskstore"
	"github.com/hashicorp/go-version"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/orchd/orchd/delegation"
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

// a2aServer is orchd as an A2A agent: its card and its endpoints, all
// backed by one a2a-go request handler whose executor delegates.
type a2aServer struct {
	cfg     AgentConfig
	handler a2asrv.RequestHandler
	// card is the served card JSON and its ETag, set once the listen
	// address is known.
	card atomic.Pointer[servedCard]
}

type servedCard struct {
	json []byte
	etag string
}

func newA2AServer(cfg AgentConfig, engine *delegation.Engine, stopping <-chan struct{}, log *slog.Logger) *a2aServer {
	exec := newExecutor(engine, stopping, log)
	tasks := taskstore.NewInMemory(&taskstore.InMemoryStoreConfig{Authenticator: a2asrv.NewTaskStoreAuthenticator()})
	h := a2asrv.NewHandler(exec, a2asrv.WithTaskStore(tasks), a2asrv.WithLogger(log),
		a2asrv.WithCallInterceptors(spanNamer{}, versionCheck{}, steerRoute{x: exec, tasks: tasks}, earlyDelegation{x: exec}))
	return &a2aServer{cfg: cfg, handler: h}
}

// setCard builds the card for base, the URL this orchd is reached at.
func (s *a2aServer) setCard(ctx context.Context, base string) error {
	base = strings.TrimRight(base, "/")
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
			Streaming: true,
			Extensions: []a2a.AgentExtension{
				{URI: delegation.ExtensionURI, Description: "orchd delegation chain context: path, depth, deadline, skill and inherited requirements"},
				orchdSteering.Extension(),
			},
		},
		DefaultInputModes:  []string{"text/plain", "application/json"},
		DefaultOutputModes: []string{"text/plain", "application/json"},
		Skills:             []a2a.AgentSkill{},
	}
	for _, sk := range s.cfg.Skills {
		name := sk.Name
		if name == "" {
			name = sk.ID
		}
		tags := sk.Tags
		if tags == nil {
			tags = []string{}
		}
		card.Skills = append(card.Skills, a2a.AgentSkill{ID: sk.ID, Name: name, Description: sk.Description, Tags: tags})
	}
	producer := a2av0.NewStaticAgentCardProducer(card).(a2asrv.AgentCardJSONProducer)
	b, err := producer.CardJSON(ctx)
	if err != nil {
		return fmt.Errorf("agent card: %w", err)
	}
	sum := sha256.Sum256(b)
	s.card.Store(&servedCard{json: b, etag: `"` + hex.EncodeToString(sum[:12]) + `"`})
	return nil
}

// routes adds the card and the A2A endpoints to mux, traced by tel.
func (s *a2aServer) routes(mux *http.ServeMux, tel *telemetry.Telemetry) {
	ext := []string{delegation.ExtensionURI, steering.URI}
	handle := func(path, version string, h http.Handler) {
		mux.Handle(path, tel.Handler(served(version, ext, h), "A2A"))
	}
	mux.HandleFunc("GET "+a2asrv.WellKnownAgentCardPath, s.serveCard)
	handle(pathJSONRPC, "1.0", a2asrv.NewJSONRPCHandler(s.handler))
	handle(pathREST+"/", "1.0", http.StripPrefix(pathREST, a2asrv.NewRESTHandler(s.handler)))
	handle(pathJSONRPC03, "0.3", a2av0.NewJSONRPCHandler(s.handler))
	handle(pathREST03+"/", "0.3", acceptProtoNames(legacyRESTErrors(http.StripPrefix(pathREST03, a2av0.NewRESTHandler(s.handler)))))
}

// serveCard serves the card with Cache-Control and an ETag, answering a
// matching If-None-Match with 304.
func (s *a2aServer) serveCard(w http.ResponseWriter, r *http.Request) {
	c := s.card.Load()
	if c == nil {
		http.Error(w, "agent card not ready", http.StatusServiceUnavailable)
		return
	}
	w.Header().Set("Cache-Control", fmt.Sprintf("public, max-age=%d", cardMaxAge))
	w.Header().Set("ETag", c.etag)
	if inm := r.Header.Get("If-None-Match"); inm != "" && slices.Contains(strings.Split(strings.ReplaceAll(inm, " ", ""), ","), c.etag) {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(c.json)
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
// serve with VersionNotSupportedError (-32009). An empty A2A-Version means
// 0.3, as the specification says.
type versionCheck struct {
	a2asrv.PassthroughCallInterceptor
}

func (versionCheck) Before(ctx context.Context, cc *a2asrv.CallContext, _ *a2asrv.Request) (context.Context, any, error) {
	served, _ := ctx.Value(endpointVersionKey{}).(string)
	if served == "" {
		return ctx, nil, nil
	}
	asked := "0.3"
	if vals, ok := cc.ServiceParams().Get(a2a.SvcParamVersion); ok && len(vals) > 0 && strings.TrimSpace(vals[0]) != "" {
		asked = strings.TrimSpace(vals[0])
	}
	if !sameVersion(asked, served) {
		return ctx, nil, a2a.NewError(a2a.ErrVersionNotSupported,
			fmt.Sprintf("A2A-Version %s is not served at this interface, which speaks %s; the agent card lists an interface per version", asked, served))
	}
	return ctx, nil, nil
}

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
