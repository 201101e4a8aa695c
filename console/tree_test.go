package console

import (
	"fmt"
	"net/url"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/orchd/orchd/capability"
	"github.com/orchd/orchd/delegation"
	"github.com/orchd/orchd/registry"
	"github.com/orchd/orchd/steering"
)

func TestNewTree_HopsAsFarAsThisOrchdKnowsThem(t *testing.T) {
	orchd := &registry.Agent{Profile: &capability.Profile{ID: "b", Extensions: []capability.Extension{{URI: delegation.ExtensionURI}}}}
	plain := &registry.Agent{Profile: &capability.Profile{ID: "b"}}
	receipt := func(seq int64, hops ...string) delegation.Event {
		r := &steering.Receipt{Control: steering.Steer}
		for _, h := range hops {
			r.Hops = append(r.Hops, steering.Hop{Agent: h, Seq: seq})
		}
		return delegation.Event{Seq: seq, Kind: "steer", Receipt: r}
	}
	root := delegation.Record{Chain: delegation.Chain{Path: []string{"id-a"}, Names: []string{"orchd a"}}, Downstream: delegation.Hop{Agent: "b"}}
	middle := root
	middle.Chain = delegation.Chain{Path: []string{"id-r", "id-a"}, Names: []string{"root"}}
	withLineage := root
	withLineage.Lineage = &delegation.Lineage{Hops: []delegation.LineageHop{
		{Orchd: "id-b", Name: "orchd b", Agent: "d", AgentName: "orchd d"},
		{Orchd: "id-d", Agent: "leaf", AgentName: "Leaf"}}}
	cut := root
	cut.Lineage = &delegation.Lineage{Hops: withLineage.Lineage.Hops[:1], Truncated: true}
	for _, tc := range []struct {
		name         string
		rec          delegation.Record
		down         *registry.Agent
		evs          []delegation.Event
		want         []string // "role name seqs"
		belowUnknown bool
	}{
		{"an agent", root, plain, nil, []string{"this orchd orchd a (id-a) []", "agent b []"}, false},
		{"an orchd, nothing steered yet", root, orchd, nil, []string{"this orchd orchd a (id-a) []", "orchd b []"}, true},
		{"an orchd and two receipts", root, orchd, []delegation.Event{receipt(1, "a", "b", "C"), receipt(2, "a", "b", "C")},
			[]string{"this orchd orchd a (id-a) [1 2]", "orchd b [1 2]", "agent below C [1 2]"}, false},
		{"an orchd and its lineage", withLineage, orchd, nil,
			[]string{"this orchd orchd a (id-a) []", "orchd b []", "orchd below orchd d (d) []", "agent below Leaf (leaf) []"}, false},
		{"a lineage and a receipt", withLineage, orchd, []delegation.Event{receipt(1, "a", "b", "D", "Leaf")},
			[]string{"this orchd orchd a (id-a) [1]", "orchd b [1]", "orchd below orchd d (d) [1]", "agent below Leaf (leaf) [1]"}, false},
		{"a lineage cut at its bounds", cut, orchd, nil,
			[]string{"this orchd orchd a (id-a) []", "orchd b []", "orchd below orchd d (d) []", "hops not shown … []"}, false},
		{"a middle hop", middle, plain, nil, []string{"upstream orchd root (id-r) []", "this orchd id-a []", "agent b []"}, false},
		{"an agent gone from the registry", root, nil, nil, []string{"this orchd orchd a (id-a) []", "agent b []"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := newTree(tc.rec, tc.evs, false, tc.down)
			var got []string
			for _, h := range v.Hops {
				got = append(got, h.Role+" "+h.Name+" "+fmt.Sprint(h.Seqs))
			}
			if !slices.Equal(got, tc.want) || v.BelowUnknown != tc.belowUnknown {
				t.Errorf("hops = %q (below unknown %v), want %q (%v)", got, v.BelowUnknown, tc.want, tc.belowUnknown)
			}
			if len(v.Receipts) != len(tc.evs) {
				t.Errorf("%d receipts, want %d", len(v.Receipts), len(tc.evs))
			}
		})
	}
}

