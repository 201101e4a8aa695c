package a2aserver

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"time"

	"code.dny.dev/ssrf"
	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
	"github.com/a2aproject/a2a-go/v2/a2asrv/push"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	metricnoop "go.opentelemetry.io/otel/metric/noop"

	"github.com/orchd/orchd/auth"
	"github.com/orchd/orchd/registry"
	"github.com/orchd/orchd/store"
)

// PushConfig is how orchd delivers A2A push notifications to its callers'
// webhooks (agent.push, docs/push.md). The zero value is usable: every
// field has a default.
type PushConfig struct {
	// AllowNetworks lists the CIDR prefixes (or addresses) webhooks may be
	// in although they are not public (loopback, private and the other
	// special-purpose ranges), as registry.allowNetworks does for card
	// fetches. Empty, the default, allows public addresses only: loopback
	// is an opt-in for development.
	AllowNetworks []string
	// AllowHosts lists webhook host names that may resolve anywhere, as
	// registry.allowHosts does for card fetches.
	AllowHosts []string
	// MaxConfigsPerTask bounds the push configs of one task; default 10.
	MaxConfigsPerTask int
	// MaxURLBytes bounds a webhook URL; default 2048.
	MaxURLBytes int
	// MaxTokenBytes bounds a config's token and its credentials, each;
	// default 4096.
	MaxTokenBytes int
	// Timeout bounds one delivery attempt, connection and response
	// headers included; default 10s.
	Timeout time.Duration
	// MaxAttempts is how many times one notification is tried before it
	// is given up; default 8.
	MaxAttempts int
	// Backoff is the wait before the first retry, doubled for each next
	// one up to MaxBackoff, with jitter; default 500ms.
	Backoff time.Duration
	// MaxBackoff caps the wait between attempts; default 30s.
	MaxBackoff time.Duration
	// QueueSize bounds the notifications waiting for delivery in all;
	// beyond it new ones are given up. Default 10000.
	QueueSize int
	// QueueBytes bounds the bytes of the notifications waiting; default
	// 64 MiB.
	QueueBytes int64
	// QueuePerConfig bounds the notifications waiting for one webhook
	// config, so one dead webhook cannot fill the queue; default 100.
	QueuePerConfig int
	// QueuePerTenant bounds the notifications waiting for one tenant's
	// webhooks, so one tenant's cannot fill the queue; default 1000.
	QueuePerTenant int
	// QueueBytesPerTenant bounds their bytes; default 16 MiB.
	QueueBytesPerTenant int64
	// Concurrency bounds the deliveries in flight at once; default 64.
	Concurrency int
	// ConcurrencyPerTenant bounds the deliveries in flight to one
	// tenant's webhooks, so webhooks that hang hold no more; default 8.
	ConcurrencyPerTenant int
	// ConcurrencyPerHost bounds the deliveries in flight to one webhook
	// host (host and port); default 4.
	ConcurrencyPerHost int
}

// withDefaults returns c with its zero fields set.
func (c PushConfig) withDefaults() PushConfig {
	setInt := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	setDur := func(v *time.Duration, d time.Duration) {
		if *v <= 0 {
			*v = d
		}
	}
	setInt(&c.MaxConfigsPerTask, store.DefaultMaxPushConfigsPerTask)
	setInt(&c.MaxURLBytes, store.DefaultMaxPushURLBytes)
	setInt(&c.MaxTokenBytes, store.DefaultMaxPushTokenBytes)
	setDur(&c.Timeout, 10*time.Second)
	setInt(&c.MaxAttempts, 8)
	setDur(&c.Backoff, 500*time.Millisecond)
	setDur(&c.MaxBackoff, 30*time.Second)
	setInt(&c.QueueSize, 10_000)
	if c.QueueBytes <= 0 {
		c.QueueBytes = 64 << 20
	}
	setInt(&c.QueuePerConfig, 100)
	setInt(&c.QueuePerTenant, 1000)
	if c.QueueBytesPerTenant <= 0 {
		c.QueueBytesPerTenant = 16 << 20
	}
	setInt(&c.Concurrency, 64)
	setInt(&c.ConcurrencyPerTenant, 8)
	setInt(&c.ConcurrencyPerHost, 4)
	return c
}

