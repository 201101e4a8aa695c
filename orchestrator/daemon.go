package orchestrator

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"path/filepath"
	"sync"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2asrv"

	"github.com/orchd/orchd/a2aserver"
	"github.com/orchd/orchd/auth"
	"github.com/orchd/orchd/credentials"
	"github.com/orchd/orchd/delegation"
	"github.com/orchd/orchd/httpapi"
	"github.com/orchd/orchd/httpgate"
	"github.com/orchd/orchd/mcpserver"
	"github.com/orchd/orchd/policies"
	"github.com/orchd/orchd/registry"
	"github.com/orchd/orchd/store"
	"github.com/orchd/orchd/telemetry"
)

// Daemon is a running orchd: the registry, the policy engine, the
// delegations and the HTTP API in front of them, over the state store.
type Daemon struct {
	cfg         Config
	log         *slog.Logger
	registry    *registry.Registry
	policies    *policies.Engine
	delegations *delegation.Engine
	telemetry   *telemetry.Telemetry
	// ownTelemetry is set when New built the telemetry and Close shuts
	// it down.
	ownTelemetry bool
	// agent is orchd as an A2A agent: the card, the A2A endpoints, push
	// notifications to callers and the webhook for agents' pushes.
	agent   *a2aserver.Server
	handler http.Handler
	// authn authenticates callers; nil when no authentication is
	// configured. gate applies it to the routes.
	authn *auth.Authenticator
	gate  *httpgate.Gate
	// credentials holds the transports of agents called with credentials.
	credentials *credentials.Clients
	// state is the store and the state directory's lock.
	state *state
	// stopping is closed when Run begins to shut down, ending long-lived
	// streams so the graceful shutdown does not wait on them; stopCtx is
	// done at the same time.
	stopping  <-chan struct{}
	stopCtx   context.Context
	stopNow   context.CancelFunc
	stopOnce  sync.Once
	closeOnce sync.Once

	// self is this orchd's identity in chains; stateDir is where it is
	// kept, "" when the daemon keeps no state.
	self     string
	stateDir string

	mu       sync.Mutex
	listener net.Listener
}

