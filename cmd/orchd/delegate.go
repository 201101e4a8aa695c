package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/spf13/cobra"

	"github.com/orchd/orchd/delegation"
	"github.com/orchd/orchd/httpapi"
)

// serverFlag adds --server to a command that talks to a daemon.
func serverFlag(cmd *cobra.Command, base *string) {
	*base = defaultServer
	cmd.Flags().Var((*serverURL)(base), "server", "orchd daemon to talk to")
}

// serverURL is the value of --server: a daemon's http or https base URL.
// It is checked when the flag is parsed, so a URL written without its
// scheme is a usage error with the URL it probably means.
type serverURL string

// String returns the URL.
func (s *serverURL) String() string { return string(*s) }

// Type names the flag's type in help.
func (s *serverURL) Type() string { return "URL" }

// Set accepts an http or https URL with a host.
func (s *serverURL) Set(v string) error {
	if u, err := url.Parse(v); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		like := defaultServer
		if !strings.Contains(v, "://") {
			like = "http://" + v
		}
		return fmt.Errorf("an http or https URL such as %q", like)
	}
	*s = serverURL(v)
	return nil
}

// serverArg is the --server argument a command printed for the person to
// run next needs to reach the same daemon: none for the default one.
func (c *apiClient) serverArg() string {
	if c.base == defaultServer {
		return ""
	}
	return " --server " + c.base
}

func newDelegateCmd() *cobra.Command {
	var (
		server string
		req    delegation.Request
		detach bool
		output outputFormat
	)
	cmd := &cobra.Command{
		Use:   `delegate [--skill S] [--agent ID] [--require CAP]... "text"`,
		Short: "Delegate work through a running orchd and follow it",
		Long: `Ask a running orchd to delegate the text: it prints the decision (the chosen
agent, and every refused candidate with its reasons), then follows the
delegation's events live until it ends or waits for input.

The work runs in the daemon, not in this command: Ctrl-C stops following
and leaves it running (the command says how to follow it again with
'orchd tasks follow ID' or cancel it with 'orchd tasks cancel ID'), and
--detach returns right after the decision.

Exits 0 when the work completed or waits for input, 3 when orchd refused
it (no agent may take it; nothing was sent), and 1 when it failed, was
rejected or canceled, or following it stopped.`,
		Example: `  orchd delegate --skill research "find papers on A2A"
  orchd delegate --skill research --require steerable --detach "survey 2025"
  orchd delegate --agent worker -o json "summarise the report"`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			req.Text = args[0]
			c := newAPIClient(server)
			out := cmd.OutOrStdout()
			var rec delegation.Record
			err := c.do(cmd.Context(), "POST", "/v1/delegations", req, &rec)
			var ae *apiError
			if errors.As(err, &ae) && ae.body.Error.Code == "refused" {
				return refusal(out, ae.body, req.Skill, output)
			}
			if err != nil {
				return err
			}
			if output == "json" {
				return printJSON(out, rec)
			}
			printDecision(out, rec)
			if detach {
				fmt.Fprintf(cmd.ErrOrStderr(), "delegation %s goes on in the daemon; follow it with 'orchd tasks follow%s %s'\n", rec.ID, c.serverArg(), rec.ID)
				return nil
			}
			return followDelegation(cmd, c, rec.ID, &followed{from: 1, state: rec.State}, output)
		},
	}
	serverFlag(cmd, &server)
	cmd.Flags().StringVar(&req.Skill, "skill", "", "skill id or tag to route by")
	cmd.Flags().StringVar(&req.Agent, "agent", "", "registered agent id to pin the work to")
	cmd.Flags().StringArrayVar(&req.Requires, "require", nil, "capability the agent (and every agent after it) must have (repeatable)")
	cmd.Flags().StringVar(&req.Protocol, "protocol", "", `A2A version constraint, e.g. ">= 1.0"`)
	cmd.Flags().BoolVar(&detach, "detach", false, "print the decision and return; the work goes on in the daemon")
	// Its former name, still taken; the deprecation notice cobra would
	// print goes to stdout, where scripts read JSON.
	cmd.Flags().BoolVar(&detach, "no-follow", false, "the former name of --detach")
	_ = cmd.Flags().MarkHidden("no-follow")
	outputFlag(cmd, &output)
	cmd.Flags().Lookup("output").Usage = "output format: text or json (json prints the delegation and does not follow)"
	return cmd
}

