package store

import (
	"fmt"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/orchd/orchd/delegation"
)

// syncModes are the durability settings the benchmarks compare: the
// default, fsync once a second, and fsync before every acknowledgement.
var syncModes = []string{"1s", "always"}

// benchRecord is a record of a typical size (about 600 bytes of JSON).
func benchRecord(id string, st a2a.TaskState) delegation.Record {
	at := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	return delegation.Record{ID: id, State: st, CreatedAt: at, UpdatedAt: at,
		Downstream: delegation.Hop{Agent: "summarizer", CardDigest: "sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
			TaskID: "0f3c6e1e-4bb5-4a52-9d47-2f9f2d7d5c11", ContextID: "7d0b3c52-7a8e-4f3b-8f0e-3c2e9f1d6a55"},
		Chain:    delegation.Chain{Path: []string{"orchd-a", "orchd-b"}, Depth: 2, MaxDepth: 8},
		Decision: &delegation.Decision{Chosen: "summarizer", PolicySet: "sha256:2c26b46b68ffc68ff99b453c1d30413413422d706483bfa0f98a5e886266e7ae"},
		Progress: &delegation.Progress{Streaming: true, LastStatus: "c1f0b0a8-6c1e-4a51-bd0e-4b1c1f1f5d6e"},
	}
}

func benchDelegations(b *testing.B, sync string) *Delegations {
	return delegationsOf(b, openTest(b, "", Config{Sync: sync}), DelegationsConfig{})
}

// BenchmarkDelegations_Put updates running records, as a delegation does
// at each change of state: the running key and the record, each
// acknowledged by JetStream.
func BenchmarkDelegations_Put(b *testing.B) {
	for _, mode := range syncModes {
		b.Run("sync="+mode, func(b *testing.B) {
			d := benchDelegations(b, mode)
			const ids = 256
			for i := range ids {
				if err := d.Put(b.Context(), benchRecord(fmt.Sprint(i), a2a.TaskStateWorking)); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if err := d.Put(b.Context(), benchRecord(fmt.Sprint(i%ids), a2a.TaskStateWorking)); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	}
}

// BenchmarkDelegations_PutNew creates records and ends them, the two Puts
// every delegation makes at least.
func BenchmarkDelegations_PutNew(b *testing.B) {
	for _, mode := range syncModes {
		b.Run("sync="+mode, func(b *testing.B) {
			d := benchDelegations(b, mode)
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				id := fmt.Sprint(i)
				if err := d.Put(b.Context(), benchRecord(id, a2a.TaskStateWorking)); err != nil {
					b.Fatal(err)
				}
				if err := d.Put(b.Context(), benchRecord(id, a2a.TaskStateCompleted)); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	}
}

// BenchmarkDelegations_Append appends events to one log.
func BenchmarkDelegations_Append(b *testing.B) {
	for _, mode := range syncModes {
		b.Run("sync="+mode, func(b *testing.B) {
			d := benchDelegations(b, mode)
			msg := &a2a.Message{ID: "m", Role: a2a.MessageRoleAgent, Parts: a2a.ContentParts{a2a.NewTextPart("working on it, 40% done")}}
			b.ReportAllocs()
			seq := int64(0)
			for b.Loop() {
				seq++
				if err := d.Append(b.Context(), "d1", delegation.Event{Seq: seq, Kind: "state", State: a2a.TaskStateWorking, Message: msg}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkDelegations_Get reads records.
func BenchmarkDelegations_Get(b *testing.B) {
	for _, mode := range syncModes {
		b.Run("sync="+mode, func(b *testing.B) {
			d := benchDelegations(b, mode)
			const ids = 256
			for i := range ids {
				if err := d.Put(b.Context(), benchRecord(fmt.Sprint(i), a2a.TaskStateWorking)); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if _, err := d.Get(b.Context(), fmt.Sprint(i%ids)); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	}
}

// BenchmarkDelegations_EventsDeep reads three events from the middle of a
// 10,000-event log interleaved with another log.
func BenchmarkDelegations_EventsDeep(b *testing.B) {
	d := benchDelegations(b, DefaultSync)
	for seq := int64(1); seq <= 10_000; seq++ {
		for _, id := range []string{"deep", "other"} {
			if err := d.Append(b.Context(), id, delegation.Event{Seq: seq, Kind: "state"}); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		evs, err := d.Events(b.Context(), "deep", 6_789, 3)
		if err != nil || len(evs) != 3 || evs[0].Seq != 6_790 {
			b.Fatalf("Events = %v, %v", evs, err)
		}
	}
}

// BenchmarkDelegations_List reads the first page of 50 of 10,000 records.
func BenchmarkDelegations_List(b *testing.B) {
	d := benchDelegations(b, DefaultSync)
	fill(b, d, 9_900, 100)
	for _, q := range []delegation.Query{{}, {State: a2a.TaskStateWorking}} {
		b.Run(fmt.Sprintf("state=%s", q.State), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				p, err := d.List(b.Context(), q)
				if err != nil || len(p.Records) != delegation.DefaultPageSize {
					b.Fatalf("List = %d records, %v", len(p.Records), err)
				}
			}
		})
	}
}

// BenchmarkDelegations_ListLarge reads first pages, and the running ids,
// of a store of 100,000 ended and 300 running records.
func BenchmarkDelegations_ListLarge(b *testing.B) {
	d := benchDelegations(b, DefaultSync)
	start := time.Now()
	fill(b, d, 100_000, 300)
	b.Logf("put 100,300 records in %s", time.Since(start).Round(time.Millisecond))
	for _, tc := range []struct {
		name string
		q    delegation.Query
	}{
		{"page=50", delegation.Query{}},
		{"page=1000", delegation.Query{PageSize: delegation.MaxPageSize}},
		{"running,page=50", delegation.Query{State: a2a.TaskStateWorking}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := d.List(b.Context(), tc.q); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	b.Run("Running", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if ids, err := d.Running(b.Context()); err != nil || len(ids) != 300 {
				b.Fatalf("Running = %d, %v", len(ids), err)
			}
		}
	})
}