// New builds a daemon from cfg: it takes the state directory's lock, opens
// the state store (starting the embedded NATS server unless the config
// says otherwise), loads the policies (which must compile) and prepares
// the registry. It serves nothing; Run does. A daemon that is never run
// must be closed.
func New(cfg Config, log *slog.Logger) (d *Daemon, err error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if err := cfg.Auth.Validate(); err != nil { // its peers make the gate
		return nil, err
	}
	// Start-up is all or nothing: each part built adds its release to
	// undo, and a failure releases them, last built first. Once the
	// daemon exists, its Close is the one release.
	var undo []func()
	defer func() {
		if err != nil {
			for i := len(undo) - 1; i >= 0; i-- {
				undo[i]()
			}
		}
	}()
	tel, own := cfg.Telemetry.Providers, false
	if tel == nil {
		tel, err = telemetry.New(context.Background(), telemetry.Config{ServiceName: cfg.Telemetry.ServiceName, Prometheus: cfg.Telemetry.Prometheus,
			Log: log.With("component", "telemetry")})
		if err != nil {
			return nil, err
		}
		own = true
		undo = append(undo, func() { _ = tel.Shutdown(context.Background()) })
	}
	stateDir, err := stateDirOf(cfg)
	if err != nil {
		return nil, err
	}
	st, err := openState(context.Background(), cfg, stateDir, log)
	if err != nil {
		return nil, err
	}
	undo = append(undo, st.close)
	self := st.self
	engine, err := policies.NewEngine(cfg.Policies.Paths, cfg.PolicyOptions(), log.With("component", "policies"))
	if err != nil {
		return nil, fmt.Errorf("load policies: %w", err)
	}
	rcfg := cfg.RegistryConfig()
	rcfg.TracerProvider, rcfg.MeterProvider = tel.TracerProvider(), tel.MeterProvider()
	rcfg.Store = st.agents
	reg, err := registry.New(rcfg, log.With("component", "registry"))
	if err != nil {
		return nil, err
	}
	undo = append(undo, reg.Close)
	transport, err := registry.NewTransport(rcfg)
	if err != nil {
		return nil, err
	}
	pusher, err := a2aserver.NewPushOut(cfg.Agent.Push.push(), rcfg, st.pushConfigs, tel.MeterProvider(), log)
	if err != nil {
		return nil, err
	}
	undo = append(undo, pusher.Close)
	dcfg := st.delegationBounds(cfg.DelegationConfig())
	dcfg.Self, dcfg.Name = self, cfg.Agent.Name
	// GRPCBase: agents' gRPC interfaces are dialed through the same guard.
	dcfg.HTTPClient = &http.Client{Transport: delegation.GRPCBase(tel.Transport(delegation.OwnStreamConns(transport)), transport)}
	// Agents with credentials get their own transports over the same
	// guarded one, traced the same way.
	dcfg.Credentials = credentials.NewClients(credentials.ClientsConfig{Base: transport, Wrap: tel.Transport, Log: log.With("component", "credentials")})
	dcfg.TracerProvider, dcfg.MeterProvider = tel.TracerProvider(), tel.MeterProvider()
	dcfg.Leases, dcfg.Relay, dcfg.Containments = st.leases, st.relay, st.containments
	authn, err := newAuthenticator(cfg.Auth, log.With("component", "auth"))
	if err != nil {
		return nil, err
	}
	if authn != nil {
		undo = append(undo, func() { _ = authn.Close() })
	}
	signer, err := a2aserver.LoadSigningKey(cfg.Agent.SigningKey, cfg.Agent.SigningKeyID)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	g := httpgate.NewGate(cfg.Auth, authn, log.With("component", "auth"))
	authz := httpgate.NewAuthorizer(g, engine)
	dcfg.TrustLineage = lineagePeers(cfg.Agents, g.Enabled())
	delegations := delegation.NewEngine(reg, engine, st.deleg, dcfg, log.With("component", "delegation"))
	stopCtx, stopNow := context.WithCancel(context.Background())
	undo = append(undo, stopNow, delegations.Close)
	access := cfg.Log.accessLog(log.With("component", "access"))
	limits := httpgate.NewBodyLimits(cfg.HTTP.bodyLimits(), log.With("component", "http"))
	var serverTLS func(*tls.Config) *tls.Config
	if authn != nil {
		serverTLS = authn.ServerTLS
	}
	agent, err := a2aserver.New(a2aserver.Config{Name: cfg.Agent.Name, Description: cfg.Agent.Description, Skills: cfg.Agent.skills(),
		Self: self, Signer: signer, MaxTaskBytes: st.maxTaskBytes, GRPC: cfg.Agent.GRPC.grpc(cfg.HTTP, serverTLS)},
		a2aserver.Deps{Agents: reg, Engine: delegations, Tasks: st.tasks, Authz: authz, Limits: limits, Access: access,
			Telemetry: tel, Push: pusher, Stopping: stopCtx, Log: log})
	if err != nil { // a2a-go changed under orchd: nothing runs yet
		return nil, err
	}
	d = &Daemon{cfg: cfg, log: log, registry: reg, policies: engine, delegations: delegations, state: st,
		stopping: stopCtx.Done(), stopCtx: stopCtx, stopNow: stopNow,
		telemetry: tel, ownTelemetry: own, self: self, stateDir: stateDir, authn: authn, gate: g, credentials: dcfg.Credentials,
		agent: agent}
	undo = []func(){d.Close}
	delegations.OnResume(agent.Resumed)
	guard, err := newBrowserGuard(cfg, authn != nil, log.With("component", "http"))
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	agent.Routes(mux)
	if h := tel.MetricsHandler(); h != nil {
		mux.Handle("GET /metrics", g.Wrap(httpgate.GroupMetrics, authz.Metrics(h)))
	}
	api := httpapi.New(httpapi.Deps{Registry: reg, Policies: engine, Delegations: delegations, Authz: authz, Limits: limits,
		Stopping: stopCtx, Ready: d.notReady, Log: log.With("component", "api")})
	apiHandler := tel.Handler(api.Handler(), "orchd")
	for _, route := range []string{"GET /healthz", "GET /readyz"} {
		mux.Handle(route, g.Wrap(httpgate.GroupHealth, apiHandler))
	}
	mux.Handle("GET /openapi.yaml", g.Wrap(httpgate.GroupOpenAPI, apiHandler))
	if cfg.MCP.Enabled {
		mcfg, err := cfg.MCP.server(self, stateDir)
		if err != nil {
			return nil, err
		}
		front, err := mcpserver.New(mcfg, mcpserver.Deps{Registry: reg, Engine: delegations, Authz: authz, Limits: limits,
			Stopping: d.stopping, Log: log.With("component", "mcp")})
		if err != nil {
			return nil, err
		}
		h := tel.Handler(front.Handler(), "orchd.mcp")
		// With an authorization server to name (auth.jwt), refusals send
		// OAuth clients to the endpoint's protected-resource metadata,
		// which is public. Without one there is no token to get there,
		// and clients given a static token should not go looking.
		if res := mcpResource(cfg); g.Enabled() && len(res.Issuers) > 0 {
			mux.Handle(mcpserver.Path, g.WrapChallenging(httpgate.GroupMCP, h, res.Challenge))
			for _, p := range []string{mcpserver.MetadataPath, mcpserver.MetadataRootPath} {
				mux.Handle(p, res.Handler())
			}
		} else {
			mux.Handle(mcpserver.Path, g.Wrap(httpgate.GroupMCP, h))
		}
	}
	if err := d.routeConsole(mux, api, apiHandler, guard.Origin()); err != nil {
		return nil, err
	}
	mux.Handle("/", g.Wrap(httpgate.GroupAPI, apiHandler))
	// Outermost, so every request is logged: the mux's 404s, the gate's
	// 401s and the browser guard's 403s too.
	d.handler = access.Wrap(guard.Wrap(httpgate.StreamDeadlines(mux, time.Duration(cfg.HTTP.withDefaults().StreamWriteTimeout))))
	return d, nil
}

