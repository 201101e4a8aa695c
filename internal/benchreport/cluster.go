package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// clusterConfig sizes the cluster run.
type clusterConfig struct {
	perReplica int // long delegations started through each replica
	followed   int // of each replica's, followed by server-sent events on a survivor the whole time
	callers    int // concurrent callers starting them, over the three replicas
	// The agent works work on each delegation, silent for the first
	// silent (the quiet window falls there) and then ticking every tick.
	work, silent, tick time.Duration
	quiet              time.Duration // the window measured with nothing happening, at most
	leaseTTL           time.Duration // the replicas' store.leaseTTL; 0 for the default
}

// fullCluster is the cluster run of the report: 3,000 delegations held by
// each of three replicas. The agent stays silent a minute, so the 9,000
// starts end before it ticks however slow they are on a busy 2-core
// machine, and works long enough to outlive the failover by a minute. It
// ticks every 15 s, as in the scale run: ticking every 5 s, the agent's
// 1,800 events a second took it more CPU than the machine had left once
// three NATS servers and the replicas had theirs (the machine was at 190%
// of its 200% before the kill, and 8,420 of the agent's task updates
// waited on its task store's lock), so the failover measured the agent.
var fullCluster = clusterConfig{perReplica: 3_000, followed: 100, callers: 64,
	work: 130 * time.Second, silent: 60 * time.Second, tick: 15 * time.Second, quiet: 10 * time.Second}

// defaultLeaseTTL is orchd's default store.leaseTTL, which the full run
// keeps.
const defaultLeaseTTL = 10 * time.Second

// clusterReplicas is how many NATS servers and orchd replicas the cluster
// run starts; the first replica is the one killed.
const clusterReplicas = 3

// clusterBench names the cluster run's results.
const clusterBench = "BenchmarkProcessCluster"

// runCluster is the report's cluster run.
func runCluster(ctx context.Context, w io.Writer, log *slog.Logger) error {
	return clusterRun(ctx, w, log, fullCluster)
}

