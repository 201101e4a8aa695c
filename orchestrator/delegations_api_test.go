package orchestrator

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/google/go-cmp/cmp"

	"github.com/orchd/orchd/delegation"
	"github.com/orchd/orchd/httpapi"
	"github.com/orchd/orchd/internal/testagent"
	"github.com/orchd/orchd/internal/testcmp"
	"github.com/orchd/orchd/internal/testwait"
	"github.com/orchd/orchd/registry"
)

// readEventsTimeout bounds how long readEvents waits for a stream to end.
const readEventsTimeout = time.Minute

// readEvents reads a delegation's server-sent events until the stream
// ends, starting after lastID when it is not empty. A stream that has not
// ended within readEventsTimeout fails the test with what it carried.
func readEvents(t *testing.T, url, lastID string) []delegation.Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), readEventsTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("events: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	var out []delegation.Event
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	var id, kind string
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "id: "):
			id = strings.TrimPrefix(line, "id: ")
		case strings.HasPrefix(line, "event: "):
			kind = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			var ev delegation.Event
			if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &ev); err != nil {
				t.Fatal(err)
			}
			if ev.Kind != kind || id == "" {
				t.Errorf("event %s framed as id %q kind %q", line, id, kind)
			}
			out = append(out, ev)
		}
	}
	if ctx.Err() != nil {
		t.Fatalf("events of %s did not end within %s; they were %s", url, readEventsTimeout, kinds(out))
	}
	return out
}

func TestAPI_Delegations(t *testing.T) {
	t.Parallel()
	worker := testagent.Start(t, testagent.Options{Name: "Worker", Skill: "research", Streaming: true}, testagent.Work(30*time.Millisecond))
	asker := testagent.Start(t, testagent.Options{Name: "Asker", Skill: "ask"}, testagent.Ask())
	slow := testagent.Start(t, testagent.Options{Name: "Slow", Skill: "slow", Streaming: true}, testagent.Hang())
	cfg := loadDefaults(t)
	cfg.Delegation.PollInterval = Duration(20 * time.Millisecond)
	cfg.Agents = []registry.Spec{{ID: "worker", URL: worker.URL}, {ID: "asker", URL: asker.URL}, {ID: "slow", URL: slow.URL}}
	base := startDaemon(t, cfg)

	var rec delegation.Record
	code := call(t, "POST", base+"/v1/delegations", `{"text": "find papers", "skill": "research", "requires": ["streaming"]}`, &rec)
	if code != 201 || rec.ID == "" {
		t.Fatalf("POST /v1/delegations = %d %+v", code, rec)
	}
	if rec.Downstream.Agent != "worker" || rec.Decision.Chosen != "worker" {
		t.Errorf("POST /v1/delegations: chose %q, sent to %q; want worker", rec.Decision.Chosen, rec.Downstream.Agent)
	}
	evs := readEvents(t, base+"/v1/delegations/"+rec.ID+"/events", "")
	if len(evs) < 3 {
		t.Fatalf("events %s, want 3 or more", kinds(evs))
	}
	if first, last := evs[0], evs[len(evs)-1]; first.Seq != 1 || last.State != a2a.TaskStateCompleted {
		t.Fatalf("events %s: first seq %d, last %s; want 1 and COMPLETED", kinds(evs), first.Seq, last.State)
	}
	resumed := readEvents(t, base+"/v1/delegations/"+rec.ID+"/events", "2")
	if len(resumed) != len(evs)-2 || resumed[0].Seq != 3 {
		t.Errorf("resumed after 2: %d events starting at %d, want %d from 3", len(resumed), resumed[0].Seq, len(evs)-2)
	}
	code = call(t, "GET", base+"/v1/delegations/"+rec.ID, "", &rec)
	if diff := cmp.Diff(answer[outcome]{200, outcome{State: a2a.TaskStateCompleted, Artifacts: 1}}, answer[outcome]{code, outcomeOf(rec)},
		testcmp.Only[outcome]("State", "Artifacts")); diff != "" {
		t.Errorf("GET delegation (-want +got):\n%s", diff)
	}

	// Input required, then the caller's answer goes to the same task.
	if code := call(t, "POST", base+"/v1/delegations", `{"text": "history", "agent": "asker"}`, &rec); code != 201 {
		t.Fatalf("delegate to asker = %d", code)
	}
	waitFor(t, base, rec.ID, a2a.TaskStateInputRequired)
	var eb httpapi.ErrorBody
	if code := call(t, "POST", base+"/v1/delegations/"+rec.ID+"/messages", `{}`, &eb); code != 400 {
		t.Errorf("empty input = %d %+v", code, eb)
	}
	if code := call(t, "POST", base+"/v1/delegations/"+rec.ID+"/messages", `{"text": "1999"}`, &rec); code != 200 {
		t.Fatalf("input = %d %+v", code, rec)
	}
	done := waitFor(t, base, rec.ID, a2a.TaskStateCompleted)
	if done.Result == nil || testagent.Text(done.Result) != "answered: 1999" {
		t.Errorf("result = %+v", done.Result)
	}
	if code := call(t, "POST", base+"/v1/delegations/"+rec.ID+"/messages", `{"text": "again"}`, &eb); code != 409 || eb.Error.Code != "failed_precondition" {
		t.Errorf("input after the end = %d %+v", code, eb)
	}

	// Cancel reaches the agent.
	if code := call(t, "POST", base+"/v1/delegations", `{"text": "forever", "skill": "slow"}`, &rec); code != 201 {
		t.Fatalf("delegate to slow = %d", code)
	}
	waitFor(t, base, rec.ID, a2a.TaskStateWorking)
	if code := call(t, "POST", base+"/v1/delegations/"+rec.ID+":cancel", "", &rec); code != 200 || rec.State != a2a.TaskStateCanceled {
		t.Errorf("cancel = %d %s, want 200 CANCELED", code, rec.State)
	}
	if n := slow.Cancels(); n != 1 {
		t.Errorf("the agent saw %d cancels, want 1", n)
	}

	var list httpapi.DelegationList
	if code := call(t, "GET", base+"/v1/delegations?state=completed", "", &list); code != 200 || len(list.Delegations) != 2 {
		t.Errorf("list completed = %d, %d delegations", code, len(list.Delegations))
	}

	errorCases := []struct {
		name, method, path, body string
		status                   int
		code, msg                string
	}{
		{"refused", "POST", "/v1/delegations", `{"text": "x", "skill": "ask", "requires": ["steerable"]}`, 422, "refused", "asker: lacks required capability steerable"},
		{"no text", "POST", "/v1/delegations", `{"skill": "ask"}`, 400, "invalid_argument", "text or message is required"},
		{"bad field", "POST", "/v1/delegations", `{"txt": "x"}`, 400, "invalid_argument", `unknown field "txt"`},
		{"unknown agent", "POST", "/v1/delegations", `{"text": "x", "agent": "ghost"}`, 404, "not_found", `unknown agent: "ghost"`},
		{"unknown delegation", "GET", "/v1/delegations/nope", "", 404, "not_found", `delegation not found: "nope"`},
		{"unknown events", "GET", "/v1/delegations/nope/events", "", 404, "not_found", "nope"},
		{"bad state", "GET", "/v1/delegations?state=sleepy", "", 400, "invalid_argument", `state "sleepy"`},
		{"bad verb", "POST", "/v1/delegations/x:pause", "", 404, "not_found", ":cancel"},
	}
	for _, tc := range errorCases {
		var eb httpapi.ErrorBody
		code := call(t, tc.method, base+tc.path, tc.body, &eb)
		if diff := cmp.Diff(refusal{tc.status, tc.code}, refusalOf(code, eb)); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tc.name, diff)
		}
		if !strings.Contains(eb.Error.Message, tc.msg) {
			t.Errorf("%s: message %q, want it to say %q", tc.name, eb.Error.Message, tc.msg)
		}
	}
	// A refusal carries every candidate and its reasons.
	var refusal struct {
		Error struct {
			Details delegation.Decision `json:"details"`
		} `json:"error"`
	}
	call(t, "POST", base+"/v1/delegations", `{"text": "x", "skill": "ask", "requires": ["steerable"]}`, &refusal)
	if c := refusal.Error.Details.Candidates; len(c) != 1 {
		t.Errorf("refusal details = %+v, want one candidate", refusal.Error.Details)
	} else if c[0].Agent != "asker" || c[0].Allowed {
		t.Errorf("refusal's candidate %q, allowed %v; want asker, refused", c[0].Agent, c[0].Allowed)
	}
}