// newBrowserGuard returns the browser guard of a daemon configured with
// cfg, authenticating callers or not: its own hosts are those of listen
// (unless it binds every interface), http.allowedHosts, agent.url and
// delegation.pushURL; the agent card and the push webhook are open, and
// A2A endpoints answer refusals in their binding's shape.
func newBrowserGuard(cfg Config, authenticates bool, log *slog.Logger) (*httpgate.BrowserGuard, error) {
	gc := httpgate.GuardConfig{Hosts: cfg.HTTP.AllowedHosts, Authenticates: authenticates, APIKeyHeader: cfg.Auth.APIKeyHeader,
		Sites:  []httpgate.Site{{Setting: "agent.url", URL: cfg.Agent.URL}, {Setting: "delegation.pushURL", URL: cfg.Delegation.PushURL}},
		Open:   []string{a2asrv.WellKnownAgentCardPath, a2aserver.LegacyCardPath, a2aserver.PathPush + "/"},
		Forbid: a2aserver.Forbid, Log: log}
	if host, _, err := net.SplitHostPort(cfg.Listen); err == nil && !unspecifiedHost(host) {
		gc.Hosts = append([]string{host}, gc.Hosts...)
	}
	return httpgate.NewBrowserGuard(gc)
}

// GRPCAddr returns the address A2A is served on over gRPC once Run has
// bound it, or nil before and when agent.grpc.listen is not set.
func (d *Daemon) GRPCAddr() net.Addr { return d.agent.GRPCAddr() }

// grpcBound checks the address agent.grpc.listen bound, refusing one
// beyond loopback without authentication as for the HTTP listener, and
// returns the gRPC interface URL the card lists for it.
func (d *Daemon) grpcBound(addr net.Addr) (string, error) {
	if err := d.checkExposed(addr); err != nil {
		return "", fmt.Errorf("agent.grpc.%w", err)
	}
	return d.cfg.Agent.GRPC.advertised(addr, d.cfg.Agent.URL)
}

