package main

import (
	"context"
	"encoding/json"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/orchd/orchd/delegation"
	"github.com/orchd/orchd/httpapi"
	"github.com/orchd/orchd/internal/testagent"
	"github.com/orchd/orchd/registry"
)

// TestAgentsContainCommands contains an agent of a running daemon whose
// work runs: the work is interrupted with a contained event, the agent is
// listed contained, a second contain and a release of an agent not
// contained change nothing and say so, and bad arguments are refused.
func TestAgentsContainCommands(t *testing.T) {
	t.Parallel()
	agent := testagent.Start(t, testagent.Options{Name: "Reporter", Skill: "report", Streaming: true, Steering: true}, testagent.Steerable())
	base := daemon(t, registry.Spec{ID: "reporter", URL: agent.URL})
	resp, err := http.Post(base+"/v1/delegations", "application/json", strings.NewReader(`{"text": "report", "agent": "reporter"}`))
	if err != nil {
		t.Fatal(err)
	}
	var rec delegation.Record
	err = json.NewDecoder(resp.Body).Decode(&rec)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusCreated {
		t.Fatalf("delegate: %d %v", resp.StatusCode, err)
	}
	waitTask(t, base, rec.ID, `working`)

	stamp := `\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ`
	steps := []struct {
		name string
		args []string
		code int
		out  *regexp.Regexp // on stdout
		err  string         // on stderr
	}{
		{"contain without a reason", []string{"agents", "contain", "reporter"}, exitUsage, nil, "--reason is required: 1 to 500 bytes"},
		{"contain with a long reason", []string{"agents", "contain", "reporter", "--reason", strings.Repeat("x", 501)}, exitUsage, nil, "--reason is required"},
		{"contain an unknown agent", []string{"agents", "contain", "nosuch", "--reason", "r"}, exitFailure, nil, "HTTP 404"},
		{"contain", []string{"agents", "contain", "reporter", "--reason", "leaks data"}, exitOK,
			regexp.MustCompile(`^contained reporter: contained by anonymous at ` + stamp + ` \(running work interrupted\): leaks data\n$`), ""},
		{"contain again", []string{"agents", "contain", "reporter", "--reason", "other", "--cancel"}, exitOK,
			regexp.MustCompile(`^reporter was already contained, unchanged: contained by anonymous at ` + stamp + ` \(running work interrupted\): leaks data\n$`), ""},
		{"list", []string{"agents", "list"}, exitOK, regexp.MustCompile(`(?m)^reporter +Reporter +contained +`), ""},
		{"get", []string{"agents", "get", "reporter"}, exitOK, regexp.MustCompile(`(?m)^contained +contained by anonymous at .*: leaks data$`), ""},
		{"delegate to it", []string{"delegate", "--agent", "reporter", "more"}, exitRefused,
			regexp.MustCompile(`(?m)^refused +reporter: contained by anonymous at .*: leaks data$`), "refused"},
	}
	for _, s := range steps {
		args := append(s.args, "--server", base)
		code, out, errOut := orchd(t, t.Context(), args...)
		if code != s.code {
			t.Errorf("%s: exit %d, want %d; stderr:\n%s", s.name, code, s.code, errOut)
		}
		if s.out == nil && out != "" || s.out != nil && !s.out.MatchString(out) {
			t.Errorf("%s: stdout does not match %v:\n%s", s.name, s.out, out)
		}
		if !strings.Contains(errOut, s.err) {
			t.Errorf("%s: stderr lacks %q:\n%s", s.name, s.err, errOut)
		}
	}
	waitTask(t, base, rec.ID, `input_required`)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	_, followed, followErr := orchd(t, ctx, "tasks", "follow", rec.ID, "--server", base)
	if !regexp.MustCompile(`(?m)^\[\d+\] contained: agent reporter contained by anonymous at ` + stamp + ` \(running work interrupted\): leaks data$`).MatchString(followed) {
		t.Errorf("tasks follow shows no contained event:\n%s%s", followed, followErr)
	}

	code, out, errOut := orchd(t, t.Context(), "agents", "release", "reporter", "-o", "json", "--server", base)
	var ans httpapi.ContainmentAnswer
	if err := json.Unmarshal([]byte(out), &ans); code != exitOK || err != nil || !ans.Changed || ans.Contained || ans.Containment == nil || ans.Containment.Reason != "leaks data" {
		t.Errorf("release -o json: exit %d, %v, %+v\n%s", code, err, ans, errOut)
	}
	if code, out, _ := orchd(t, t.Context(), "agents", "release", "reporter", "--server", base); code != exitOK || out != "reporter was not contained\n" {
		t.Errorf("release again: exit %d, %q", code, out)
	}
}