// exitFor turns a delegation's final state into the command's outcome.
func exitFor(w io.Writer, c *apiClient, id string, s a2a.TaskState) error {
	switch s {
	case a2a.TaskStateCompleted:
		return nil
	case a2a.TaskStateInputRequired, a2a.TaskStateAuthRequired:
		fmt.Fprintf(w, "delegation %s waits for input; answer it with 'orchd tasks send%s %s \"your answer\"'\n", id, c.serverArg(), id)
		return nil
	}
	how := "ended " + shortState(s)
	switch s {
	case a2a.TaskStateFailed:
		how = "failed"
	case a2a.TaskStateCanceled, a2a.TaskStateRejected:
		how = "was " + shortState(s)
	}
	return &exitError{code: exitFailure, err: fmt.Errorf("delegation %s %s", id, how)}
}

func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func printDecision(w io.Writer, rec delegation.Record) {
	fmt.Fprintf(w, "delegation %s → %s (task %s)\n", rec.ID, rec.Downstream.Agent, orNone(string(rec.Downstream.TaskID)))
	if rec.Decision == nil {
		return
	}
	for _, a := range rec.Decision.Attempts {
		if a.Error != "" {
			fmt.Fprintf(w, "  tried %s: %s\n", a.Agent, a.Error)
		}
	}
	printRefused(w, "  ", rec.Decision.Candidates)
}

// printRefused writes a line for every refused candidate, with its
// reasons.
func printRefused(w io.Writer, indent string, cands []delegation.Candidate) {
	for _, c := range cands {
		if !c.Allowed {
			fmt.Fprintf(w, "%srefused %s: %s\n", indent, c.Agent, strings.Join(c.Reasons, "; "))
		}
	}
}

// refusal prints a refused delegation's candidates (the error body with -o
// json) and returns the command's error: refused, saying once that no
// agent can take the work, naming the skill.
func refusal(w io.Writer, body httpapi.ErrorBody, skill string, output outputFormat) error {
	// Details are the decision when candidates were refused; a chain that
	// is a cycle, too deep or past its deadline has none.
	b, _ := json.Marshal(body.Error.Details)
	var d delegation.Decision
	_ = json.Unmarshal(b, &d)
	if output == "json" {
		if err := printJSON(w, body); err != nil {
			return err
		}
	} else {
		printRefused(w, "", d.Candidates)
	}
	msg := body.Error.Message
	if len(d.Candidates) > 0 {
		msg = (&delegation.RefusedError{Decision: &d, Skill: skill}).Summary()
	}
	return &exitError{code: exitRefused, err: errors.New("refused: " + msg)}
}

func printEvent(w io.Writer, ev delegation.Event) {
	line := fmt.Sprintf("[%d] %s", ev.Seq, shortState(ev.State))
	switch {
	case ev.Receipt != nil:
		// The caller's steer or interrupt, passed on: not the agent's
		// words, which follow as events of their own.
		line = fmt.Sprintf("[%d] %s", ev.Seq, ev.Kind)
		if ev.Message != nil {
			line += ": " + partsText(ev.Message.Parts)
		}
		line += " (accepted by " + receiptHops(*ev.Receipt) + ")"
	case ev.Containment != nil:
		line = fmt.Sprintf("[%d] %s: agent %s %s", ev.Seq, ev.Kind, ev.Containment.Agent, ev.Containment)
	case ev.Kind == "artifact" && ev.Artifact != nil && ev.Append:
		line = fmt.Sprintf("[%d] artifact %s (continued): %s", ev.Seq, ev.Artifact.ID, partsText(ev.Artifact.Parts))
	case ev.Kind == "artifact" && ev.Artifact != nil:
		line = fmt.Sprintf("[%d] artifact %s: %s", ev.Seq, ev.Artifact.ID, partsText(ev.Artifact.Parts))
	case ev.Message != nil:
		line += ": " + partsText(ev.Message.Parts)
	}
	if ev.Error != "" {
		line += " (" + ev.Error + ")"
	}
	if l := ev.Lineage; l != nil && len(l.Hops) > 0 {
		// The hops below reported news: each one's agent and state.
		below := make([]string, len(l.Hops))
		for i, h := range l.Hops {
			below[i] = h.Agent + " " + shortState(h.State)
		}
		line += " (below: " + strings.Join(below, " → ")
		if l.Truncated {
			line += " → …"
		}
		line += ")"
	}
	fmt.Fprintln(w, line)
}

func shortState(s a2a.TaskState) string {
	return strings.ToLower(strings.TrimPrefix(string(s), "TASK_STATE_"))
}

func partsText(parts a2a.ContentParts) string {
	var out []string
	for _, p := range parts {
		switch c := p.Content.(type) {
		case a2a.Text:
			out = append(out, string(c))
		default:
			b, _ := json.Marshal(p)
			out = append(out, string(b))
		}
	}
	return strings.Join(out, "")
}
