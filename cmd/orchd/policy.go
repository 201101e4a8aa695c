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
	cmd := &cobra.Command{
		Use:   "policy",
		Short: "Check and test delegation and authorization policies",
		Example: `  orchd policy check examples/policies
  orchd policy test examples/policies/shallow-chains --cases examples/policies/shallow-chains`,
	}
	cmd.AddCommand(newPolicyCheckCmd(), newPolicyTestCmd())
	return cmd
}

func newPolicyCheckCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "check FILE|DIR...",
		Short: "Parse and type-check policy files",
		Long: `Parse, type-check and compile policy files, as the daemon loads them: a
directory contributes the *.yaml and *.yml files under it at any depth,
except case files (a top-level cases: key) and directories whose names
begin with ".". Prints every problem as file:line:col: message. Exits 1 when
any file has a problem, or when there is no policy file to read.`,
		Example: `  orchd policy check examples/policies
  orchd policy check /etc/orchd/policies/routing.yaml`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			set, err := compilePolicies(args)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "ok: %s, %s in %s (%s)\n",
				count(len(set.Policies()), "policy", "policies"), count(set.Rules(), "rule", "rules"),
				count(len(set.Files()), "file", "files"), set.Digest())
			fmt.Fprintf(cmd.OutOrStdout(), "authorization: %s (%s), %s\n",
				count(len(set.AuthorizationPolicies()), "policy", "policies"), strings.Join(set.AuthorizationPolicies(), ", "),
				count(set.AuthorizationRules(), "rule", "rules"))
			return nil
		},
	}
}

// compilePolicies reads and compiles policy files; compile problems are
// printed one per line by the caller's error output. Reading no policy
// file at all is an error: the paths are most likely wrong.
func compilePolicies(paths []string) (*policies.Set, error) {
	files, err := policies.ReadFiles(paths)
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("no policy files (*.yaml or *.yml) under %s", strings.Join(paths, ", "))
	}
	set, err := policies.Compile(files, policies.Options{})
	var diags policies.Diagnostics
	if errors.As(err, &diags) {
		return nil, fmt.Errorf("%s:\n%s", count(len(diags), "problem", "problems"), diags.Error())
	}
	return set, err
}

// count is "1 policy" or "N policies".
func count(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

func newPolicyTestCmd() *cobra.Command {
	var cases []string
	var verbose bool
	cmd := &cobra.Command{
		Use:   "test FILE|DIR... --cases PATH",
		Short: "Run policy test cases",
		Long: `Compile the policy files, then run the test cases in --cases (a case file, or
a directory: the case files under it, at any depth). A delegation case gives a request, candidate agents with
their cards, and the decision expected for each agent and the expected winner.
An authorization case gives authorize: {caller, action, resource} and want:
allow or deny (and optionally decidedBy: policy/rule). Prints a line per case
like a test runner and exits 1 on any failure, or when --cases holds no case
file.`,
		Example: `  orchd policy test examples/policies/shallow-chains/policy.yaml --cases examples/policies/shallow-chains/cases.yaml
  orchd policy test examples/policies/tenant-isolation --cases examples/policies/tenant-isolation -v`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(cases) == 0 {
				return usageError("%s needs --cases, a case file or directory; %s", cmd.CommandPath(), seeHelp(cmd))
			}
			set, err := compilePolicies(args)
			if err != nil {
				return err
			}
			files, err := policies.ReadCaseFiles(cases)
			if err != nil {
				return err
			}
			if len(files) == 0 {
				return fmt.Errorf("no case files (*.yaml or *.yml with a top-level cases: key) under %s", strings.Join(cases, ", "))
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