// StoreConfig is the part of c, its defaults set, the push config store
// enforces: the store the server is given must enforce it.
func (c PushConfig) StoreConfig() store.PushConfigsConfig {
	c = c.withDefaults()
	return store.PushConfigsConfig{MaxPerTask: c.MaxConfigsPerTask, MaxURLBytes: c.MaxURLBytes, MaxTokenBytes: c.MaxTokenBytes}
}

// Limits PushOut keeps whatever the configuration says.
const (
	// pushCheckTimeout bounds resolving a webhook's host when a config
	// is saved.
	pushCheckTimeout = 2 * time.Second
	// pushResponseBytes is how much of a webhook's answer is read (and
	// dropped) so its connection can be reused.
	pushResponseBytes = 4 << 10
	// pushIDHeader carries a notification's id, the same on every
	// attempt, so a receiver can drop the duplicates at-least-once
	// delivery brings.
	pushIDHeader = "Orchd-Notification-Id"
	// pushTokenHeader carries the config's token (A2A 1.0).
	pushTokenHeader = "A2A-Notification-Token"
)

// PushConfigStore is the push config store PushOut serves and reads:
// *store.PushConfigs.
type PushConfigStore interface {
	push.ConfigStore
	ForDelivery(ctx context.Context, taskID a2a.TaskID, configID string) (*a2a.PushConfig, error)
}

// PushOut delivers A2A push notifications to callers' webhooks: it is the
// push.Sender of orchd's A2A handler, and gives it the config store too,
// with webhook URLs checked against the SSRF rule when a config is saved
// (checkedPushConfigs.Save).
//
// SendPush never waits on a webhook: it queues the notification and
// returns nil, so a delegation goes on whatever its webhooks do. Each
// config has its own lane, delivered in order by one goroutine at a time;
// a notification is tried up to MaxAttempts times with exponential
// backoff, and the config (with its secrets) is read afresh for every
// attempt, so a deleted config gets nothing more. Tenants are kept apart:
// each has its own share of the queue, and attempts take their turn for
// slots per tenant and per host (pushSlots), so one tenant's dead
// webhooks delay nobody else's notifications. Every notification given
// up (queue full, attempts spent, refused, orchd stopping) is logged and
// counted in orchd.push.notifications{outcome=given_up}.
//
// The lanes' goroutines belong to PushOut: Close stops the retries and
// waits for them.
type PushOut struct {
	cfg     PushConfig
	configs PushConfigStore
	client  *http.Client
	check   *pushURLCheck
	log     *slog.Logger
	gaveUp  *pushGiveUpLog
	inst    pushInstruments

	ctx    context.Context
	cancel context.CancelFunc
	// draining is closed when Close begins: each notification still
	// queued is tried once more, without waiting out a backoff, for up to
	// drain (pushDrain).
	draining chan struct{}
	drain    time.Duration
	slots    *pushSlots
	wg       sync.WaitGroup

	// mu guards the fields below.
	mu      sync.Mutex
	lanes   map[pushLaneKey]*pushLane
	tenants map[string]*pushTenantQueue
	pending int
	bytes   int64
	closed  bool
}

// pushTenantQueue is what one tenant has waiting.
type pushTenantQueue struct {
	pending int
	bytes   int64
}

var _ push.Sender = (*PushOut)(nil)

// pushLaneKey names one config of one task.
type pushLaneKey struct {
	task   a2a.TaskID
	config string
}

// pushLane is the notifications waiting for one config, oldest first.
type pushLane struct {
	key   pushLaneKey
	queue []*notification
}

