package store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/nats-io/nats.go"

	"github.com/orchd/orchd/delegation"
	"github.com/orchd/orchd/internal/natstest"
	"github.com/orchd/orchd/internal/testwait"
)

// cutProxy relays TCP connections to a NATS server and can cut them, as
// a network that fails between one replica and the store would, while
// the replica and the server both live on.
type cutProxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	cut    bool
	// hung makes the connections swallow what is sent either way.
	hung atomic.Bool
	// held, while not nil, keeps what is sent either way from passing
	// until it is closed; guarded by mu.
	held  chan struct{}
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
}

func newCutProxy(t *testing.T, target string) *cutProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	p.wg.Go(p.accept)
	t.Cleanup(func() {
		_ = ln.Close()
		p.setHeld(false)
		p.setCut(true)
		p.wg.Wait()
	})
	return p
}

func (p *cutProxy) URL() string { return "nats://" + p.ln.Addr().String() }

func (p *cutProxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		up, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = c.Close()
			continue
		}
		p.mu.Lock()
		if p.cut {
			p.mu.Unlock()
			_ = c.Close()
			_ = up.Close()
			continue
		}
		p.conns[c], p.conns[up] = struct{}{}, struct{}{}
		p.mu.Unlock()
		pipe := func(dst, src net.Conn) {
			_, _ = io.Copy(dst, p.unlessHung(src))
			_ = dst.Close()
			_ = src.Close()
		}
		p.wg.Go(func() { pipe(up, c) })
		p.wg.Go(func() { pipe(c, up) })
	}
}

// setCut cuts every connection through the proxy and refuses new ones,
// or lets them through again.
func (p *cutProxy) setCut(cut bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = cut
	if cut {
		for c := range p.conns {
			_ = c.Close()
		}
		clear(p.conns)
	}
}

// setHung makes every connection through the proxy swallow what either
// end sends, and keep it no more, while both stay open: as far as the
// server can tell, the replica is connected; it answers nothing.
func (p *cutProxy) setHung(hung bool) { p.hung.Store(hung) }

// setHeld makes every connection through the proxy keep what either end
// sends, passing it on once let go, while both stay open: a network gone
// for a while and back before either end noticed.
func (p *cutProxy) setHeld(held bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case held && p.held == nil:
		p.held = make(chan struct{})
	case !held && p.held != nil:
		close(p.held)
		p.held = nil
	}
}

// waitHeld returns once the proxy is not holding what is sent.
func (p *cutProxy) waitHeld() {
	p.mu.Lock()
	held := p.held
	p.mu.Unlock()
	if held != nil {
		<-held
	}
}

// unlessHung is src, minus what is read from it while the proxy hangs,
// and later than read while it holds.
func (p *cutProxy) unlessHung(src io.Reader) io.Reader {
	return readerFunc(func(b []byte) (int, error) {
		for {
			p.waitHeld()
			n, err := src.Read(b)
			p.waitHeld()
			if n == 0 || !p.hung.Load() {
				return n, err
			}
			if err != nil {
				return 0, err
			}
		}
	})
}

// readerFunc is a function that is an io.Reader.
type readerFunc func([]byte) (int, error)

func (f readerFunc) Read(b []byte) (int, error) { return f(b) }

// renewEvery renews m every RenewEvery(ttl) until the test ends or a
// renewal finds the lease lost, as the engine does.
func renewEvery(t *testing.T, m delegation.Member, ttl time.Duration) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	go func() {
		defer close(done)
		tick := time.NewTicker(delegation.RenewEvery(ttl))
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				if err := m.Renew(ctx); errors.Is(err, delegation.ErrLeaseLost) {
					return
				}
			}
		}
	}()
}

