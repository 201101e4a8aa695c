package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/spf13/cobra"

	"github.com/orchd/orchd/delegation"
	"github.com/orchd/orchd/orchestrator"
)

// serverFlag adds --server to a command that talks to a daemon.
func serverFlag(cmd *cobra.Command, base *string) {
	cmd.Flags().StringVar(base, "server", "http://127.0.0.1:8080", "orchd daemon to talk to")
}

func newDelegateCmd() *cobra.Command {
	var (
		server   string
		req      delegation.Request
		noFollow bool
		output   string
	)
	cmd := &cobra.Command{
		Use:   `delegate [--skill S] [--agent ID] [--require CAP]... "text"`,
		Short: "Delegate work through a running orchd and follow it",
		Long: `Ask a running orchd to delegate the text: it prints the decision (the chosen
agent, and every refused candidate with its reasons), then follows the
delegation's events live until it ends or waits for input. Exits non-zero
when the work is refused, fails, is rejected or canceled.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if output != "text" && output != "json" {
				return fmt.Errorf("-o %q: want text or json", output)
			}
			req.Text = args[0]
			c := newAPIClient(server)
			out := cmd.OutOrStdout()
			var rec delegation.Record
			err := c.do(cmd.Context(), "POST", "/v1/delegations", req, &rec)
			var ae *apiError
			if errors.As(err, &ae) && ae.body.Error.Code == "refused" {
				printRefusal(out, ae.body)
				return &exitError{code: exitFailure, err: errors.New("no agent can take the work")}
			}
			if err != nil {
				return err
			}
			if output == "json" {
				return printJSON(out, rec)
			}
			printDecision(out, rec)
			if noFollow {
				return nil
			}
			final := rec.State
			err = c.follow(cmd.Context(), rec.ID, 0, func(ev delegation.Event) {
				printEvent(out, ev)
				final = ev.State
			})
			if err != nil {
				return err
			}
			return exitFor(cmd.ErrOrStderr(), rec.ID, final)
		},
	}
	serverFlag(cmd, &server)
	cmd.Flags().StringVar(&req.Skill, "skill", "", "skill id or tag to route by")
	cmd.Flags().StringVar(&req.Agent, "agent", "", "registered agent id to pin the work to")
	cmd.Flags().StringArrayVar(&req.Requires, "require", nil, "capability the agent (and every agent after it) must have (repeatable)")
	cmd.Flags().StringVar(&req.Protocol, "protocol", "", `A2A version constraint, e.g. ">= 1.0"`)
	cmd.Flags().BoolVar(&noFollow, "no-follow", false, "print the decision and return")
	cmd.Flags().StringVarP(&output, "output", "o", "text", "output format: text or json (json prints the delegation and does not follow)")
	return cmd
}

// exitFor turns a delegation's final state into the command's outcome.
func exitFor(w io.Writer, id string, s a2a.TaskState) error {
	switch s {
	case a2a.TaskStateCompleted:
		return nil
	case a2a.TaskStateInputRequired, a2a.TaskStateAuthRequired:
		fmt.Fprintf(w, "delegation %s waits for input: orchd tasks send %s \"your answer\"\n", id, id)
		return nil
	}
	return &exitError{code: exitFailure, err: fmt.Errorf("delegation %s ended %s", id, shortState(s))}
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
	for _, c := range rec.Decision.Candidates {
		if !c.Allowed {
			fmt.Fprintf(w, "  refused %s: %s\n", c.Agent, strings.Join(c.Reasons, "; "))
		}
	}
}

func printRefusal(w io.Writer, body orchestrator.ErrorBody) {
	fmt.Fprintln(w, "refused: no agent can take the work")
	b, _ := json.Marshal(body.Error.Details)
	var d delegation.Decision
	if json.Unmarshal(b, &d) != nil || len(d.Candidates) == 0 {
		fmt.Fprintln(w, "  "+body.Error.Message)
		return
	}
	for _, c := range d.Candidates {
		fmt.Fprintf(w, "  %s: %s\n", c.Agent, strings.Join(c.Reasons, "; "))
	}
}

func printEvent(w io.Writer, ev delegation.Event) {
	line := fmt.Sprintf("[%d] %s", ev.Seq, shortState(ev.State))
	switch {
	case ev.Kind == "artifact" && ev.Artifact != nil:
		line = fmt.Sprintf("[%d] artifact %s: %s", ev.Seq, ev.Artifact.ID, partsText(ev.Artifact.Parts))
	case ev.Message != nil:
		line += ": " + partsText(ev.Message.Parts)
	}
	if ev.Error != "" {
		line += " (" + ev.Error + ")"
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
