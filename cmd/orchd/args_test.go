package main

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/cobra"
)

// A wrong command line is told in a sentence naming the command and its
// help, and exits 2 with nothing on stdout.
func TestUsageErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"steer"}, "orchd steer needs 2 arguments, ID and TEXT; see 'orchd steer --help'"},
		{[]string{"steer", "a", "b", "c"}, "orchd steer takes 2 arguments, ID and TEXT, but was given 3; see 'orchd steer --help'"},
		{[]string{"interrupt"}, "orchd interrupt needs 1 or 2 arguments, ID and optionally TEXT; see 'orchd interrupt --help'"},
		{[]string{"tasks", "get"}, "orchd tasks get needs 1 argument, ID; see 'orchd tasks get --help'"},
		{[]string{"serve", "now"}, "orchd serve takes no arguments, but was given 1; see 'orchd serve --help'"},
		{[]string{"policy", "check"}, "orchd policy check needs at least 1 argument, FILE|DIR...; see 'orchd policy check --help'"},
		{[]string{"policy", "test", "p.yaml"}, "orchd policy test needs --cases, a case file or directory; see 'orchd policy test --help'"},
		{[]string{"config", "validate"}, "orchd config validate needs 1 argument, FILE; see 'orchd config validate --help'"},
		{[]string{"agents", "inspect"}, "orchd agents inspect needs 1 argument, URL; see 'orchd agents inspect --help'"},
		{[]string{"nosuch"}, `orchd has no command "nosuch"; see 'orchd --help'`},
		{[]string{"agents", "lsit"}, `orchd agents has no command "lsit" (did you mean "list"?); see 'orchd agents --help'`},
		{[]string{"help", "nosuch"}, `orchd has no command "nosuch"; see 'orchd --help'`},
		{[]string{"help", "agents", "lsit"}, `orchd agents has no command "lsit" (did you mean "list"?); see 'orchd agents --help'`},
		{[]string{"chat", "--help"}, `orchd has no command "chat"; see 'orchd --help'`},
		{[]string{"agents", "lsit", "-h"}, `orchd agents has no command "lsit" (did you mean "list"?); see 'orchd agents --help'`},
		{[]string{"tasks", "--server", "http://127.0.0.1:1", "nosuch", "--help"}, `orchd tasks has no command "nosuch"; see 'orchd tasks --help'`},
		{[]string{"tasks", "list", "--nope"}, "orchd tasks list has no flag --nope; see 'orchd tasks list --help'"},
		{[]string{"version", "-x"}, "orchd version has no flag -x; see 'orchd version --help'"},
		{[]string{"tasks", "list", "--limit", "ten"}, `--limit "ten": want a whole number; see 'orchd tasks list --help'`},
		{[]string{"tasks", "list", "--limit"}, "--limit needs a value; see 'orchd tasks list --help'"},
		{[]string{"version", "-o", "yaml"}, `--output "yaml": want text or json; see 'orchd version --help'`},
		{[]string{"config", "validate", "--log-level", "loud", "x.yaml"}, `--log-level "loud": want debug, info, warn or error`},
		{[]string{"agents", "inspect", "localhost:9001/x"}, `invalid agent URL "localhost:9001/x" has no scheme; did you mean "http://localhost:9001/x"?`},
	}
	for _, tt := range tests {
		code, out, errOut := orchd(t, t.Context(), tt.args...)
		if diff := cmp.Diff(result{exitUsage, "", "orchd: " + tt.want + "\n"}, result{code, out, errOut}); diff != "" {
			t.Errorf("orchd %s (-want +got):\n%s", strings.Join(tt.args, " "), diff)
		}
	}
}

// A command that only groups others, run alone, prints its help on
// stderr and exits 2.
func TestGroupAlone(t *testing.T) {
	t.Parallel()
	for _, group := range [][]string{nil, {"agents"}, {"policy"}, {"tasks"}, {"config"}} {
		code, out, errOut := orchd(t, t.Context(), group...)
		name := strings.TrimSpace("orchd " + strings.Join(group, " "))
		if code != exitUsage || out != "" {
			t.Errorf("%s: exit %d, stdout %q; want %d and nothing", name, code, out, exitUsage)
		}
		if m := missing(errOut, "Usage:\n", "orchd: "+name+" needs a command: "); m != nil {
			t.Errorf("%s: stderr lacks %q:\n%s", name, m, errOut)
		}
	}
	code, out, _ := orchd(t, t.Context(), "agents", "--help")
	if code != exitOK || !strings.Contains(out, "Available Commands:") {
		t.Errorf("agents --help: exit %d\n%s", code, out)
	}
}

// Every command's Use line names the arguments its Args validator takes,
// so the usage messages built from it are true, and every command has an
// example in its help.
func TestCommands_UseMatchesArgs(t *testing.T) {
	t.Parallel()
	root := newRootCmd(nil, nil)
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for _, sub := range c.Commands() {
			walk(sub)
		}
		if c.Name() == "help" || c.HasParent() && c.Parent().Name() == "completion" || c.Name() == "completion" {
			return
		}
		if c.Example == "" {
			t.Errorf("%s has no Example", c.CommandPath())
		}
		if c.Args == nil || c.HasSubCommands() {
			return
		}
		p := usePositional(c.Use)
		args := func(n int) []string { return make([]string, n) }
		nreq, nmax := len(p.required), len(p.required)+len(p.optional)
		if err := c.Args(c, args(nreq)); err != nil {
			t.Errorf("%s (Use %q) refuses %d arguments: %v", c.CommandPath(), c.Use, nreq, err)
		}
		if err := c.Args(c, args(nmax)); err != nil {
			t.Errorf("%s (Use %q) refuses %d arguments: %v", c.CommandPath(), c.Use, nmax, err)
		}
		if nreq > 0 && c.Args(c, args(nreq-1)) == nil {
			t.Errorf("%s (Use %q) takes %d arguments", c.CommandPath(), c.Use, nreq-1)
		}
		if !p.variadic && c.Args(c, args(nmax+1)) == nil {
			t.Errorf("%s (Use %q) takes %d arguments", c.CommandPath(), c.Use, nmax+1)
		}
	}
	walk(root)
}

func TestUsePositional(t *testing.T) {
	t.Parallel()
	tests := []struct {
		use  string
		want string // required | optional | variadic
	}{
		{`steer ID "text"`, "ID TEXT||false"},
		{`interrupt ID ["text"]`, "ID|TEXT|false"},
		{"check FILE|DIR...", "FILE|DIR...||true"},
		{"test FILE|DIR... --cases PATH", "FILE|DIR...||true"},
		{"list [--state S] [--limit N]", "||false"},
		{`delegate [--skill S] [--agent ID] [--require CAP]... "text"`, "TEXT||false"},
		{"add URL [--id ID]", "URL||false"},
		{"serve", "||false"},
	}
	for _, tt := range tests {
		p := usePositional(tt.use)
		got := strings.Join(p.required, " ") + "|" + strings.Join(p.optional, " ") + "|" + map[bool]string{true: "true", false: "false"}[p.variadic]
		if got != tt.want {
			t.Errorf("usePositional(%q) = %s, want %s", tt.use, got, tt.want)
		}
	}
}
