package store

import (
	"context"
	"errors"
	"io"
	"net"
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
	hung  atomic.Bool
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

// unlessHung is src, minus what is read from it while the proxy hangs.
func (p *cutProxy) unlessHung(src io.Reader) io.Reader {
	return readerFunc(func(b []byte) (int, error) {
		for {
			n, err := src.Read(b)
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
	node := natstest.NewNode(t)
	proxy := newCutProxy(t, node.URL()[len("nats://"):])
	open := func(url string) (*Delegations, *Leases, *Store) {
		s, err := Open(t.Context(), "", Config{URL: url, Timeout: time.Second}, testLogger(t))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		d, err := s.Delegations(t.Context(), DelegationsConfig{})
		if err != nil {
			t.Fatal(err)
		}
		return d, leasesOf(t, s, ttl), s
	}
	dA, lA, sA := open(proxy.URL())
	dB, lB, _ := open(node.URL())
	a, b := join(t, lA, "a"), join(t, lB, "b")
	renewEvery(t, a, ttl)
	renewEvery(t, b, ttl)
	const id = "d1"
	if _, err := a.Take(t.Context(), id); err != nil {
		t.Fatal(err)
	}
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
	var orphans []string
	testwait.Succeeds(t, 2*ttl, "b to find a's delegation", func() error {
		select {
		case <-b.Departed():
		case <-time.After(100 * time.Millisecond):
		}
		var err error
		orphans, err = b.Orphans(t.Context(), nil)
		if err != nil {
			return err
		}
		if len(orphans) != 1 || orphans[0] != id {
			return errors.New("not yet")
		}
		return nil
	})
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