// clusterRun measures three orchd replicas (`orchd serve`, each with its
// own state directory) sharing a JetStream cluster of three real
// nats-server processes (store.replicas 3), each holding cfg.perReplica
// long delegations to the long agent in its own process
// (longHandlers), then one replica killed with kill -9, then the NATS
// server leading the leases' stream killed with kill -9
// (crashLeasesLeader). It writes:
//
//	BenchmarkProcessCluster/config   1 <n> delegations-per-replica <n> replicas <n> followed-per-replica <ms> work-ms <ms> silent-ms <ms> tick-ms <ms> lease-ttl-ms
//	BenchmarkProcessCluster/quiet    1 <n> delegations-per-replica <ms> window-ms <ms> orchd-cpu-ms-per-s <ms> orchd-cpu-ms-per-s-max <n> nats-msgs-per-s <ms> nats-cpu-ms-per-s
//	BenchmarkProcessCluster/failover 1 <n> delegations-per-replica <n> killed <ms> failover-ms <ms> first-follow-ms <ms> follow-p50-ms <ms> lease-ttl-ms <n> followed <ms> next-event-p50-ms <ms> next-event-max-ms <n> completed <n> lost <n> lost-of-killed
//	                                   <n> log-gaps <n> log-duplicates <n> followers <n> followers-failed <n> follower-gaps <n> follower-duplicates <ms> start-wall-ms <n> start-errors <n> warn-lines <n> error-lines
//	BenchmarkProcessCluster/natscrash 1 <n> running <ms> led-again-ms <n> retaken <ms> watched-ms <n> warn-lines <n> error-lines <n> followers-resumed
//
// The quiet window falls after every delegation started and before the
// agent sends its first tick, so what the replicas do then is keeping
// their running work followed: orchd-cpu-ms-per-s is a replica's CPU
// time per second of it (the mean of the three, and the most of one),
// from /proc; nats-msgs-per-s the messages the three servers received and
// sent (/varz in_msgs + out_msgs: clients and routes, so JetStream's
// replication too) per second, over the three replicas; nats-cpu-ms-per-s
// the servers' CPU per second, together.
//
// The failover: before the kill, the agent's task of each of the
// killed replica's delegations is read (GET /v1/delegations/{id}); after
// it, the agent is asked every failoverPoll which tasks were subscribed
// to since the kill (SubscribeToTask, which a replica taking a streamed
// delegation over sends first; subscriptions): a delegation is followed
// again from the moment its new holder asked the agent for its task's
// stream. failover-ms is the time from the kill until the last of them
// was, first-follow-ms the first, follow-p50-ms the median; followed how
// many were. next-event-p50-ms and next-event-max-ms are, over the
// killed replica's delegations, how long after the kill the first event
// past it was stored in its log (its "at", read with the logs at the
// end): only the new holder writes the log, so this is when the work's
// log went on again, which also waits for the agent's next tick when
// none came between the kill and the takeover. Every delegation of every
// replica
// is then read to its end on a survivor (after the NATS crash, so across
// it too), and completed when its log ends
// COMPLETED after the agent's artifact with every tick the agent says it
// sent, once and in order (eventLog.check); lost otherwise (lost-of-killed:
// those the killed replica held). The followers follow the first
// followed-per-replica delegations of each replica on a survivor from
// their start to their end, across the kill; followers-failed did not
// see the end within the work and scaleCallTimeout more. The failover's
// warn-lines and error-lines are what the replicas logged up to the NATS
// crash; the crash's, what the survivors logged from it to the end, and
// followers-resumed how many times a follower's stream ended before its
// delegation did and was opened again (Last-Event-ID).
func clusterRun(ctx context.Context, w io.Writer, log *slog.Logger, cfg clusterConfig) error {
	ttl := cfg.leaseTTL
	if ttl == 0 {
		ttl = defaultLeaseTTL
	}
	h, err := newHarness(ctx, log)
	if err != nil {
		return err
	}
	defer h.close()
	servers, urls, err := h.natsCluster(ctx)
	if err != nil {
		return err
	}
	_, longURLs, err := h.role(ctx, "long", cfg.work.String(), cfg.tick.String(), cfg.silent.String())
	if err != nil {
		return err
	}
	extra := fmt.Sprintf("store:\n  url: %s\n  replicas: %d\n", strings.Join(urls.client, ","), clusterReplicas)
	if cfg.leaseTTL > 0 {
		extra += fmt.Sprintf("  leaseTTL: %s\n", cfg.leaseTTL)
	}
	replicas := make([]*proc, clusterReplicas)
	apis := make([]*scaleAPI, clusterReplicas)
	for i := range replicas {
		spec := orchdSpec{name: "replica-" + strconv.Itoa(i), skills: []string{kindLong},
			agents: [][2]string{{kindLong, longURLs[0]}}, extra: extra}
		p, base, err := h.daemon(ctx, spec)
		if err != nil {
			return err
		}
		replicas[i], apis[i] = p, newScaleAPI(base)
		defer apis[i].hc.CloseIdleConnections()
	}
	fmt.Fprintf(w, "%s/config\t1\t%d delegations-per-replica\t%d replicas\t%d followed-per-replica\t%.0f work-ms\t%.0f silent-ms\t%.0f tick-ms\t%.0f lease-ttl-ms\n",
		clusterBench, cfg.perReplica, clusterReplicas, cfg.followed, ms(cfg.work), ms(cfg.silent), ms(cfg.tick), ms(ttl))

	// Start every delegation, cfg.perReplica through each replica.
	total := cfg.perReplica * clusterReplicas
	ids := make([]string, total) // delegation i was started on replica i % clusterReplicas
	survivor := func(i int) *scaleAPI { return apis[1+i%(clusterReplicas-1)] }
	followers := make([]*follower, total)
	followErrs := make([]error, total)
	var following sync.WaitGroup
	first := time.Now()
	start := startAll(ctx, scaleConfig{delegations: total, callers: cfg.callers}, func(ctx context.Context, i int) error {
		id, err := apis[i%clusterReplicas].delegate(ctx)
		if err != nil {
			return err
		}
		ids[i] = id
		if i/clusterReplicas < cfg.followed {
			f := newFollower(id, false)
			f.within = cfg.work + scaleCallTimeout // from before the work starts to well after it ends
			followers[i] = f
			following.Go(func() { followErrs[i] = f.run(ctx, survivor(i)) })
		}
		return nil
	})
	log.Info("cluster run: delegations started", "started", len(start.lat), "errors", start.errs, "took", start.wall.Round(time.Millisecond))
	if start.errs > 0 {
		log.Warn("cluster run: starts failed", "errors", start.errs, "first", start.first)
	}

	// The quiet window: every delegation running, no tick sent yet.
	if err := sleepCtx(ctx, time.Second); err != nil {
		return err
	}
	window := min(cfg.quiet, time.Until(first.Add(cfg.silent))-time.Second)
	if window < time.Second {
		return fmt.Errorf("the starts took %s: no quiet window is left before the agent's first tick at %s; start fewer or stay silent longer",
			start.wall.Round(time.Millisecond), cfg.silent)
	}
	q0, err := clusterSnapshot(ctx, replicas, servers, urls.monitor)
	if err != nil {
		return err
	}
	if err := sleepCtx(ctx, window); err != nil {
		return err
	}
	q1, err := clusterSnapshot(ctx, replicas, servers, urls.monitor)
	if err != nil {
		return err
	}
	secs := q1.at.Sub(q0.at).Seconds()
	var cpuSum, cpuMax float64
	for i := range replicas {
		c := ms(q1.orchdCPU[i]-q0.orchdCPU[i]) / secs
		cpuSum += c
		cpuMax = max(cpuMax, c)
	}
	fmt.Fprintf(w, "%s/quiet\t1\t%d delegations-per-replica\t%.0f window-ms\t%.2f orchd-cpu-ms-per-s\t%.2f orchd-cpu-ms-per-s-max\t%.1f nats-msgs-per-s\t%.2f nats-cpu-ms-per-s\n",
		clusterBench, cfg.perReplica, ms(q1.at.Sub(q0.at)), cpuSum/clusterReplicas, cpuMax,
		float64(q1.natsMsgs-q0.natsMsgs)/secs/clusterReplicas, ms(q1.natsCPU-q0.natsCPU)/secs)

	// The agent's task of each delegation the first replica holds, read
	// before the kill so the failover is measured without those reads.
	var orphans []string
	for i := 0; i < total; i += clusterReplicas {
		if ids[i] != "" {
			orphans = append(orphans, ids[i])
		}
	}
	tasks, err := taskIDs(ctx, apis[0], orphans, cfg.callers)
	if err != nil {
		return fmt.Errorf("read the agent's tasks of the first replica's delegations: %w", err)
	}

	// Kill the first replica once every delegation's agent ticks.
	killAt := first.Add(start.wall + cfg.silent + time.Second)
	if finish := first.Add(cfg.work); killAt.Add(2*(ttl+5*time.Second) + crashSettle).After(finish) {
		return fmt.Errorf("the work (%s) ends before the failover and the NATS crash are over (the kill at %s, leaseTTL %s): work longer",
			cfg.work, killAt.Sub(first).Round(time.Millisecond), ttl)
	}
	if err := sleepCtx(ctx, time.Until(killAt)); err != nil {
		return err
	}
	replicas[0].kill()
	killed := time.Now()
	w0, e0, _ := replicas[0].logCounts()
	follow := watchFailover(ctx, longURLs[0], tasks, killed, 2*time.Minute)
	if follow.err != nil {
		return follow.err
	}
	log.Info("cluster run: the killed replica's delegations are followed", "delegations", follow.followed, "of", len(orphans),
		"last after", follow.last.Round(time.Millisecond))
	// The survivors' lines so far are the failover's; those from here on,
	// the NATS crash's.
	warns, errs := w0, e0
	for _, p := range replicas[1:] {
		wn, en, lines := p.logCounts()
		warns, errs = warns+wn, errs+en
		for _, l := range lines {
			log.Warn("orchd logged", "replica", p.name, "line", l)
		}
		p.resetCounts()
	}
	crash, err := crashLeasesLeader(ctx, servers, urls.client, ttl)
	if err != nil {
		return err
	}
	for _, id := range ids {
		if id != "" {
			crash.running++
		}
	}
	log.Info("cluster run: the NATS node leading the leases crashed", "node", crash.node,
		"led again after", crash.led.Round(time.Millisecond))

	// Every delegation's log, read to its end on a survivor.
	following.Wait()
	logs := readLogs(ctx, ids, cfg.callers, survivor, killed)
	if err := crash.retakenSince(ctx, longURLs[0]); err != nil {
		return err
	}
	lostKilled := 0
	for _, i := range logs.lostAt {
		if i%clusterReplicas == 0 {
			lostKilled++
		}
	}
	var next []time.Duration // of the killed replica's delegations
	for i, d := range logs.next {
		if i%clusterReplicas == 0 {
			next = append(next, d)
		}
	}
	slices.Sort(next)
	if logs.first != nil {
		log.Warn("cluster run: delegations lost", "lost", logs.lost, "first", logs.first)
	}
	nf, ffailed, fgaps, fdups := 0, 0, 0, 0
	for i, f := range followers {
		if f == nil {
			continue
		}
		nf++
		fgaps += f.gaps
		fdups += f.dups
		if followErrs[i] != nil {
			ffailed++
			log.Warn("cluster run: a follower failed", "error", followErrs[i])
		}
	}
	resumed := 0
	for _, f := range followers {
		if f != nil {
			resumed += f.resumed
		}
	}
	for _, p := range replicas[1:] {
		wn, en, lines := p.logCounts()
		crash.warns, crash.errs = crash.warns+wn, crash.errs+en
		for _, l := range lines {
			log.Warn("orchd logged after the NATS crash", "replica", p.name, "line", l)
		}
	}
	fmt.Fprintf(w, "%s/failover\t1\t%d delegations-per-replica\t%d killed\t%.0f failover-ms\t%.0f first-follow-ms\t%.0f follow-p50-ms\t%.0f lease-ttl-ms\t%d followed\t%.0f next-event-p50-ms\t%.0f next-event-max-ms\t%d completed\t%d lost\t%d lost-of-killed",
		clusterBench, cfg.perReplica, len(orphans), ms(follow.last), ms(follow.first), ms(follow.p50), ms(ttl), follow.followed, ms(pctOf(next, 50)), ms(pctOf(next, 100)), logs.completed, logs.lost, lostKilled)
	fmt.Fprintf(w, "\t%d log-gaps\t%d log-duplicates\t%d followers\t%d followers-failed\t%d follower-gaps\t%d follower-duplicates\t%.0f start-wall-ms\t%d start-errors\t%d warn-lines\t%d error-lines\n",
		logs.gaps, logs.dups, nf, ffailed, fgaps, fdups, ms(start.wall), start.errs, warns, errs)
	fmt.Fprintf(w, "%s/natscrash\t1\t%d running\t%.0f led-again-ms\t%d retaken\t%.0f watched-ms\t%d warn-lines\t%d error-lines\t%d followers-resumed\n",
		clusterBench, crash.running, ms(crash.led), crash.retaken, ms(crash.watched), crash.warns, crash.errs, resumed)
	return nil
}