// notification is one event to deliver to one config.
type notification struct {
	id     string
	key    pushLaneKey
	tenant string // whose share it takes (pushTenant)
	host   string // the webhook's host, for logs and slots
	body   []byte
}

// NewPushOut builds the sender over configs, which must enforce
// cfg.StoreConfig. rcfg is the registry's configuration, whose transport
// settings (such as its roots) deliveries share; its SSRF rule does not
// apply: webhooks have their own, cfg.AllowNetworks and cfg.AllowHosts.
// It logs to log as component push. The server New is given it closes it.
func NewPushOut(cfg PushConfig, rcfg registry.Config, configs PushConfigStore, mp metric.MeterProvider, log *slog.Logger) (*PushOut, error) {
	cfg = cfg.withDefaults()
	rcfg.AllowNetworks, rcfg.AllowHosts = cfg.AllowNetworks, cfg.AllowHosts
	rcfg.Timeout = cfg.Timeout
	transport, err := registry.NewTransport(rcfg)
	if err != nil {
		return nil, fmt.Errorf("config: agent.push: %w", err)
	}
	transport.ResponseHeaderTimeout = cfg.Timeout
	check, err := newPushURLCheck(rcfg.AllowNetworks, rcfg.AllowHosts)
	if err != nil {
		return nil, fmt.Errorf("config: agent.push: %w", err)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	log = log.With("component", "push")
	ctx, cancel := context.WithCancel(context.Background())
	return &PushOut{
		cfg: cfg, configs: configs, check: check, log: log, gaveUp: newPushGiveUpLog(log), inst: newPushInstruments(mp),
		client: &http.Client{
			Transport: transport,
			Timeout:   cfg.Timeout,
			// A redirect would carry the token and credentials elsewhere:
			// none is followed, and a 3xx is a failed delivery.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
		ctx: ctx, cancel: cancel, draining: make(chan struct{}), drain: pushDrain,
		slots: newPushSlots(cfg.Concurrency, cfg.ConcurrencyPerTenant, cfg.ConcurrencyPerHost),
		lanes: map[pushLaneKey]*pushLane{}, tenants: map[string]*pushTenantQueue{},
	}, nil
}

// handlerOption is the a2a-go handler option that turns push on; with a
// nil PushOut, push stays off.
func (o *PushOut) handlerOption() a2asrv.RequestHandlerOption {
	if o == nil {
		return a2asrv.WithPushNotifications(nil, nil)
	}
	return a2asrv.WithPushNotifications(checkedPushConfigs{PushConfigStore: o.configs, out: o}, o)
}

// SendPush implements push.Sender: it queues event for config and returns
// nil at once; a notification that cannot be queued is given up.
func (o *PushOut) SendPush(ctx context.Context, config *a2a.PushConfig, event a2a.Event) error {
	if config == nil || event == nil {
		return nil
	}
	key := pushLaneKey{task: config.TaskID, config: config.ID}
	if key.task == "" {
		key.task = event.TaskInfo().TaskID
	}
	n := &notification{id: rand.Text(), key: key, tenant: pushTenant(ctx), host: hostOf(config.URL)}
	body, err := json.Marshal(a2a.StreamResponse{Event: event})
	if err != nil {
		o.giveUp(n, 0, fmt.Sprintf("encode the event: %v", err))
		return nil
	}
	n.body = body
	size := int64(len(body))
	o.mu.Lock()
	lane := o.lanes[key]
	tq := o.tenants[n.tenant]
	if tq == nil {
		tq = &pushTenantQueue{}
	}
	reason := ""
	switch {
	case o.closed:
		reason = "orchd is stopping"
	case o.pending >= o.cfg.QueueSize:
		reason = fmt.Sprintf("the queue holds %d notifications, the most it may (agent.push.queueSize)", o.pending)
	case o.bytes+size > o.cfg.QueueBytes:
		reason = fmt.Sprintf("the queue would hold over %d bytes (agent.push.queueBytes)", o.cfg.QueueBytes)
	case tq.pending >= o.cfg.QueuePerTenant:
		reason = fmt.Sprintf("%d notifications wait for this tenant's webhooks already (agent.push.queuePerTenant)", tq.pending)
	case tq.bytes+size > o.cfg.QueueBytesPerTenant:
		reason = fmt.Sprintf("this tenant's notifications waiting would be over %d bytes (agent.push.queueBytesPerTenant)", o.cfg.QueueBytesPerTenant)
	case lane != nil && len(lane.queue) >= o.cfg.QueuePerConfig:
		reason = fmt.Sprintf("%d notifications wait for this webhook already (agent.push.queuePerConfig)", len(lane.queue))
	}
	if reason != "" {
		o.mu.Unlock()
		o.giveUp(n, 0, reason)
		return nil
	}
	o.pending++
	o.bytes += size
	tq.pending++
	tq.bytes += size
	o.tenants[n.tenant] = tq
	start := lane == nil
	if start {
		lane = &pushLane{key: key}
		o.lanes[key] = lane
	}
	lane.queue = append(lane.queue, n)
	if start {
		o.wg.Add(1)
	}
	o.mu.Unlock()
	o.inst.pending.Add(context.Background(), 1)
	if start {
		go o.runLane(lane)
	}
	return nil
}

// runLane delivers lane's notifications in order until none is left, or
// gives them up once orchd stops.
func (o *PushOut) runLane(lane *pushLane) {
	defer o.wg.Done()
	for {
		o.mu.Lock()
		if len(lane.queue) == 0 {
			delete(o.lanes, lane.key)
			o.mu.Unlock()
			return
		}
		n := lane.queue[0]
		o.mu.Unlock()

		o.deliver(n)

		o.mu.Lock()
		lane.queue = lane.queue[1:]
		o.pending--
		o.bytes -= int64(len(n.body))
		if tq := o.tenants[n.tenant]; tq != nil {
			if tq.pending--; tq.pending == 0 {
				delete(o.tenants, n.tenant)
			} else {
				tq.bytes -= int64(len(n.body))
			}
		}
		o.mu.Unlock()
		o.inst.pending.Add(context.Background(), -1)
	}
}

// deliver tries n until it is delivered, refused for good, out of
// attempts, or orchd stops; all but the first are logged and counted.
func (o *PushOut) deliver(n *notification) {
	wait := o.cfg.Backoff
	for attempt := 1; ; attempt++ {
		if o.ctx.Err() != nil {
			o.giveUp(n, attempt-1, "orchd is stopping")
			return
		}
		// An attempt that started before Close began and failed gets the
		// one last try draining gives every notification.
		last := o.isDraining()
		outcome, err := o.attempt(n)
		switch outcome {
		case pushDelivered:
			o.inst.notifications.Add(context.Background(), 1, pushOutcome("delivered"))
			return
		case pushDeleted:
			o.inst.notifications.Add(context.Background(), 1, pushOutcome("deleted"))
			o.log.Debug("push notification dropped: its config was deleted", "task", n.key.task, "config", n.key.config)
			return
		case pushRefused:
			o.giveUp(n, attempt, err.Error())
			return
		}
		if attempt >= o.cfg.MaxAttempts || last {
			o.giveUp(n, attempt, err.Error())
			return
		}
		o.inst.retries.Add(context.Background(), 1)
		o.log.Debug("push notification failed; retrying", "task", n.key.task, "config", n.key.config, "host", n.host,
			"attempt", attempt, "retryIn", wait, "error", err.Error())
		timer := time.NewTimer(jitter(wait))
		select {
		case <-timer.C:
		case <-o.draining: // one last try now
			timer.Stop()
		case <-o.ctx.Done():
			timer.Stop()
		}
		wait = min(wait*2, o.cfg.MaxBackoff)
	}
}

// pushResult is what one delivery attempt came to.
type pushResult int

const (
	pushRetry pushResult = iota
	pushDelivered
	pushDeleted
	pushRefused
)

// attempt makes one delivery of n. Its error says why it failed, with the
// webhook's host but never its URL, token or credentials.
func (o *PushOut) attempt(n *notification) (pushResult, error) {
	if o.slots.acquire(o.ctx, n.tenant, n.host) != nil {
		return pushRetry, errors.New("orchd is stopping")
	}
	defer o.slots.release(n.tenant, n.host)
	ctx, cancel := context.WithTimeout(o.ctx, o.cfg.Timeout)
	defer cancel()
	cfg, err := o.configs.ForDelivery(ctx, n.key.task, n.key.config)
	if errors.Is(err, push.ErrPushConfigNotFound) {
		return pushDeleted, nil
	}
	if err != nil {
		return pushRetry, fmt.Errorf("read the push config: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, cfg.URL, bytes.NewReader(n.body))
	if err != nil {
		return pushRefused, errors.New("the webhook URL makes no request")
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "orchd")
	req.Header.Set(pushIDHeader, n.id)
	if cfg.Token != "" {
		req.Header.Set(pushTokenHeader, cfg.Token)
	}
	if a := cfg.Auth; a != nil && a.Scheme != "" && a.Credentials != "" {
		req.Header.Set("Authorization", a.Scheme+" "+a.Credentials)
	}
	resp, err := o.client.Do(req)
	o.inst.attempts.Add(context.Background(), 1, pushAttempt(resp, err))
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // the url.Error names the whole URL
		}
		if errors.Is(err, registry.ErrBlockedAddress) {
			return pushRefused, fmt.Errorf("post to %s: %w", n.host, err)
		}
		return pushRetry, fmt.Errorf("post to %s: %w", n.host, err)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, pushResponseBytes))
	_ = resp.Body.Close()
	switch code := resp.StatusCode; {
	case code >= 200 && code < 300:
		return pushDelivered, nil
	case code == http.StatusRequestTimeout, code == http.StatusTooEarly, code == http.StatusTooManyRequests, code >= 500:
		return pushRetry, fmt.Errorf("%s answered %d", n.host, code)
	default:
		return pushRefused, fmt.Errorf("%s answered %d, which no retry changes", n.host, code)
	}
}

// pushTenant names whose share of the push queue and slots a
// notification takes: the tenant of the caller whose task it is, else the
// caller's principal, else "" (a daemon without authentication). a2a-go
// sends a task's events with the context of the call that runs it, which
// carries the caller.
func pushTenant(ctx context.Context) string {
	p, ok := auth.PrincipalFrom(ctx)
	switch {
	case !ok:
		return ""
	case p.Tenant != "":
		return "tenant " + p.Tenant
	default:
		return "principal " + p.ID
	}
}

// giveUp logs (pushGiveUpLog) and counts a notification that will not be
// delivered.
func (o *PushOut) giveUp(n *notification, attempts int, reason string) {
	o.gaveUp.giveUp(n.host, "task", n.key.task, "config", n.key.config, "attempts", attempts, "reason", reason)
	o.inst.notifications.Add(context.Background(), 1, pushOutcome("given_up"))
}

// pushDrain bounds how long Close tries the notifications still queued,
// such as the final states of the tasks a stopping orchd fails.
const pushDrain = 2 * time.Second

// Close tries each notification still queued once more, for up to
// o.drain and with no backoff, then stops the rest, gives up what still
// waits, and returns once every lane's goroutine has ended and the
// given-up log has written its summary. SendPush gives up what comes
// after. It is safe to call again, and on nil.
func (o *PushOut) Close() {
	if o == nil {
		return
	}
	o.mu.Lock()
	already := o.closed
	o.closed = true
	o.mu.Unlock()
	if !already {
		close(o.draining)
	}
	drained := make(chan struct{})
	go func() { o.wg.Wait(); close(drained) }()
	timer := time.NewTimer(o.drain)
	select {
	case <-drained:
	case <-timer.C:
	}
	timer.Stop()
	o.cancel()
	<-drained
	o.gaveUp.close()
	o.client.CloseIdleConnections()
}

// isDraining reports whether Close has begun.
func (o *PushOut) isDraining() bool {
	select {
	case <-o.draining:
		return true
	default:
		return false
	}
}

// jitter is d less up to a fifth, so retries of many notifications spread.
func jitter(d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	var b [2]byte
	_, _ = rand.Read(b[:])
	return d - d/5*time.Duration(int(b[0])<<8|int(b[1]))/65536
}

// hostOf is the host of a webhook URL, the part logs show: the path and
// query may carry secrets.
func hostOf(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return "(unparsable URL)"
	}
	return u.Host
}