// newAuthenticator builds the authenticator the auth section describes,
// or returns nil when it configures no authentication.
func newAuthenticator(cfg AuthConfig, log *slog.Logger) (*auth.Authenticator, error) {
	a, err := auth.New(cfg.Config, auth.Options{Log: log})
	if err != nil {
		return nil, fmt.Errorf("config: %w", err) // auth.New names its section: "auth config: …"
	}
	if !a.Enabled() {
		_ = a.Close() // never started
		return nil, nil
	}
	return a, nil
}

// stateDirOf returns the configured state directory, else the default
// for the listen address ("" for an ephemeral port).
func stateDirOf(cfg Config) (string, error) {
	if cfg.StateDir != "" {
		return cfg.StateDir, nil
	}
	return DefaultStateDir(cfg.Listen)
}

// identity returns the daemon's identity in delegation chains:
// delegation.self when configured; else, on an external store, the one
// the replicas of this orchd share, kept in the store; else the one kept
// in the state directory (generated on first start; on the embedded
// store, kept in the store too: see embeddedIdentity). A daemon with no
// state directory (an ephemeral port and no stateDir) gets a new identity
// each start.
func identity(ctx context.Context, cfg Config, stateDir string, st *state) (string, error) {
	switch {
	case cfg.Delegation.Self != "":
		return cfg.Delegation.Self, nil
	case st.mode == StoreExternal:
		self, err := st.st.Identity(ctx, newIdentity())
		if err == nil {
			err = checkIdentity(self)
		}
		if err != nil {
			return "", fmt.Errorf("identity in the store: %w", err)
		}
		return self, nil
	case stateDir == "":
		return newIdentity(), nil
	case st.mode == StoreEmbedded:
		return embeddedIdentity(ctx, stateDir, st.st)
	}
	self, err := loadIdentity(stateDir)
	if err != nil {
		return "", fmt.Errorf("identity: %w", err)
	}
	return self, nil
}

// embeddedIdentity returns the identity in the state directory dir, kept
// in the embedded store st as well. A store that already holds state
// belongs to the orchd whose identity it has: orchd refuses to start on
// it with the identity file missing, rather than take a new identity (the
// chains and A2A tasks in the store name the old one), and with a file
// naming another identity. A new identity is generated only with a new
// store.
func embeddedIdentity(ctx context.Context, dir string, st *store.Store) (string, error) {
	path := filepath.Join(dir, identityFile)
	self, err := readIdentity(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		kept, err := st.KeptIdentity(ctx)
		switch {
		case err != nil:
			return "", fmt.Errorf("identity in the store: %w", err)
		case kept != "":
			return "", fmt.Errorf("identity: %s is missing, but the state store in %s belongs to orchd %q; "+
				"orchd will not take a new identity on it: write %s to %s to go on as that orchd, or restore the state directory from a backup",
				path, filepath.Join(dir, "nats"), kept, kept, path)
		case !st.Fresh():
			return "", fmt.Errorf("identity: %s is missing, but the state store in %s already holds state; "+
				"orchd will not take a new identity on it: restore %s (or the state directory) from a backup, or set delegation.self",
				path, filepath.Join(dir, "nats"), path)
		}
		if self, err = loadIdentity(dir); err != nil {
			return "", fmt.Errorf("identity: %w", err)
		}
	case err != nil:
		return "", fmt.Errorf("identity: %w", err)
	}
	kept, err := st.Identity(ctx, self)
	if err != nil {
		return "", fmt.Errorf("identity in the store: %w", err)
	}
	if kept != self {
		return "", fmt.Errorf("identity: %s says %q, but the state store in %s belongs to orchd %q; "+
			"orchd will not start on another orchd's state: put the state directory's own files back, or write %s to %s",
			path, self, filepath.Join(dir, "nats"), kept, kept, path)
	}
	return self, nil
}

// Identity returns this orchd's identity in delegation chains, as its card
// advertises it.
func (d *Daemon) Identity() string { return d.self }

