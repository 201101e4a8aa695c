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
	cmd := &cobra.Command{Use: "policy", Short: "Check and test delegation and authorization policies"}
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
			fmt.Fprintf(cmd.OutOrStdout(), "authorization: %d policies (%s), %d rules\n",
				len(set.AuthorizationPolicies()), strings.Join(set.AuthorizationPolicies(), ", "), set.AuthorizationRules())
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
a directory of them). A delegation case gives a request, candidate agents with
their cards, and the decision expected for each agent and the expected winner.
An authorization case gives authorize: {caller, action, resource} and want:
allow or deny (and optionally decidedBy: policy/rule). Prints a line per case
like a test runner and exits non-zero on any failure.`,
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
				return &exitError{code: exitFailure, err: fmt.Errorf("%d of %d policy cases failed", failed, len(results))}
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
		if r.Authorization != nil {
			if verbose || !r.Passed() {
				printAuthorization(w, r.Authorization, verbose)
			}
			continue
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

// printAuthorization writes an authorization decision and, when verbose,
// every rule that matched or failed.
func printAuthorization(w io.Writer, d *policies.AuthzDecision, verbose bool) {
	verdict, by := "deny", "no rule"
	if d.Allowed {
		verdict = "allow"
	}
	if d.Rule != "" {
		by = d.Policy + "/" + d.Rule
	}
	fmt.Fprintf(w, "      %-6s by %s: %s\n", verdict, by, d.Reason)
	if !verbose {
		return
	}
	for _, rr := range d.Explain {
		name := rr.Policy
		if rr.Rule != "" {
			name += "/" + rr.Rule
		}
		switch {
		case rr.Error != "":
			fmt.Fprintf(w, "        %s %s failed: %s\n", rr.Kind, name, rr.Error)
		case rr.Matched:
			fmt.Fprintf(w, "        %s %s matched\n", rr.Kind, name)
		}
	}
}