// checkedPushConfigs is the config store as a2a-go's handler uses it: a
// new config's webhook must pass the SSRF rule, and a failed read when a
// notification is about to go out skips that notification (logged and
// counted) instead of failing the task.
type checkedPushConfigs struct {
	PushConfigStore
	out *PushOut
}

// Save implements push.ConfigStore: it refuses a webhook whose host is or
// resolves to an address the SSRF rule does not allow, then saves.
//
// A config refused for any reason is redacted in place (redactRefused)
// before the error returns: a2a-go formats the config a message carries
// into its error with %v (a2asrv/agentexec.go, CreateExecutor), and that
// error is both the caller's answer and a line of orchd's ERROR log. The
// config is the request's own, dropped with the refusal.
func (s checkedPushConfigs) Save(ctx context.Context, taskID a2a.TaskID, config *a2a.PushConfig) (*a2a.PushConfig, error) {
	if config == nil {
		return s.PushConfigStore.Save(ctx, taskID, config)
	}
	err := s.out.check.url(ctx, config.URL)
	if err != nil {
		err = fmt.Errorf("save push config for task %q: %w", taskID, err)
	}
	var saved *a2a.PushConfig
	if err == nil {
		saved, err = s.PushConfigStore.Save(ctx, taskID, config)
	}
	if err != nil {
		redactRefused(config)
		return nil, err
	}
	return saved, nil
}