// crashSettle is how long past the lease TTL the run goes on after the
// NATS crash before it reads the logs: time for a replica that lost its
// lease to drop its work and take it again.
const crashSettle = 5 * time.Second

// leasesStream is the stream behind the replicas' liveness leases, in the
// default namespace.
const leasesStream = "KV_orchd-leases"

// eventsStream is the stream of the delegations' logs, which every
// follower on a replica other than the delegation's holder reads.
const eventsStream = "orchd_EVENTS"

// natsCrash is what kill -9 of the NATS node leading the leases' stream
// did.
type natsCrash struct {
	node    string        // the node killed
	at      time.Time     // when
	led     time.Duration // until the two left had elected a leader of the stream
	watched time.Duration // how long the run goes on before the next step
	running int           // the delegations started, all running
	retaken int           // tasks subscribed to again since the crash: work taken over
	// warns and errs are the WARN and ERROR lines the survivors logged
	// from the crash to the end of the run.
	warns, errs int
}

// crashLeasesLeader kills the NATS server leading the leases' stream,
// with kill -9, as a crash of its machine would: no leadership is handed
// over, so the two left wait for NATS's election timeout before either
// leads, and every replica's renewal stalls meanwhile. The events'
// stream is first led by that server too (moveLeader), so every
// follower's reads stall as well, whichever server led it. It times the
// election from the stream's info, then lets the lease TTL and
// crashSettle go by: a replica that lost its lease for the stall drops
// its delegations and takes them again meanwhile (retakenSince counts
// them at the end).
func crashLeasesLeader(ctx context.Context, servers []*proc, clientURLs []string, ttl time.Duration) (natsCrash, error) {
	nc, err := nats.Connect(strings.Join(clientURLs, ","), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		return natsCrash{}, fmt.Errorf("connect to the NATS cluster: %w", err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return natsCrash{}, err
	}
	leader := func() string { return streamLeader(ctx, js, leasesStream) }
	c := natsCrash{node: leader()}
	victim := slices.IndexFunc(servers, func(p *proc) bool { return p.name == "nats-"+c.node })
	if victim < 0 {
		return c, fmt.Errorf("the leader of %s, %q, is none of the NATS servers", leasesStream, c.node)
	}
	if err := moveLeader(ctx, nc, js, eventsStream, c.node); err != nil {
		return c, err
	}
	servers[victim].kill()
	c.at = time.Now()
	for l := leader(); l == "" || l == c.node; l = leader() {
		if time.Since(c.at) > time.Minute {
			return c, fmt.Errorf("%s has no leader a minute after its leader %s crashed", leasesStream, c.node)
		}
		if err := sleepCtx(ctx, 50*time.Millisecond); err != nil {
			return c, err
		}
	}
	c.led = time.Since(c.at)
	c.watched = ttl + crashSettle
	if err := sleepCtx(ctx, time.Until(c.at.Add(c.watched))); err != nil {
		return c, err
	}
	return c, nil
}

// streamLeader is the server leading stream, "" when none does or the
// stream's info does not come within half a second.
func streamLeader(ctx context.Context, js jetstream.JetStream, stream string) string {
	ctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	st, err := js.Stream(ctx, stream)
	if err != nil {
		return ""
	}
	info := st.CachedInfo()
	if info.Cluster == nil {
		return ""
	}
	return info.Cluster.Leader
}

// moveLeader has server node lead stream, asking its leader to step
// down in node's favour (JetStream's stream leader step-down with a
// preferred placement), and returns once node leads it.
func moveLeader(ctx context.Context, nc *nats.Conn, js jetstream.JetStream, stream, node string) error {
	if streamLeader(ctx, js, stream) == node {
		return nil
	}
	body, err := json.Marshal(map[string]any{"placement": map[string]string{"preferred": node}})
	if err != nil {
		return err
	}
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	m, err := nc.RequestWithContext(rctx, "$JS.API.STREAM.LEADER.STEPDOWN."+stream, body)
	if err != nil {
		return fmt.Errorf("move the leader of %s to %s: %w", stream, node, err)
	}
	var resp struct {
		Error *struct {
			Description string `json:"description"`
		} `json:"error"`
	}
	if err := json.Unmarshal(m.Data, &resp); err != nil || resp.Error != nil {
		return fmt.Errorf("move the leader of %s to %s: %s (%v)", stream, node, m.Data, err)
	}
	for start := time.Now(); streamLeader(ctx, js, stream) != node; {
		if time.Since(start) > 10*time.Second {
			return fmt.Errorf("%s is not led by %s 10 s after it was asked to", stream, node)
		}
		if err := sleepCtx(ctx, 50*time.Millisecond); err != nil {
			return err
		}
	}
	return nil
}

// retakenSince counts the tasks the agent was asked to stream again at or
// after the crash, once the work has ended: no replica dies after it, so
// each is a delegation a replica dropped for a lost lease and took again.
func (c *natsCrash) retakenSince(ctx context.Context, agentURL string) error {
	var subs map[a2a.TaskID]int64
	if err := getJSON(ctx, agentURL+subscribedPath+"?since="+strconv.FormatInt(c.at.UnixNano(), 10), &subs); err != nil {
		return fmt.Errorf("read the agent's subscriptions since the NATS crash: %w", err)
	}
	c.retaken = len(subs)
	return nil
}

// sleepCtx waits d, or less when ctx is done first.
func sleepCtx(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}

// natsURLs are the addresses of the cluster's servers: the client URLs
// orchd connects to, and the monitoring ones that serve /varz.
type natsURLs struct {
	client, monitor []string
}

// natsCluster builds nats-server from the module's dependency and starts
// clusterReplicas of it on free loopback ports as one JetStream cluster,
// as docs/state.md shows, each with a monitoring port; it returns once
// every one reports JetStream healthy.
func (h *harness) natsCluster(ctx context.Context) ([]*proc, natsURLs, error) {
	bin := filepath.Join(h.dir, "nats-server")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "github.com/nats-io/nats-server/v2")
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, natsURLs{}, fmt.Errorf("go build nats-server: %w: %s", err, bounded(out))
	}
	var client, route, monitor []string
	for range clusterReplicas {
		for _, list := range []*[]string{&client, &route, &monitor} {
			addr, err := freeAddr()
			if err != nil {
				return nil, natsURLs{}, err
			}
			*list = append(*list, addr)
		}
	}
	var routes []string
	for _, r := range route {
		routes = append(routes, "nats://"+r)
	}
	var urls natsURLs
	var ps []*proc
	for i := range clusterReplicas {
		name := "n" + strconv.Itoa(i+1)
		_, port, _ := strings.Cut(client[i], ":")
		_, mport, _ := strings.Cut(monitor[i], ":")
		p, err := h.start("nats-"+name, exec.Command(bin, "-n", name, "-a", "127.0.0.1", "-p", port, "-m", mport,
			"-js", "-sd", filepath.Join(h.dir, name), "--cluster_name", "orchd", "--cluster", "nats://"+route[i],
			"--routes", strings.Join(routes, ",")))
		if err != nil {
			return nil, natsURLs{}, err
		}
		ps = append(ps, p)
		urls.client = append(urls.client, "nats://"+client[i])
		urls.monitor = append(urls.monitor, "http://"+monitor[i])
	}
	deadline := time.Now().Add(readyWait)
	for i, m := range urls.monitor {
		for getJSON(ctx, m+"/healthz", nil) != nil {
			select {
			case <-ps[i].exited:
				return nil, natsURLs{}, fmt.Errorf("%s exited: %s", ps[i].name, ps[i].tail())
			case <-ctx.Done():
				return nil, natsURLs{}, ctx.Err()
			case <-time.After(100 * time.Millisecond):
			}
			if time.Now().After(deadline) {
				return nil, natsURLs{}, fmt.Errorf("%s not healthy in %s: %s", ps[i].name, readyWait, ps[i].tail())
			}
		}
	}
	return ps, urls, nil
}

