package main

import (
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/orchd/orchd/delegation"
	"github.com/orchd/orchd/registry"
	"github.com/orchd/orchd/steering"
)

// TestPrintEvent pins the line each kind of event is followed with: a
// steer or interrupt passed on reads as the caller's signal and the hops
// that took it, not as words of the agent.
func TestPrintEvent(t *testing.T) {
	text := func(s string) *a2a.Message { return a2a.NewMessage(a2a.MessageRoleAgent, a2a.NewTextPart(s)) }
	receipt := &steering.Receipt{Control: steering.Steer, Seq: 1, Hops: []steering.Hop{{Agent: "orchd-a", Seq: 1}, {Agent: "steerable", Seq: 1}}}
	for _, tt := range []struct {
		name string
		ev   delegation.Event
		want string
	}{
		{"state", delegation.Event{Seq: 1, Kind: "state", State: a2a.TaskStateWorking, Message: text("step 1")}, "[1] working: step 1"},
		{"artifact", delegation.Event{Seq: 2, Kind: "artifact", State: a2a.TaskStateWorking,
			Artifact: &a2a.Artifact{ID: "report", Parts: a2a.ContentParts{a2a.NewTextPart("section 1")}}}, "[2] artifact report: section 1"},
		{"steer", delegation.Event{Seq: 3, Kind: "steer", State: a2a.TaskStateWorking, Message: text("only 2025"), Receipt: receipt},
			"[3] steer: only 2025 (accepted by orchd-a #1 → steerable #1)"},
		{"interrupt without text", delegation.Event{Seq: 4, Kind: "interrupt", State: a2a.TaskStateWorking, Receipt: receipt},
			"[4] interrupt (accepted by orchd-a #1 → steerable #1)"},
		{"failed", delegation.Event{Seq: 5, Kind: "state", State: a2a.TaskStateFailed, Error: "agent a: gone"}, "[5] failed (agent a: gone)"},
		{"contained", delegation.Event{Seq: 6, Kind: delegation.KindContained, State: a2a.TaskStateWorking,
			Containment: &registry.Containment{Agent: "a", Reason: "leaks data", By: "ops", At: time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)}},
			"[6] contained: agent a contained by ops at 2026-12-06T12:00:00Z (running work interrupted): leaks data"},
		{"news from below", delegation.Event{Seq: 7, Kind: "state", State: a2a.TaskStateWorking, Lineage: &delegation.Lineage{
			Hops: []delegation.LineageHop{{Orchd: "b", Agent: "d", State: a2a.TaskStateWorking}, {Orchd: "d", Agent: "leaf", State: a2a.TaskStateInputRequired}}}},
			"[7] working (below: d working → leaf input_required)"},
		{"a cut lineage", delegation.Event{Seq: 8, Kind: "state", State: a2a.TaskStateWorking, Lineage: &delegation.Lineage{
			Hops: []delegation.LineageHop{{Orchd: "b", Agent: "d", State: a2a.TaskStateWorking}}, Truncated: true}},
			"[8] working (below: d working → …)"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var b strings.Builder
			printEvent(&b, tt.ev)
			if got := strings.TrimSuffix(b.String(), "\n"); got != tt.want {
				t.Errorf("printEvent = %q, want %q", got, tt.want)
			}
		})
	}
}
