package mcpserver

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/orchd/orchd/delegation"
	"github.com/orchd/orchd/httpgate"
	"github.com/orchd/orchd/registry"
)

// Path is where the MCP endpoint is served.
const Path = "/mcp"

// Config is the MCP front's settings (the config file's mcp section).
type Config struct {
	// Wait is how long orchd_delegate and orchd_wait wait by default
	// before answering with where the work stands. Default 45s; at most
	// MaxWaitSeconds.
	Wait time.Duration
	// Heartbeat is the longest a waiting tool call goes without a progress
	// notification, for clients that give up on a silent call. Default
	// 10s.
	Heartbeat time.Duration
	// Self is this orchd's identity in delegation chains; idempotency
	// keys name different delegations on different orchds.
	Self string
	// Version is orchd's version, given to clients as the server's.
	Version string
	// StateKeys sign the request state of the questions orchd_delegate
	// asks (MRTR): the first signs, all verify (LoadStateKeys). Required.
	StateKeys [][]byte
	// StateTTL is how long a question's request state stays valid.
	// Default 10m.
	StateTTL time.Duration
}

// withDefaults is c with its zero fields defaulted.
func (c Config) withDefaults() Config {
	if c.Wait <= 0 {
		c.Wait = 45 * time.Second
	}
	c.Wait = min(c.Wait, MaxWaitSeconds*time.Second)
	if c.Heartbeat <= 0 {
		c.Heartbeat = 10 * time.Second
	}
	if c.StateTTL <= 0 {
		c.StateTTL = 10 * time.Minute
	}
	return c
}

// Deps are what the MCP front serves from.
type Deps struct {
	// Registry is the agent registry (orchd_agents).
	Registry *registry.Registry
	// Engine is the delegation engine.
	Engine *delegation.Engine
	// Authz decides what each caller may do; the gate in front of the
	// handler says who the caller is.
	Authz httpgate.Authorizer
	// Limits bounds the request bodies as the HTTP API's are
	// (http.maxAPIBodyBytes, http.maxJSONDepth).
	Limits *httpgate.BodyLimits
	// Stopping is closed when the daemon begins to stop: waiting calls
	// answer with where their work stands then.
	Stopping <-chan struct{}
	// Log receives the front's failures; nil discards them.
	Log *slog.Logger
}

// Server is orchd's MCP front. Build it with New; serve Handler at Path,
// behind the gate.
type Server struct {
	cfg      Config
	registry *registry.Registry
	engine   *delegation.Engine
	authz    httpgate.Authorizer
	limits   *httpgate.BodyLimits
	stopping <-chan struct{}
	log      *slog.Logger
	keys     *keyed
	states   *stateSealer
	// ended keeps what describe read of ended delegations (ended.go).
	ended *endedViews
	mcp   *mcp.Server
	// impl is orchd as an MCP server names itself (serverInfo).
	impl *mcp.Implementation
}

// New returns the MCP front serving from d.
func New(cfg Config, d Deps) (*Server, error) {
	cfg = cfg.withDefaults()
	if len(cfg.StateKeys) == 0 {
		return nil, fmt.Errorf("mcp: no request state key")
	}
	log := d.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Server{cfg: cfg, registry: d.Registry, engine: d.Engine, authz: d.Authz, limits: d.Limits,
		stopping: d.Stopping, log: log, keys: &keyed{self: cfg.Self},
		states: &stateSealer{keys: cfg.StateKeys, ttl: cfg.StateTTL}, ended: newEndedViews()}
	caps := &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{}}
	caps.AddExtension(ExtTasks, nil)
	caps.AddExtension(ExtSteering, steeringCapability)
	s.impl = &mcp.Implementation{Name: "orchd", Title: "orchd", Version: cfg.Version}
	s.mcp = mcp.NewServer(s.impl, &mcp.ServerOptions{
		Capabilities: caps, Logger: log,
		Instructions: "orchd delegates work to A2A agents. Call orchd_agents to see them, orchd_delegate to hand work over " +
			"(it returns the answer, or a delegation id to follow with orchd_wait), and orchd_reply, orchd_steer, " +
			"orchd_interrupt or orchd_cancel with that id.",
	})
	s.mcp.AddReceivingMiddleware(callerMiddleware, s.extensionsMiddleware)
	if err := errors.Join(s.addTools(s.mcp), s.addTasks(s.mcp), s.addSteering(s.mcp)); err != nil {
		// A tool's input schema cannot be inferred, or go-sdk came to
		// serve one of these methods itself.
		return nil, fmt.Errorf("mcp: %w", err)
	}
	return s, nil
}

// Handler returns the MCP endpoint: go-sdk's Streamable HTTP handler, for
// every protocol version it speaks, behind the body limits of the HTTP
// API. Serve it at Path behind the gate (httpgate.Gate.Wrap), which says
// who the caller is.
//
// A request of 2026-07-28 or later (its MCP-Protocol-Version header says)
// stands alone: it is served without a session, on any replica. Older
// clients open a session (Mcp-Session-Id) and are served in it, so orchd
// can ask them questions (elicitation/create) on its stream; their
// sessions live in this process.
func (s *Server) Handler() http.Handler {
	get := func(*http.Request) *mcp.Server { return s.mcp }
	opts := mcp.StreamableHTTPOptions{
		Logger: s.log,
		// orchd's own browser guard (httpgate.BrowserGuard) stands in
		// front of every route, this one included.
		DisableLocalhostProtection: true,
		// The body limits came first.
		MaxRequestBodyBytes: -1,
	}
	sessions := mcp.NewStreamableHTTPHandler(get, &opts)
	opts.Stateless = true
	// A client that drops a request stops its wait: it sends the
	// request again if it still wants the answer.
	opts.PropagateRequestCancellation = true
	alone := s.ownMethods(mcp.NewStreamableHTTPHandler(get, &opts))
	route := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("MCP-Protocol-Version") >= firstSessionless {
			alone.ServeHTTP(w, r)
			return
		}
		sessions.ServeHTTP(w, r)
	})
	return s.limits.JSONRPC(carryCaller(sessionOwned(route)), writeRefusal)
}

// firstSessionless is the first protocol version without sessions.
const firstSessionless = "2026-07-28"

// writeRefusal answers a body the limits refused as a JSON-RPC error, the
// shape MCP clients read.
func writeRefusal(w http.ResponseWriter, rf *httpgate.Refusal) {
	code := -32600 // invalid request
	if rf.Busy {
		code = -32603
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(rf.Status)
	_ = json.NewEncoder(w).Encode(map[string]any{"jsonrpc": "2.0", "id": rf.ID,
		"error": map[string]any{"code": code, "message": rf.Msg}})
}
