package store

import (
	"fmt"
	"testing"
	"time"
)

// BenchmarkStateReplicas measures what it costs replicas sharing a NATS server to
// keep each running delegation followed by exactly one of them, and how
// soon a killed replica's delegations are carried on by the others.
//
// Three replicas (each a store connection, leases and an engine, as the
// daemon builds them in external mode) start n delegations each to an
// agent that never finishes them and is polled once a minute, so in
// steady state nothing the work does reaches NATS: what does is the
// leases' upkeep and the look for delegations to carry on. With the
// default lease TTL (10 s), it counts the NATS messages each replica's
// connection sends and receives over three ticks of TTL/3 (how often the
// per-delegation leases it replaced were renewed; a replica now renews
// its one lease every TTL/10), after one tick of settling, and reports
// them per replica and tick (msgs-out and msgs-in: requests and their
// replies, KiB both ways).
// Then it kills one replica (its connection closes before anything is
// given up) and reports how long until every one of its delegations is
// followed by one of the two others (takeover-s).
//
//	go test ./store -run '^$' -bench '^BenchmarkStateReplicas$' -benchtime 1x
func BenchmarkStateReplicas(b *testing.B) {
	for _, n := range []int{1000} {
		b.Run(fmt.Sprintf("replicas-3/running-%d", n), func(b *testing.B) {
			for b.Loop() {
				adoptRound(b, n)
			}
		})
	}
}

func adoptRound(b *testing.B, n int) {
	f := newFleet(b, DefaultLeaseTTL)
	rs := []*replica{f.replica(b, "r0", nil), f.replica(b, "r1", nil), f.replica(b, "r2", nil)}
	ids := make([][]string, len(rs))
	for i, r := range rs {
		ids[i] = r.delegate(b, n)
	}
	tick := f.ttl / 3
	time.Sleep(tick)
	type counts struct{ out, in, bytes uint64 }
	snapshot := func() []counts {
		out := make([]counts, len(rs))
		for i, r := range rs {
			s := r.st.JetStream().Conn().Stats()
			out[i] = counts{s.OutMsgs, s.InMsgs, s.OutBytes + s.InBytes}
		}
		return out
	}
	const ticks = 3
	before := snapshot()
	time.Sleep(ticks * tick)
	after := snapshot()
	var out, in, bytes float64
	for i := range rs {
		out += float64(after[i].out - before[i].out)
		in += float64(after[i].in - before[i].in)
		bytes += float64(after[i].bytes - before[i].bytes)
	}
	per := float64(len(rs) * ticks)
	b.ReportMetric(out/per, "msgs-out/replica/tick")
	b.ReportMetric(in/per, "msgs-in/replica/tick")
	b.ReportMetric(bytes/per/1024, "KiB/replica/tick")

	rs[0].kill()
	killed := time.Now()
	deadline := killed.Add(2 * time.Minute)
	for followedOnce(ids[0], rs[1], rs[2]) != nil {
		if time.Now().After(deadline) {
			b.Fatalf("not carried on within 2 minutes: %v", followedOnce(ids[0], rs[1], rs[2]))
		}
		time.Sleep(50 * time.Millisecond)
	}
	b.ReportMetric(time.Since(killed).Seconds(), "takeover-s")
	b.ReportMetric(f.ttl.Seconds(), "ttl-s")
}