// Delegations returns the daemon's delegation engine.
func (d *Daemon) Delegations() *delegation.Engine { return d.delegations }

// Policies returns the daemon's policy engine.
func (d *Daemon) Policies() *policies.Engine { return d.policies }

// ReloadPolicies reloads the policy files now, as SIGHUP does. A broken
// edit keeps the policies in force and is returned.
func (d *Daemon) ReloadPolicies() error { return d.policies.Reload() }

// ReloadTokens reads auth.tokensFile again now, as SIGHUP does (it is
// also read again when it changes). A broken edit keeps the tokens in
// force and is returned. It does nothing without a tokens file.
func (d *Daemon) ReloadTokens() error {
	if d.authn == nil {
		return nil
	}
	return d.authn.ReloadTokens()
}

// Registry returns the daemon's agent registry.
func (d *Daemon) Registry() *registry.Registry { return d.registry }

// Handler returns the HTTP API and the A2A endpoints, for embedding or
// tests. The agent card is served once Run has bound the listen address.
func (d *Daemon) Handler() http.Handler { return d.handler }

// Addr returns the address the API listens on once Run has bound it, or
// nil before.
func (d *Daemon) Addr() net.Addr {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.listener == nil {
		return nil
	}
	return d.listener.Addr()
}

// Run binds the listen address, registers the kept and the configured
// agents, carries on the delegations left running, starts the background
// refresher and serves the API until ctx is done. It then shuts the
// server down gracefully, stops every goroutine it started and closes the
// daemon before returning.
func (d *Daemon) Run(ctx context.Context) error {
	defer d.Close()
	if err := checkAdvertised(d.cfg.Listen, d.cfg.Agent.URL); err != nil {
		return fmt.Errorf("config: %w", err)
	}
	ln, err := net.Listen("tcp", d.cfg.Listen)
	if err != nil {
		return fmt.Errorf("listen %s: %w", d.cfg.Listen, err)
	}
	d.mu.Lock()
	d.listener = ln
	d.mu.Unlock()
	// Until the server takes the listener (Shutdown closes it), it is
	// Run's to close.
	serving := false
	defer func() {
		if !serving {
			_ = ln.Close()
		}
	}()
	if err := d.checkExposed(ln.Addr()); err != nil {
		return err
	}
	d.warnLoopback()
	if err := d.agent.ListenGRPC(d.grpcBound); err != nil {
		return fmt.Errorf("config: %w", err)
	}
	defer d.agent.StopGRPC() // before Close: the calls end first
	base := d.cfg.Agent.URL
	if base == "" {
		base = "http://" + ln.Addr().String()
	}
	if err := d.agent.SetCard(ctx, base); err != nil {
		return err
	}
	d.delegations.SetPushURL(a2aserver.PushPrefix(d.cfg.Delegation.PushURL, base))
	if err := d.registry.Load(ctx); err != nil {
		if ctx.Err() != nil {
			return nil // stopped while starting
		}
		return fmt.Errorf("load the kept agents: %w", err)
	}
	for _, spec := range d.cfg.Agents {
		addCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
		_, err := d.registry.AddOrRetry(addCtx, spec)
		cancel()
		if err != nil {
			d.log.Error("configured agent not registered yet; retrying in the background", "url", spec.URL, "error", err)
		}
	}
	d.registry.Start()
	if d.authn != nil {
		if err := d.authn.Start(ctx); err != nil {
			return fmt.Errorf("start authentication: %w", err)
		}
	}
	if err := d.delegations.Start(ctx); err != nil {
		if ctx.Err() != nil {
			return nil // stopped while starting
		}
		return fmt.Errorf("carry on the running delegations: %w", err)
	}
	watchCtx, stopWatch := context.WithCancel(ctx)
	var watchers sync.WaitGroup
	defer func() { stopWatch(); watchers.Wait() }()
	if len(d.cfg.Policies.Paths) > 0 {
		watchers.Go(func() { d.policies.Watch(watchCtx, time.Duration(d.cfg.Policies.ReloadInterval)) })
	}

	srv := d.cfg.HTTP.server(d.handler, d.log)
	serving = true
	served := d.cfg.HTTP.listener(ln)
	errc := make(chan error, 1)
	if d.cfg.HTTP.TLS != nil {
		srv.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12}
		if d.authn != nil {
			srv.TLSConfig = d.authn.ServerTLS(srv.TLSConfig)
		}
		go func() { errc <- srv.ServeTLS(served, d.cfg.HTTP.TLS.CertFile, d.cfg.HTTP.TLS.KeyFile) }()
	} else {
		go func() { errc <- srv.Serve(served) }()
	}
	grpcErrc := d.agent.ServeGRPC()
	d.log.Info("orchd serving", "addr", ln.Addr().String(), "identity", d.self, "stateDir", d.stateDir, "store", d.state.mode,
		"agents", d.registry.Len(), "pending", len(d.registry.Pending()))
	checkOpenFiles(d.log, d.cfg.Delegation.MaxRunning)

	select {
	case err := <-errc:
		return fmt.Errorf("serve: %w", err)
	case err := <-grpcErrc:
		return fmt.Errorf("serve gRPC: %w", err)
	case <-ctx.Done():
	}
	d.log.Info("orchd shutting down")
	d.stop()
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err = srv.Shutdown(shutdownCtx)
	if serveErr := <-errc; !errors.Is(serveErr, http.ErrServerClosed) && err == nil {
		err = serveErr
	}
	return err
}

