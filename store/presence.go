package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
)

// A replica that dies is found by its liveness key aging out, a TTL after
// its last renewal. Presence finds most deaths sooner without being fooled
// by a store that stalls or a replica that is slow:
//
//   - Each member listens on a subject of its own (presenceSubject) for as
//     long as it is joined. NATS drops that interest as soon as the
//     member's connection closes, as it does when its process dies.
//   - A member counts its own renewals that the watch delivers after
//     another's last one. The watch delivers the leases' bucket in order,
//     so once suspectAfter of its own went through after the other's
//     last, the store took its writes and not the other's. A stall of the
//     store stops every renewal, so it raises no count.
//   - It then asks the other's subject. An answer, or none in time, means
//     the other is connected: it is slow, and its key's age decides as
//     before. "No responders" means no connection holds that interest: the
//     other is judged gone at the revision of its last renewal, and the
//     look for its delegations deletes its key expecting that revision,
//     as it deletes a stale one (Leases.alive). A renewal since makes
//     that delete fail, and the other is live after all.
//   - A replica that was only cut off from the store, and comes back,
//     must not write once it may have been judged gone. nats.go keeps
//     what is sent while it reconnects and sends it once reconnected, so
//     the writes of the delegations a replica follows are refused while
//     its connection is down, and after a reconnect until a renewal of its
//     lease went through on the new connection (fence; each member renews
//     as soon as the connection is back). Refused, they are tried again as
//     in an outage. If it was judged gone, that renewal finds its key
//     deleted: the lease is lost, and it stops following those
//     delegations without another write. The client's buffer stays on:
//     nats.go's ordered consumers, under every watch, give up when they
//     cannot be made again at once after a reconnect. A write can still
//     leave before the replica knows its connection is gone (in the
//     instant it drops, or held by a network that went quietly), and
//     reach the server once it is back: an event expects the log's tail
//     and a record the revision this process wrote last
//     (Delegations.writeRecord). The new holder seals the log before it
//     reads it (Delegations.Seal), so a late event is refused, and a
//     late record once the new holder wrote its own.

// suspectAfter is how many of its own renewals a member sees after
// another's last before it asks whether that one is still connected.
const suspectAfter = 3

// presenceSubject is the subject the member whose stamp is st listens on,
// and false when the stamp's epoch cannot be a subject token (not a stamp
// this package wrote: such a member is never asked).
func (l *Leases) presenceSubject(st string) (string, bool) {
	epoch, _, _ := strings.Cut(st, " ")
	if !plainToken(epoch) {
		return "", false
	}
	return l.s.cfg.Namespace + ".presence." + epoch, true
}

// listen subscribes to the member's presence subject, answering every
// question, and checks the question reaches it: a connection that may
// not subscribe there, or ask, is refused at the join, where it would
// otherwise make every slow renewal look like a death.
func (m *member) listen(ctx context.Context) (*nats.Subscription, error) {
	subject, ok := m.l.presenceSubject(m.stamp)
	if !ok {
		return nil, fmt.Errorf("presence: stamp %q has no subject", m.stamp)
	}
	sub, err := m.l.s.nc.Subscribe(subject, func(msg *nats.Msg) { _ = msg.Respond(nil) })
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", subject, err)
	}
	if _, err := m.l.s.nc.RequestWithContext(ctx, subject, nil); err != nil {
		_ = sub.Unsubscribe()
		return nil, fmt.Errorf("ask %s (the connection needs to publish and subscribe there): %w", subject, err)
	}
	return sub, nil
}

// probe asks whether the member whose stamp is st is connected to the
// store, within timeout: false only when NATS says nobody listens on its
// subject. Any other outcome, an answer, none in time or an error, counts
// as connected.
func (l *Leases) probe(ctx context.Context, st string, timeout time.Duration) (connected bool) {
	subject, ok := l.presenceSubject(st)
	if !ok {
		return true
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	_, err := l.s.nc.RequestWithContext(ctx, subject, nil)
	return !errors.Is(err, nats.ErrNoResponders)
}

// judge records that the member whose stamp is st was found gone while
// its liveness key stood at revision rev.
func (l *Leases) judge(st string, rev uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.gone[st] = rev
}

// forget drops what judge recorded of stamp st.
func (l *Leases) forget(st string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.gone, st)
}

// judgedGone reports whether the member whose stamp is st was found gone
// with its liveness key at revision rev: not renewed since.
func (l *Leases) judgedGone(st string, rev uint64) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	r, ok := l.gone[st]
	return ok && r == rev
}

// fence refuses the writes of the delegations a replica follows while
// its connection to an external store is down, and once it came back
// until a renewal of its lease went through on the new connection: see
// the comment at the top of this file. Without a lease (embedded mode, or
// before a join) it refuses nothing.
type fence struct {
	// leased says a lease was joined on this store.
	leased atomic.Bool
	// renewedOn is 1 + the number of reconnects of the connection on
	// which a join or renewal last went through, 0 when the last renewal
	// found the lease lost.
	renewedOn atomic.Uint64
	// mu guards reconnected: closed at each reconnect, so every member's
	// watch renews at once (member.watch) and the fence lifts without
	// waiting for the next renewal.
	mu          sync.Mutex
	reconnected chan struct{}
}

// errFenced is the error of a write the fence refuses. It is not tried
// again within the write: a delegation's write is made under its lock,
// and tried again with its next write or by the engine, as in an outage,
// where waiting would hold that lock from the lease loop that renews.
var errFenced = errors.New("the connection to the store is down, or came back and the liveness lease is not renewed on it yet")

// reconnectedSignal returns a channel closed at the next reconnect.
func (s *Store) reconnectedSignal() <-chan struct{} {
	s.fence.mu.Lock()
	defer s.fence.mu.Unlock()
	if s.fence.reconnected == nil {
		s.fence.reconnected = make(chan struct{})
	}
	return s.fence.reconnected
}

// noteReconnect closes the channel reconnectedSignal handed out.
func (s *Store) noteReconnect() {
	s.fence.mu.Lock()
	defer s.fence.mu.Unlock()
	if s.fence.reconnected != nil {
		close(s.fence.reconnected)
		s.fence.reconnected = nil
	}
}

// connection returns which connection to the store this is: the number
// of times the client reconnected.
func (s *Store) connection() uint64 { return s.nc.Stats().Reconnects }

// fenced returns errFenced while the fence refuses writes: once a lease
// was joined, while the connection is down, and after a reconnect until
// a renewal went through.
func (s *Store) fenced() error {
	if !s.fence.leased.Load() {
		return nil
	}
	if s.nc.IsConnected() && s.fence.renewedOn.Load() == s.connection()+1 {
		return nil
	}
	return errFenced
}

// renewed opens the fence after a join or renewal that went through on
// connection conn (as connection returned before it was sent), unless the
// client reconnected meanwhile.
func (s *Store) renewed(conn uint64) {
	s.fence.leased.Store(true)
	if s.connection() == conn {
		s.fence.renewedOn.Store(conn + 1)
	}
}

// leaseLost closes the fence: the lease it opened for is gone.
func (s *Store) leaseLost() { s.fence.renewedOn.Store(0) }