// redactRefused strips a refused config of what may be secret: its token,
// its credentials, and its URL but for the scheme and host (a path, a
// query or user information may carry a secret).
func redactRefused(c *a2a.PushConfig) {
	c.Token = ""
	if c.Auth != nil {
		c.Auth = &a2a.PushAuthInfo{Scheme: c.Auth.Scheme}
	}
	if u, err := url.Parse(c.URL); err == nil && u.Host != "" {
		c.URL = u.Scheme + "://" + u.Host
	} else {
		c.URL = "(unparsable URL)"
	}
}

// List implements push.ConfigStore. a2a-go's handler calls it for
// ListTaskPushConfigs, where an error is the caller's answer, and before
// sending each event's notifications, where an error would fail the task:
// there it is logged and counted, and no notification goes out.
func (s checkedPushConfigs) List(ctx context.Context, taskID a2a.TaskID) ([]*a2a.PushConfig, error) {
	list, err := s.PushConfigStore.List(ctx, taskID)
	if err == nil {
		return list, nil
	}
	if cc, ok := a2asrv.CallContextFrom(ctx); ok && cc.Method() == "ListTaskPushConfigs" {
		return nil, err
	}
	s.out.gaveUp.giveUp("(push configs unread)", "task", taskID, "reason", "the push configs cannot be read: "+err.Error())
	s.out.inst.notifications.Add(context.Background(), 1, pushOutcome("given_up"))
	return []*a2a.PushConfig{}, nil
}