// clusterCounts is what the cluster run reads at each end of its quiet
// window.
type clusterCounts struct {
	at       time.Time
	orchdCPU []time.Duration // each replica's
	natsCPU  time.Duration   // the servers', together
	natsMsgs int64           // the servers' in_msgs + out_msgs, together
}

// clusterSnapshot reads the replicas' and the servers' CPU times and the
// servers' message counts.
func clusterSnapshot(ctx context.Context, replicas, servers []*proc, monitors []string) (clusterCounts, error) {
	c := clusterCounts{at: time.Now()}
	for _, p := range replicas {
		d, err := cpuTime(p.pid())
		if err != nil {
			return c, err
		}
		c.orchdCPU = append(c.orchdCPU, d)
	}
	var err error
	if c.natsCPU, err = cpuOf(servers); err != nil {
		return c, err
	}
	for _, m := range monitors {
		var v struct {
			InMsgs  int64 `json:"in_msgs"`
			OutMsgs int64 `json:"out_msgs"`
		}
		if err := getJSON(ctx, m+"/varz", &v); err != nil {
			return c, err
		}
		c.natsMsgs += v.InMsgs + v.OutMsgs
	}
	return c, nil
}

// failoverResult is when a killed replica's delegations were followed
// again: their tasks subscribed to at the agent by a survivor, counted
// from the kill.
type failoverResult struct {
	first, p50, last time.Duration
	followed         int
	err              error
}