// Close stops what New started: the delegations (their downstream tasks
// run on, and the next start carries them on), the registry, the store
// and the telemetry, and releases the state directory's lock, last, so a
// restart never overlaps a closing daemon. Run closes the daemon when it
// returns; Close is for a daemon that is never run, and safe to call
// again.
func (d *Daemon) Close() {
	d.closeOnce.Do(func() {
		d.stop()
		d.delegations.Close()
		d.credentials.CloseIdleConnections()
		d.agent.Close() // after the delegations: its executions end, then its push notifications
		d.registry.Close()
		if d.authn != nil {
			if err := d.authn.Close(); err != nil {
				d.log.Warn("stop authentication", "error", err)
			}
		}
		d.state.close()
		if d.ownTelemetry {
			d.shutdownTelemetry()
		}
	})
}

// shutdownTelemetry flushes the spans and metrics not yet exported.
func (d *Daemon) shutdownTelemetry() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := d.telemetry.Shutdown(ctx); err != nil {
		d.log.Warn("telemetry shutdown", "error", err)
	}
}

// stop ends the daemon's long-lived streams: event followers over the API
// and mirrors of A2A tasks.
func (d *Daemon) stop() {
	d.stopOnce.Do(func() {
		// Writes to a durable task store end first: the executions the
		// stop ends must leave their tasks as they are (closingTasks).
		d.state.tasks.freeze()
		d.stopNow()
	})
}

// warnLoopback says in the log when card fetches or push notifications
// may reach this machine.
func (d *Daemon) warnLoopback() {
	if allowsLoopback(d.cfg.Registry.AllowNetworks) {
		d.log.Warn("card fetches may reach loopback addresses (development default); list only your agents' networks in registry.allowNetworks for production", "allowNetworks", d.cfg.Registry.AllowNetworks)
	}
	if allowsLoopback(d.cfg.Agent.Push.AllowNetworks) {
		d.log.Warn("push notifications may reach loopback addresses (a development setting); list only your callers' webhook networks in agent.push.allowNetworks for production", "allowNetworks", d.cfg.Agent.Push.AllowNetworks)
	}
}

// allowsLoopback reports whether an allowNetworks list holds a loopback
// network or address.
func allowsLoopback(networks []string) bool {
	for _, n := range networks {
		p, err := netip.ParsePrefix(n)
		if err != nil {
			if a, aErr := netip.ParseAddr(n); aErr == nil {
				p = netip.PrefixFrom(a, a.BitLen())
			}
		}
		if p.IsValid() && p.Addr().IsLoopback() {
			return true
		}
	}
	return false
}