// pushURLCheck is the SSRF rule applied to a webhook URL when a config
// is saved: the allow-lists of the delivery transport, judged on the
// addresses the host names now. Deliveries are checked again on every
// connection, where the full guard (including IPv4 carried in IPv6)
// decides.
type pushURLCheck struct {
	guard *ssrf.Guardian
	hosts map[string]bool
}

func newPushURLCheck(nets, hosts []string) (*pushURLCheck, error) {
	v4, v6, err := registry.ParseNetworks(nets)
	if err != nil {
		return nil, err
	}
	c := &pushURLCheck{
		guard: ssrf.New(ssrf.WithAnyNetwork(), ssrf.WithAnyPort(), ssrf.WithAllowedV4Prefixes(v4...), ssrf.WithAllowedV6Prefixes(v6...)),
		hosts: map[string]bool{},
	}
	for _, h := range hosts {
		c.hosts[strings.ToLower(strings.TrimSpace(h))] = true
	}
	return c, nil
}

// url refuses raw when its host is, or resolves to, an address outside the
// allowed networks. A URL that does not parse, or a host that does not
// resolve now, is left to the store's checks and to delivery. Its error
// wraps a2a.ErrInvalidParams and names the host and address only.
func (c *pushURLCheck) url(ctx context.Context, raw string) error {
	u, err := url.Parse(raw)
	if err != nil || u.Hostname() == "" {
		return nil //nolint:nilerr // a URL that does not parse is the store's to refuse, as the doc says
	}
	host := strings.ToLower(u.Hostname())
	if c.hosts[host] {
		return nil
	}
	var addrs []netip.Addr
	if ip, err := netip.ParseAddr(host); err == nil {
		addrs = []netip.Addr{ip}
	} else {
		rctx, cancel := context.WithTimeout(ctx, pushCheckTimeout)
		addrs, err = net.DefaultResolver.LookupNetIP(rctx, "ip", host)
		cancel()
		if err != nil {
			return nil //nolint:nilerr // a host that does not resolve now is left to delivery, as the doc says
		}
	}
	for _, ip := range addrs {
		ip = ip.Unmap().WithZone("")
		if c.guard.SafeAddr(ip) == nil {
			continue
		}
		what := "is not a public address"
		if ip.String() != strings.Trim(host, "[]") {
			what = "resolves to " + ip.String() + ", which is not a public address"
		}
		return fmt.Errorf("webhook host %s %s; list its network in agent.push.allowNetworks to allow it: %w", host, what, a2a.ErrInvalidParams)
	}
	return nil
}