// failoverPoll is how long the failover watch waits between two reads
// of the agent's subscriptions.
const failoverPoll = 200 * time.Millisecond

// watchFailover reads the agent's subscriptions at agentURL every
// failoverPoll until each of tasks was subscribed to after killed, or
// within is over.
func watchFailover(ctx context.Context, agentURL string, tasks []a2a.TaskID, killed time.Time, within time.Duration) failoverResult {
	pending := map[a2a.TaskID]bool{}
	for _, t := range tasks {
		pending[t] = true
	}
	var lat []time.Duration
	for len(pending) > 0 {
		if time.Since(killed) > within {
			return failoverResult{err: fmt.Errorf("%d of the killed replica's %d delegations not followed within %s", len(pending), len(tasks), within)}
		}
		if err := sleepCtx(ctx, failoverPoll); err != nil {
			return failoverResult{err: err}
		}
		var subs map[a2a.TaskID]int64
		if err := getJSON(ctx, agentURL+subscribedPath+"?since="+strconv.FormatInt(killed.UnixNano(), 10), &subs); err != nil {
			continue // read again next time
		}
		for t, at := range subs {
			if pending[t] {
				delete(pending, t)
				lat = append(lat, time.Unix(0, at).Sub(killed))
			}
		}
	}
	slices.Sort(lat)
	res := failoverResult{followed: len(lat)}
	if len(lat) > 0 {
		res.first, res.p50, res.last = lat[0], lat[len(lat)/2], lat[len(lat)-1]
	}
	return res
}

// taskIDs reads the agent's task id of each of ids through api, callers
// at a time.
func taskIDs(ctx context.Context, api *scaleAPI, ids []string, callers int) ([]a2a.TaskID, error) {
	out := make([]a2a.TaskID, len(ids))
	var mu sync.Mutex
	var first error
	inParallel(len(ids), callers, func(i int) {
		var r struct {
			Downstream struct {
				TaskID a2a.TaskID `json:"taskId"`
			} `json:"downstream"`
		}
		err := getJSON(ctx, api.url("/v1/delegations/"+ids[i]), &r)
		if err == nil && r.Downstream.TaskID == "" {
			err = fmt.Errorf("delegation %s has no task at its agent yet", ids[i])
		}
		if err != nil {
			mu.Lock()
			first = cmpOr(first, err)
			mu.Unlock()
			return
		}
		out[i] = r.Downstream.TaskID
	})
	return out, first
}
