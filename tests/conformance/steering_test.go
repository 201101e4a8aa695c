package conformance

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/orchd/orchd/delegation"
	"github.com/orchd/orchd/httpapi"
	"github.com/orchd/orchd/internal/orchdtest"
	"github.com/orchd/orchd/internal/testagent"
	"github.com/orchd/orchd/internal/testwait"
	"github.com/orchd/orchd/registry"
	"github.com/orchd/orchd/steering"
)

type steeringTrace struct {
	Agents map[string]struct {
		Skill    string `json:"skill"`
		Steering bool   `json:"steering"`
	} `json:"agents"`
	Cases []struct {
		Name     string             `json:"name"`
		Delegate delegation.Request `json:"delegate"`
		Signals  []struct {
			Control   steering.Control `json:"control"`
			Text      string           `json:"text"`
			MessageID string           `json:"messageId"`
			Hops      []string         `json:"hops"`
			Duplicate bool             `json:"duplicate"`
			Error     string           `json:"error"`
		} `json:"signals"`
		State       a2a.TaskState       `json:"state"`
		Interrupted bool                `json:"interrupted"`
		Taken       map[string][]string `json:"taken"`
		Wire        map[string][]string `json:"wire"`
	} `json:"cases"`
}

func post(t *testing.T, url string, in, out any) (int, string) {
	t.Helper()
	b, _ := json.Marshal(in)
	resp, err := http.Post(url, "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var raw json.RawMessage
	_ = json.NewDecoder(resp.Body).Decode(&raw)
	if resp.StatusCode >= 300 {
		var e httpapi.ErrorBody
		_ = json.Unmarshal(raw, &e)
		return resp.StatusCode, e.Error.Message
	}
	if out != nil {
		_ = json.Unmarshal(raw, out)
	}
	return resp.StatusCode, ""
}

func TestSteering(t *testing.T) {
	raw, err := os.ReadFile("steering.json")
	if err != nil {
		t.Fatal(err)
	}
	var tr steeringTrace
	if err := json.Unmarshal(raw, &tr); err != nil {
		t.Fatal(err)
	}
	for _, tc := range tr.Cases {
		t.Run(tc.Name, func(t *testing.T) {
			agents := map[string]*testagent.Agent{}
			var specs []registry.Spec
			var skills []string
			for name, a := range tr.Agents {
				do := testagent.Hang()
				if a.Steering {
					do = testagent.Steerable()
				}
				agents[name] = testagent.Start(t, testagent.Options{Name: name, Skill: a.Skill, Streaming: true, Steering: a.Steering}, do)
				specs = append(specs, registry.Spec{ID: name, URL: agents[name].URL})
				skills = append(skills, a.Skill)
			}
			b := orchdtest.Node(t, "b", skills, specs...)
			a := orchdtest.Node(t, "a", skills, registry.Spec{ID: "b", URL: b})

			var rec delegation.Record
			if code, msg := post(t, a+"/v1/delegations", tc.Delegate, &rec); code != 201 {
				t.Fatalf("delegate: %d %s", code, msg)
			}
			waitState(t, a, &rec, a2a.TaskStateWorking)
			for _, sig := range tc.Signals {
				var r steering.Receipt
				body := map[string]any{"message": map[string]any{"messageId": sig.MessageID, "role": "ROLE_USER", "parts": []any{map[string]any{"text": sig.Text}}}}
				code, msg := post(t, a+"/v1/delegations/"+rec.ID+":"+string(sig.Control), body, &r)
				if sig.Error != "" {
					if code != http.StatusConflict || msg != sig.Error {
						t.Errorf("%s %q: %d %q, want 409 and the error %q", sig.Control, sig.Text, code, msg, sig.Error)
					}
					continue
				}
				var hops []string
				for _, h := range r.Hops {
					hops = append(hops, fmt.Sprintf("%s#%d", h.Agent, h.Seq))
				}
				if code != 200 {
					t.Errorf("%s %q: %d %s, want 200", sig.Control, sig.Text, code, msg)
					continue
				}
				type receipt struct {
					Hops      []string
					Duplicate bool
				}
				if diff := cmp.Diff(receipt{sig.Hops, sig.Duplicate}, receipt{hops, r.Duplicate}, cmpopts.EquateEmpty()); diff != "" {
					t.Errorf("%s %q: receipt (-want +got):\n%s", sig.Control, sig.Text, diff)
				}
			}
			var now delegation.Record
			if code, msg := getJSON(a+"/v1/delegations/"+rec.ID, &now); code != 200 {
				t.Fatalf("get: %d %s", code, msg)
			}
			if now.State != tc.State {
				t.Errorf("state %s, want %s", now.State, tc.State)
			}
			for name, ag := range agents {
				var taken []string
				sigs := ag.Signals()
				if n := len(tc.Taken[name]); n > 0 {
					sigs = ag.TookSignals(t, n) // a receipt comes as the signal is queued
				}
				for _, s := range sigs {
					taken = append(taken, testagent.Text(s.Message))
				}
				if !slices.Equal(taken, tc.Taken[name]) && (len(taken) > 0 || len(tc.Taken[name]) > 0) {
					t.Errorf("%s took %q, want %q", name, taken, tc.Taken[name])
				}
				if calls := ag.Calls(); !slices.Equal(calls, tc.Wire[name]) && (len(calls) > 0 || len(tc.Wire[name]) > 0) {
					t.Errorf("wire at %s: %v, want %v", name, calls, tc.Wire[name])
				}
			}
			if tc.Interrupted {
				if !interruptedEvent(t, a, rec.ID) {
					t.Error("no event marks the interrupt")
				}
			}
			post(t, a+"/v1/delegations/"+rec.ID+":cancel", nil, nil)
		})
	}
}

// getJSON reads url into out, returning the status and any decode error.
func getJSON(url string, out any) (int, string) {
	resp, err := http.Get(url)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return resp.StatusCode, err.Error()
	}
	return resp.StatusCode, ""
}

// waitState polls the delegation at the daemon at base until it reaches
// state, leaving the latest record in rec.
func waitState(t *testing.T, base string, rec *delegation.Record, state a2a.TaskState) {
	t.Helper()
	testwait.Succeeds(t, 10*time.Second, "delegation "+rec.ID+" "+string(state), func() error {
		if rec.State == state {
			return nil
		}
		if code, msg := getJSON(base+"/v1/delegations/"+rec.ID, rec); code != 200 {
			t.Fatalf("get %s: %d %s", rec.ID, code, msg)
		}
		if rec.State != state {
			return fmt.Errorf("it is %s", rec.State)
		}
		return nil
	})
}

// interruptedEvent follows the delegation's server-sent events at the
// daemon at base and reports whether one marks the task interrupted.
func interruptedEvent(t *testing.T, base, id string) bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", base+"/v1/delegations/"+id+"/events", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var ev delegation.Event
		if err := json.Unmarshal([]byte(data), &ev); err != nil {
			t.Fatalf("event %s: %v", data, err)
		}
		if ev.State == a2a.TaskStateInputRequired && ev.Metadata[steering.InterruptedKey] == true {
			return true
		}
	}
	return false
}
