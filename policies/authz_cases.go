package policies

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// runAuthzCase runs an authorization case: a case that cannot mean what it
// says (an unknown action, agents to choose from, a want that is not allow
// or deny) is an error rather than a pass, so a typo cannot pass as a
// denial.
func runAuthzCase(set *Set, c Case) (CaseResult, error) {
	a := c.Authorize
	switch {
	case len(c.Agents) > 0 || c.Winner != "" || c.Want.Agents != nil:
		return CaseResult{}, errors.New("an authorization case (authorize:) has no agents or winner; want is allow or deny")
	case c.Want.Decision != "allow" && c.Want.Decision != "deny":
		return CaseResult{}, fmt.Errorf("want: %q is neither allow nor deny", c.Want.Decision)
	case !knownAction(a.Action):
		return CaseResult{}, fmt.Errorf("authorize: unknown action %q (want one of %s)", a.Action, strings.Join(actions, ", "))
	case c.DecidedBy != "" && !strings.Contains(c.DecidedBy, "/"):
		return CaseResult{}, fmt.Errorf("decidedBy: %q is not policy/rule", c.DecidedBy)
	}
	start := time.Now()
	dec := set.ExplainAuthorization(AuthzInput{Caller: a.Caller, Action: a.Action, Resource: a.Resource, Now: c.Now})
	cr := CaseResult{Authorization: &dec, Elapsed: time.Since(start)}
	got := "deny"
	if dec.Allowed {
		got = "allow"
	}
	if got != c.Want.Decision {
		cr.Failures = append(cr.Failures, fmt.Sprintf("%s: want %s, got %s (%s)", a.Action, c.Want.Decision, got, dec.Reason))
	}
	if by := dec.Policy + "/" + dec.Rule; c.DecidedBy != "" && by != c.DecidedBy {
		if dec.Rule == "" {
			by = "no rule"
		}
		cr.Failures = append(cr.Failures, fmt.Sprintf("decidedBy: want %s, got %s", c.DecidedBy, by))
	}
	return cr, nil
}
