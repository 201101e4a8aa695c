package main

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/orchd/orchd/httpapi"
	"github.com/orchd/orchd/internal/testagent"
)

// The agents commands register, list, show, refresh and remove agents of
// a running daemon, in text and JSON, and say what went wrong with the
// exit code it calls for.
func TestAgentsCommands(t *testing.T) {
	t.Parallel()
	steerable := testagent.Start(t, testagent.Options{Name: "Reporter", Skill: "report", Streaming: true, Steering: true}, testagent.Steerable())
	plain := testagent.Start(t, testagent.Options{Name: "Plain", Skill: "plain"}, testagent.Work(time.Millisecond))
	base := daemon(t)

	steps := []struct {
		name string
		args []string
		code int
		out  *regexp.Regexp // on stdout
		err  string         // on stderr
	}{
		{"add with an id", []string{"agents", "add", steerable.URL, "--id", "reporter"}, exitOK,
			regexp.MustCompile(`(?m)^id +reporter\n^name +Reporter\n(.|\n)*^steering +interruptible yes, steerable yes$`), ""},
		{"add with the id from the card", []string{"agents", "add", plain.URL}, exitOK, regexp.MustCompile(`(?m)^name +Plain$`), ""},
		{"add twice", []string{"agents", "add", steerable.URL, "--id", "again"}, exitFailure, nil, "already registered"},
		{"add without a scheme", []string{"agents", "add", strings.TrimPrefix(steerable.URL, "http://")}, exitUsage, nil,
			`has no scheme; did you mean "` + steerable.URL + `"?`},
		{"list", []string{"agents", "list"}, exitOK,
			regexp.MustCompile(`^ID +NAME +HEALTH +STEERING +URL\n\S+ +Plain +healthy +none +` + regexp.QuoteMeta(plain.URL) + `\nreporter +Reporter +healthy +steerable, interruptible +` + regexp.QuoteMeta(steerable.URL) + `\n$`), ""},
		{"get", []string{"agents", "get", "reporter"}, exitOK, regexp.MustCompile(`(?m)^url +` + regexp.QuoteMeta(steerable.URL) + `$`), ""},
		{"refresh", []string{"agents", "refresh", "reporter"}, exitOK, regexp.MustCompile(`(?m)^cache +fetched `), ""},
		{"remove", []string{"agents", "remove", "reporter"}, exitOK, regexp.MustCompile(`^removed reporter\n$`), ""},
		{"get removed", []string{"agents", "get", "reporter"}, exitFailure, nil, `agent not found: "reporter" (HTTP 404)`},
		{"refresh removed", []string{"agents", "refresh", "reporter"}, exitFailure, nil, "HTTP 404"},
		{"remove removed", []string{"agents", "remove", "reporter"}, exitFailure, nil, "HTTP 404"},
		{"get without an id", []string{"agents", "get"}, exitUsage, nil, "orchd agents get needs 1 argument, ID; see 'orchd agents get --help'"},
		{"list -o yaml", []string{"agents", "list", "-o", "yaml"}, exitUsage, nil, `--output "yaml": want text or json`},
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

	code, out, errOut := orchd(t, t.Context(), "agents", "list", "-o", "json", "--server", base)
	var l httpapi.AgentList
	if err := json.Unmarshal([]byte(out), &l); code != exitOK || err != nil {
		t.Fatalf("list -o json: exit %d, %v\n%s%s", code, err, out, errOut)
	}
	type listed struct {
		Name, URL string
		Healthy   bool
	}
	var got []listed
	for _, a := range l.Agents {
		got = append(got, listed{a.Name, a.URL, a.Healthy})
	}
	if diff := cmp.Diff([]listed{{"Plain", plain.URL, true}}, got); diff != "" {
		t.Errorf("list -o json (-want +got):\n%s", diff)
	}
}

// A daemon that cannot be reached is a failure, not a usage error.
func TestAgentsList_NoDaemon(t *testing.T) {
	t.Parallel()
	code, out, errOut := orchd(t, t.Context(), "agents", "list", "--server", "http://127.0.0.1:1")
	if code != exitFailure || out != "" {
		t.Errorf("exit %d, stdout %q; want %d and nothing", code, out, exitFailure)
	}
	if !strings.Contains(errOut, "reach orchd at http://127.0.0.1:1") {
		t.Errorf("stderr %q does not say orchd could not be reached", errOut)
	}
}