// outcome is what a test checks of an ended delegation's record: its
// state, how many artifacts it keeps and its result's text.
type outcome struct {
	State     a2a.TaskState
	Artifacts int
	Result    string
}

// outcomeOf is rec's outcome.
func outcomeOf(rec delegation.Record) outcome {
	o := outcome{State: rec.State, Artifacts: len(rec.Artifacts)}
	if rec.Result != nil {
		o.Result = testagent.Text(rec.Result)
	}
	return o
}

// whole is what a test checks of an ended delegation or task whose
// artifacts must arrive whole: its state and each artifact's part count.
type whole struct {
	State a2a.TaskState
	Parts []int
}

// wholeOf is rec's whole.
func wholeOf(rec delegation.Record) whole {
	return whole{State: rec.State, Parts: partsOf(rec.Artifacts)}
}

// partsOf counts each artifact's parts.
func partsOf(arts []*a2a.Artifact) []int {
	var n []int
	for _, a := range arts {
		n = append(n, len(a.Parts))
	}
	return n
}

// lastEventState is the state of the last of evs, "" when there are none.
func lastEventState(evs []delegation.Event) a2a.TaskState {
	if len(evs) == 0 {
		return ""
	}
	return evs[len(evs)-1].State
}

// waitFor polls GET /v1/delegations/{id} until the state is reached.
func waitFor(t testing.TB, base, id string, state a2a.TaskState) delegation.Record {
	t.Helper()
	var rec delegation.Record
	testwait.Succeeds(t, 10*time.Second, "delegation "+id+" "+string(state), func() error {
		rec = delegation.Record{}
		call(t, "GET", base+"/v1/delegations/"+id, "", &rec)
		if rec.State != state {
			return fmt.Errorf("it is %s", rec.State)
		}
		return nil
	})
	return rec
}