func TestNewTree_ScriptFollowsOnFromTheLastEventShown(t *testing.T) {
	evs := func(seqs ...int64) []delegation.Event {
		var out []delegation.Event
		for _, s := range seqs {
			out = append(out, delegation.Event{Seq: s, Kind: "state"})
		}
		return out
	}
	for _, tc := range []struct {
		name      string
		lastEvent int64 // the record's, read before the events
		evs       []delegation.Event
		want      int64
	}{
		{"no events yet", 0, nil, 0},
		{"every event shown", 3, evs(1, 2, 3), 3},
		{"more events than the page shows", 5, evs(1, 2, 3), 3},
		{"events newer than the record", 2, evs(1, 2, 3, 4), 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := newTree(delegation.Record{LastEvent: tc.lastEvent}, tc.evs, false, nil).Last; got != tc.want {
				t.Errorf("Last = %d, want %d", got, tc.want)
			}
		})
	}
}

func TestFlash_RoundTripsAControlsOutcome(t *testing.T) {
	c := &Console{flashKey: []byte("a key of the test's")}
	for _, tc := range []struct {
		name string
		ans  controlAnswer
		want flash
	}{
		{"a receipt", controlAnswer{Action: "steer", Receipt: &steering.Receipt{Hops: []steering.Hop{{Agent: "a", Seq: 1}, {Agent: "C", Seq: 4}}}},
			flash{Action: "steer", Hops: []string{"a #1", "C #4"}}},
		{"a state", controlAnswer{Action: "cancel", State: "TASK_STATE_CANCELED"}, flash{Action: "cancel", State: "TASK_STATE_CANCELED"}},
		{"a refusal", controlAnswer{Action: "interrupt", Error: "hop C does not advertise the interruptible mode"},
			flash{Action: "interrupt", Error: "hop C does not advertise the interruptible mode"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q, err := url.ParseQuery(c.flashQuery("d-1", tc.ans).Encode())
			if err != nil {
				t.Fatal(err)
			}
			got := c.flashFrom("d-1", q)
			if got == nil {
				t.Fatalf("no flash, want %+v", tc.want)
			}
			if diff := cmp.Diff(tc.want, *got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("flash (-want +got):\n%s", diff)
			}
		})
	}
	if f := c.flashFrom("d-1", c.flashQuery("d-1", controlAnswer{Action: "reboot"})); f != nil {
		t.Errorf("an unknown action shows %+v", f)
	}
}

// TestFlash_ShowsOnlyWhatTheConsoleSigned: the tree page's outcome comes
// from its query, which a link from anywhere can set; only an outcome the
// console signed, for that delegation, unchanged, is shown.
func TestFlash_ShowsOnlyWhatTheConsoleSigned(t *testing.T) {
	c := &Console{flashKey: []byte("a key of the test's")}
	signed := c.flashQuery("d-1", controlAnswer{Action: "steer", Error: "not WORKING"})
	tampered := url.Values{}
	for k, v := range signed {
		tampered[k] = v
	}
	tampered.Set("error", "your session expired: log in again at https://evil.example")
	extraHop := url.Values{}
	for k, v := range signed {
		extraHop[k] = v
	}
	extraHop.Add("hop", "call +1 555 0100 #1")
	for _, tc := range []struct {
		name string
		id   string
		q    url.Values
	}{
		{"unsigned", "d-1", url.Values{"done": {"steer"}, "error": {"your session expired: log in again at https://evil.example"}}},
		{"a bad signature", "d-1", url.Values{"done": {"steer"}, "error": {"x"}, "sig": {"AAAA"}}},
		{"a signature that is not base64", "d-1", url.Values{"done": {"steer"}, "sig": {"%%%"}}},
		{"changed text", "d-1", tampered},
		{"a hop added", "d-1", extraHop},
		{"another delegation's", "d-2", signed},
		{"another console's", "d-1", (&Console{flashKey: []byte("another key")}).flashQuery("d-1", controlAnswer{Action: "steer", Error: "evil"})},
	} {
		if f := c.flashFrom(tc.id, tc.q); f != nil {
			t.Errorf("%s: shows %+v", tc.name, f)
		}
	}
	if f := c.flashFrom("d-1", signed); f == nil || f.Error != "not WORKING" {
		t.Errorf("the signed outcome shows %+v", f)
	}
}