// pushInstruments are PushOut's metrics.
type pushInstruments struct {
	notifications metric.Int64Counter
	attempts      metric.Int64Counter
	retries       metric.Int64Counter
	pending       metric.Int64UpDownCounter
}

func newPushInstruments(mp metric.MeterProvider) pushInstruments {
	if mp == nil {
		mp = metricnoop.NewMeterProvider()
	}
	m := mp.Meter(instrumentationScope)
	// Constructors fail only for invalid names; on error they still
	// return usable no-ops.
	notifications, _ := m.Int64Counter("orchd.push.notifications",
		metric.WithDescription("Push notifications to callers' webhooks by outcome: delivered, deleted (its config was deleted first), given_up."))
	attempts, _ := m.Int64Counter("orchd.push.attempts",
		metric.WithDescription("Push notification delivery attempts by result: an HTTP status class (2xx, 4xx, 5xx, …) or error."))
	retries, _ := m.Int64Counter("orchd.push.retries",
		metric.WithDescription("Push notification attempts that failed and are retried after a backoff."))
	pending, _ := m.Int64UpDownCounter("orchd.push.pending",
		metric.WithDescription("Push notifications queued and not yet delivered or given up."))
	return pushInstruments{notifications: notifications, attempts: attempts, retries: retries, pending: pending}
}

func pushOutcome(o string) metric.AddOption {
	return metric.WithAttributes(attribute.String("outcome", o))
}

func pushAttempt(resp *http.Response, err error) metric.AddOption {
	result := "error"
	if err == nil {
		result = fmt.Sprintf("%dxx", resp.StatusCode/100)
	}
	return metric.WithAttributes(attribute.String("result", result))
}