// TestPresence_CutOffReplicaFencedOut cuts a replica off from the store
// while it holds a delegation, on the default TTL. The other replica,
// whose renewals go on, finds it gone well before its key would age out
// and takes the delegation. Nothing the cut-off replica writes of that
// delegation reaches the store: its writes wait while it is cut off
// (nats.go would send them once reconnected), and once it is back, for a
// renewal, which finds its lease lost.
func TestPresence_CutOffReplicaFencedOut(t *testing.T) {
	if testing.Short() {
		t.Skip("waits several renewals")
	}
	t.Parallel()
	const ttl = DefaultLeaseTTL
	const id = "d1"
	r := newReplicaPair(t, ttl, id)
	proxy, dA, sA, a, dB, lB, b := r.proxy, r.dA, r.sA, r.a, r.dB, r.lB, r.b
	rec := delegation.Record{ID: id, State: a2a.TaskStateWorking, CreatedAt: time.Now().UTC()}
	if err := dA.Put(t.Context(), rec); err != nil {
		t.Fatal(err)
	}
	if err := dA.Append(t.Context(), id, delegation.Event{Seq: 1, Kind: "state", State: a2a.TaskStateWorking}); err != nil {
		t.Fatal(err)
	}

	proxy.setCut(true)
	cut := time.Now()
	testwait.Until(t, ttl, "a to notice the cut", func() bool { return sA.JetStream().Conn().Status() != nats.CONNECTED })
	// nats.go would keep a write sent now, and send it once reconnected.
	if err := dA.Append(t.Context(), id, delegation.Event{Seq: 2, Kind: "state", State: a2a.TaskStateWorking}); !errors.Is(err, delegation.ErrUnavailable) {
		t.Errorf("a's append while cut off: %v; want it refused as unavailable", err)
	}
	findOrphan(t, b, id, 2*ttl)
	found := time.Since(cut)
	t.Logf("found %s after the cut (TTL %s)", found.Round(time.Millisecond), ttl)
	// The key ages out a TTL after a's last renewal, at most RenewEvery
	// before the cut.
	if limit := ttl - 2*delegation.RenewEvery(ttl); found > limit {
		t.Errorf("found %s after the cut, not before the key could age out (%s)", found, limit)
	}
	if _, err := b.Take(t.Context(), id); err != nil {
		t.Fatalf("b takes a's delegation: %v", err)
	}

	proxy.setCut(false)
	testwait.Until(t, ttl, "a to reconnect", func() bool { return sA.JetStream().Conn().Status() == nats.CONNECTED })
	if err := dA.Append(t.Context(), id, delegation.Event{Seq: 2, Kind: "state", State: a2a.TaskStateWorking}); !errors.Is(err, delegation.ErrUnavailable) {
		t.Errorf("a's append after its reconnect: %v; want it refused as unavailable", err)
	}
	rec.Error = "from a"
	if err := dA.Put(t.Context(), rec); !errors.Is(err, delegation.ErrUnavailable) {
		t.Errorf("a's put after its reconnect: %v; want it refused as unavailable", err)
	}
	if err := a.Renew(t.Context()); !errors.Is(err, delegation.ErrLeaseLost) {
		t.Errorf("a's renewal after its reconnect: %v; want ErrLeaseLost", err)
	}
	evs, err := dB.Events(t.Context(), id, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 1 {
		t.Errorf("the log holds %d events, want the 1 written before the cut: %+v", len(evs), evs)
	}
	got, err := dB.Get(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	if got.Error != "" {
		t.Errorf("the record holds a's write after the cut: %+v", got)
	}
	if h := holder(t, lB, id); h != "b" {
		t.Errorf("holder = %q, want b", h)
	}
}

// TestPresence_HeldWriteRefusedAfterTakeover holds what a replica sends
// NATS on the way, its connection open at both ends, as a network gone
// and back before either end noticed does. The replica's write of its
// delegation waits there, a record (Put) or an event with the record
// (PutStep). Another replica takes the delegation over, seals its log and
// reads it, as the engine does, and writes the delegation; the held
// writes reach the server after the new holder read the log, before its
// writes or after them. Either way the
// record and the log end as the new holder wrote them: a held write
// expects what the first replica wrote last, and the seal or the new
// holder's writes changed that.
func TestPresence_HeldWriteRefusedAfterTakeover(t *testing.T) {
	if testing.Short() {
		t.Skip("waits several renewals")
	}
	t.Parallel()
	ev := func(seq int64, by string) delegation.Event {
		return delegation.Event{Seq: seq, Kind: "state", State: a2a.TaskStateWorking, Error: by}
	}
	for _, held := range []struct {
		name  string
		write func(context.Context, *Delegations, delegation.Record) error
	}{
		{"put", func(ctx context.Context, d *Delegations, r delegation.Record) error { return d.Put(ctx, r) }},
		{"step", func(ctx context.Context, d *Delegations, r delegation.Record) error {
			return d.PutStep(ctx, r, ev(2, "a"))
		}},
	} {
		for _, order := range []string{"arriving after b's writes", "arriving before b's writes"} {
			t.Run(held.name+" "+order, func(t *testing.T) {
				t.Parallel()
				const ttl = 2 * time.Second
				const id = "d1"
				r := newReplicaPair(t, ttl, id)
				proxy, dA, sA, dB, b := r.proxy, r.dA, r.sA, r.dB, r.b
				rec := delegation.Record{ID: id, State: a2a.TaskStateWorking, LastEvent: 1, CreatedAt: time.Now().UTC()}
				if err := dA.Put(t.Context(), rec); err != nil {
					t.Fatal(err)
				}
				if err := dA.Append(t.Context(), id, ev(1, "a")); err != nil {
					t.Fatal(err)
				}

				proxy.setHeld(true)
				stale := rec
				stale.LastEvent, stale.Error = 2, "from a, held on the way"
				if err := held.write(t.Context(), dA, stale); err == nil {
					t.Fatal("a's write while its connection is held succeeded")
				}
				findOrphan(t, b, id, 3*ttl)
				if _, err := b.Take(t.Context(), id); err != nil {
					t.Fatalf("b takes a's delegation: %v", err)
				}
				if err := dB.Seal(t.Context(), id); err != nil {
					t.Fatal(err)
				}
				let := func() {
					proxy.setHeld(false)
					// A write sent after the held ones, on the same
					// connection to the same streams, is stored after them:
					// once both are acknowledged, the held writes were taken
					// or refused.
					for _, subject := range []string{dA.recordPf, dA.eventsPf} {
						if _, err := sA.JetStream().Publish(t.Context(), subject+"after-the-held-writes", nil); err != nil {
							t.Fatal(err)
						}
					}
				}
				if evs, err := dB.Events(t.Context(), id, 0, 0); err != nil || len(evs) != 1 {
					t.Fatalf("b reads the log as %+v, %v; want a's first event", evs, err)
				}
				if order == "arriving before b's writes" {
					let()
				}
				taken := rec
				taken.LastEvent = 2
				if err := dB.Append(t.Context(), id, ev(2, "b")); err != nil {
					t.Fatal(err)
				}
				if err := dB.Put(t.Context(), taken); err != nil {
					t.Fatal(err)
				}
				if order == "arriving after b's writes" {
					let()
				}

				kept, err := dB.Get(t.Context(), id)
				if err != nil {
					t.Fatal(err)
				}
				if kept.Error != "" {
					t.Errorf("the record says %q, last event %d: a's held write; want b's", kept.Error, kept.LastEvent)
				}
				evs, err := dB.Events(t.Context(), id, 0, 0)
				if err != nil {
					t.Fatal(err)
				}
				var got []string
				for _, e := range evs {
					got = append(got, fmt.Sprintf("%d by %s", e.Seq, e.Error))
				}
				if want := []string{"1 by a", "2 by b"}; !slices.Equal(got, want) {
					t.Errorf("the log is %q, want %q", got, want)
				}
			})
		}
	}
}

// replicaPair is two replicas of one store, each renewing its lease of
// the pair's TTL: a reaches the store through a proxy the test cuts or
// holds, b directly.
type replicaPair struct {
	proxy  *cutProxy
	sA     *Store
	dA, dB *Delegations
	lB     *Leases
	a, b   delegation.Member
}

// newReplicaPair starts a replica pair on a new NATS server, a holding
// delegation id.
func newReplicaPair(t *testing.T, ttl time.Duration, id string) *replicaPair {
	t.Helper()
	node := natstest.NewNode(t)
	r := &replicaPair{proxy: newCutProxy(t, node.URL()[len("nats://"):])}
	open := func(url string) (*Store, *Delegations, *Leases) {
		s, err := Open(t.Context(), "", Config{URL: url, Timeout: time.Second}, testLogger(t))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		d, err := s.Delegations(t.Context(), DelegationsConfig{})
		if err != nil {
			t.Fatal(err)
		}
		return s, d, leasesOf(t, s, ttl)
	}
	var lA *Leases
	r.sA, r.dA, lA = open(r.proxy.URL())
	_, r.dB, r.lB = open(node.URL())
	r.a, r.b = join(t, lA, "a"), join(t, r.lB, "b")
	renewEvery(t, r.a, ttl)
	renewEvery(t, r.b, ttl)
	if _, err := r.a.Take(t.Context(), id); err != nil {
		t.Fatal(err)
	}
	return r
}

// findOrphan waits, up to within, for m to find delegation id nobody
// follows, and only it.
func findOrphan(t *testing.T, m delegation.Member, id string, within time.Duration) {
	t.Helper()
	testwait.Succeeds(t, within, "the delegation to be found orphaned", func() error {
		select {
		case <-m.Departed():
		case <-time.After(100 * time.Millisecond):
		}
		orphans, err := m.Orphans(t.Context(), nil)
		if err != nil {
			return err
		}
		if len(orphans) != 1 || orphans[0] != id {
			return fmt.Errorf("found %q", orphans)
		}
		return nil
	})
}

// TestPresence_SlowReplicaKept stops a replica's renewals while it stays
// connected to the store, as a replica starved of CPU would: the other
// suspects it and asks, finds it connected, and leaves its delegation
// alone while its key lives.
func TestPresence_SlowReplicaKept(t *testing.T) {
	if testing.Short() {
		t.Skip("waits several renewals")
	}
	t.Parallel()
	const ttl = 2 * time.Second
	s := openTest(t, "", Config{})
	l := leasesOf(t, s, ttl)
	a, b := join(t, l, "a"), join(t, l, "b")
	renewEvery(t, b, ttl)
	if _, err := a.Take(t.Context(), "d1"); err != nil {
		t.Fatal(err)
	}
	// a renews no more; its key ages out a TTL (plus leaseSkew) after
	// its last renewal, here its join.
	deadline := time.Now().Add(ttl - 2*delegation.RenewEvery(ttl))
	for time.Now().Before(deadline) {
		ids, err := b.Orphans(t.Context(), nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(ids) != 0 {
			t.Fatalf("b found %v to carry on while a is connected and its key lives", ids)
		}
		time.Sleep(delegation.RenewEvery(ttl))
	}
	if h := holder(t, l, "d1"); h != "a" {
		t.Errorf("holder = %q, want a", h)
	}
}
