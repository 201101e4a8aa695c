package main

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/orchd/orchd/policies"
)

func newPolicyCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "policy", Short: "Check and test delegation policies"}
	cmd.AddCommand(newPolicyCheckCmd(), newPolicyTestCmd())
	return cmd
}

func newPolicyCheckCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "check FILE|DIR...",
		Short: "Parse and type-check policy files",
		Long: `Parse, type-check and compile policy files (a directory contributes its
*.yaml and *.yml files) and print every problem as file:line:col: message.
Exits non-zero when any file has a problem.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			set, err := compilePolicies(args)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "ok: %d policies, %d rules in %d files (%s)\n",
				len(set.Policies()), set.Rules(), len(set.Files()), set.Digest())
			return nil
		},
	}
}

// compilePolicies reads and compiles policy files; compile problems are
// printed one per line by the caller's error output.
func compilePolicies(paths []string) (*policies.Set, error) {
	files, err := policies.ReadFiles(paths)
	if err != nil {
		return nil, err
	}
	set, err := policies.Compile(files, policies.Options{})
	var diags policies.Diagnostics
	if errors.As(err, &diags) {
		return nil, fmt.Errorf("%d problems:\n%s", len(diags), diags.Error())
	}
	return set, err
}

func newPolicyTestCmd() *cobra.Command {
	var cases []string
	var verbose bool
	cmd := &cobra.Command{
		Use:   "test FILE|DIR... --cases PATH",
		Short: "Run policy test cases",
		Long: `Compile the policy files, then run the test cases in --cases (a case file or
a directory of them). Each case gives a request, candidate agents with their
cards, and the decision expected for each agent and the expected winner.
Prints a line per case like a test runner and exits non-zero on any failure.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(cases) == 0 {
				return errors.New("--cases is required")
			}
			set, err := compilePolicies(args)
			if err != nil {
				return err
			}
			files, err := policies.ReadCaseFiles(cases)
			if err != nil {
				return err
			}
			results, err := policies.RunCases(cmd.Context(), set, files)
			if err != nil {
				return err
			}
			if failed := printCaseResults(cmd.OutOrStdout(), results, verbose); failed > 0 {
				return &exitError{code: 1, err: fmt.Errorf("%d of %d policy cases failed", failed, len(results))}
			}
			return nil
		},
	}
	cmd.Flags().StringSliceVar(&cases, "cases", nil, "case file or directory (repeatable)")
	cmd.Flags().BoolVarP(&verbose, "verbose", "v", false, "explain every decision, not only failures")
	return cmd
}

// printCaseResults writes results like go test does and returns how many
// failed.
func printCaseResults(w io.Writer, results []policies.CaseResult, verbose bool) int {
	failed := 0
	for _, r := range results {
		name := r.File + ": " + r.Name
		status := "PASS"
		if !r.Passed() {
			status = "FAIL"
			failed++
		}
		fmt.Fprintf(w, "--- %s: %s (%s)\n", status, name, r.Elapsed.Round(time.Microsecond))
		for _, f := range r.Failures {
			fmt.Fprintf(w, "    %s\n", f)
		}
		if verbose || !r.Passed() {
			for _, d := range r.Result.Decisions {
				verdict := "deny"
				if d.Allowed {
					verdict = "allow"
				}
				fmt.Fprintf(w, "      %-6s %s rank %g", verdict, d.Agent, d.Rank)
				if len(d.Reasons) > 0 {
					fmt.Fprintf(w, ": %s", strings.Join(d.Reasons, "; "))
				}
				fmt.Fprintln(w)
			}
		}
	}
	if failed > 0 {
		fmt.Fprintln(w, "FAIL")
	} else {
		fmt.Fprintln(w, "PASS")
	}
	fmt.Fprintf(w, "%d passed, %d failed\n", len(results)-failed, failed)
	return failed
}
