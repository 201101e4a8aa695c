package policies

import (
	"fmt"
	"reflect"
	"slices"
	"strings"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/ast"
	"cel.dev/cel-go/common/cost"
	"cel.dev/cel-go/common/operators"
	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/ext"
	"go.yaml.in/yaml/v3"
)

// kindAuthorization is the `kind` of an authorization policy document; a
// document without a kind (or with kind: delegation) is a delegation policy.
const (
	kindAuthorization = "authorization"
	kindDelegation    = "delegation"
)

// authorizationKeys are the keys of an authorization policy document: no
// default (a request no rule allows is denied) and no rank.
var authorizationKeys = []string{"policy", "kind", "description", "when", "rules"}

// resourceTypeName is the CEL type name of Resource, as NativeTypes
// derives it.
const resourceTypeName = "policies.Resource"

// newAuthzEnv returns the CEL environment authorization expressions
// compile in: the variables caller, action, resource and now, CEL's
// standard library and the strings and lists extensions.
func newAuthzEnv() (*cel.Env, error) {
	return cel.NewEnv(
		ext.NativeTypes(ext.ParseStructTag("json"), reflect.TypeFor[Caller](), reflect.TypeFor[Resource]()),
		ext.Strings(),
		ext.Lists(),
		cel.Variable("caller", cel.ObjectType(callerTypeName)),
		cel.Variable("action", cel.StringType),
		cel.Variable("resource", cel.ObjectType(resourceTypeName)),
		cel.Variable("now", cel.TimestampType),
	)
}

// kind reads a document's kind before its other keys, so they can be
// checked against it. Problems are reported; an unknown kind reads as a
// delegation policy so its other keys are still checked.
func (p *docReader) kind(n *yaml.Node) string {
	if n.Kind != yaml.MappingNode {
		return ""
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value != "kind" {
			continue
		}
		v := n.Content[i+1]
		s, ok := p.scalar(v, "kind")
		switch {
		case !ok:
		case s == kindAuthorization:
			return kindAuthorization
		case s != kindDelegation:
			p.errorf(v, "kind must be %s or %s, not %q", kindDelegation, kindAuthorization, s)
		}
		return ""
	}
	return ""
}

// authorizationRules reports and drops the rules an authorization policy
// cannot have.
func (p *docReader) authorizationRules(rules []ruleDoc) []ruleDoc {
	return slices.DeleteFunc(rules, func(r ruleDoc) bool {
		if r.rank != nil {
			p.diags = append(p.diags, Diagnostic{File: p.file, Line: r.line, Col: r.col,
				Msg: fmt.Sprintf("rule %q ranks; authorization rules allow or deny", r.name)})
			return true
		}
		return false
	})
}

// authzSet is a Set's compiled authorization policies.
type authzSet struct {
	policies []*authzPolicy
	// denies and allows hold, for each action (by its index in
	// actions), the rules of that kind that can match it, in the order
	// written. A rule whose expressions require `action` to be other
	// than the one asked for (action == "x" or action in [...] as a
	// conjunct) cannot match, so it is not run at all; that result is
	// the same as running it, since false && anything is false in CEL.
	denies, allows [][]*authzRule
	rules          int
	// builtin is false when the files replace the built-in default.
	builtin  bool
	tracked  bool
	readsNow bool
}

type authzPolicy struct {
	name string
	when *program
	// rules are the policy's rules as written, for explanations.
	rules []*authzRule
	index int
}

type authzRule struct {
	policy     *authzPolicy
	name       string
	deny       bool
	when, body *program
	reason     string
	reasonExpr *program
	// fallback is the reason when reasonExpr gives "".
	fallback string
}

// AuthorizationPolicies returns the names of the set's authorization
// policies, in evaluation order; the built-in default, unless the files
// replace it, comes last as [DefaultAuthorizationName].
func (s *Set) AuthorizationPolicies() []string {
	out := make([]string, len(s.authz.policies))
	for i, p := range s.authz.policies {
		out[i] = p.name
	}
	return out
}

// AuthorizationRules counts the set's authorization rules, the built-in
// default's included.
func (s *Set) AuthorizationRules() int { return s.authz.rules }

// authorization compiles one authorization policy document.
func (c *compiler) authorization(d *document) {
	p := &authzPolicy{name: d.name, index: len(c.set.authz.policies)}
	policyMask := allActions
	if d.when != nil {
		p.when, policyMask = c.authzExpr(d.file, d.when, "when", cel.BoolType)
	}
	seen := map[string]bool{}
	for _, rd := range d.rules {
		if seen[rd.name] {
			c.diags = append(c.diags, Diagnostic{File: d.file, Line: rd.line, Col: rd.col,
				Msg: fmt.Sprintf("rule %q appears twice in policy %q", rd.name, d.name)})
		}
		seen[rd.name] = true
		r := &authzRule{policy: p, name: rd.name, deny: rd.deny != nil, reason: rd.reason}
		whenMask, bodyMask := allActions, uint64(0)
		if rd.when != nil {
			r.when, whenMask = c.authzExpr(d.file, rd.when, "when", cel.BoolType)
		}
		if r.deny {
			r.body, bodyMask = c.authzExpr(d.file, rd.deny, "deny", cel.BoolType)
		} else {
			r.body, bodyMask = c.authzExpr(d.file, rd.allow, "allow", cel.BoolType)
		}
		if rd.reasonExpr != nil {
			r.reasonExpr, _ = c.authzExpr(d.file, rd.reasonExpr, "reasonExpression", cel.StringType)
		}
		verb := "allowed by"
		if r.deny {
			verb = "denied by"
		}
		r.fallback = fmt.Sprintf("%s rule %q of policy %q", verb, r.name, d.name)
		if r.reason == "" {
			r.reason = r.fallback
		}
		p.rules = append(p.rules, r)
		az := &c.set.authz
		if az.denies == nil {
			az.denies, az.allows = make([][]*authzRule, len(actions)), make([][]*authzRule, len(actions))
		}
		for i := range actions {
			if policyMask&whenMask&bodyMask&(1<<i) == 0 {
				continue
			}
			if r.deny {
				az.denies[i] = append(az.denies[i], r)
			} else {
				az.allows[i] = append(az.allows[i], r)
			}
		}
	}
	c.set.authz.policies = append(c.set.authz.policies, p)
	c.set.authz.rules += len(p.rules)
}

// defaultAuthorization adds the built-in default authorization policy
// after the files' policies, unless a file defines an authorization policy
// of the same name, which replaces it.
func (c *compiler) defaultAuthorization(names map[string]*document) {
	if d, ok := names[DefaultAuthorizationName]; ok {
		if d.kind != kindAuthorization {
			c.diags = append(c.diags, Diagnostic{File: d.file, Line: d.line, Col: d.col,
				Msg: fmt.Sprintf("policy %q is the built-in authorization policy's name; add kind: %s to replace it, or rename the policy", d.name, kindAuthorization)})
		}
		return
	}
	docs, diags := parseDocuments(defaultAuthorizationFile, []byte(DefaultAuthorizationPolicy))
	c.diags = append(c.diags, diags...)
	for _, d := range docs {
		c.authorization(d)
	}
	c.set.authz.builtin = true
}

// authzExpr compiles one authorization expression, reporting its errors
// against the file, checking its type is one of want (or dyn, checked when
// it runs), and checking that the action and resource kind it compares
// against are ones orchd knows. It returns the program and the actions
// for which the expression can be true (see actionMask).
func (c *compiler) authzExpr(file string, src *source, what string, want ...*cel.Type) (*program, uint64) {
	checked := c.check(c.authzEnv, file, src, what, want)
	if checked == nil {
		return nil, 0
	}
	if !c.knownLiterals(file, src, what, checked) {
		return nil, 0
	}
	p := &program{src: src.text}
	c.set.authz.readsNow = c.set.authz.readsNow || refersTo(checked, "now")
	// Authorize bounds the strings and roles it is given, so an expression
	// over them has a worst-case cost known now; only one that could
	// exceed the cost limit (one over claims, say) needs tracking. One
	// evaluation within the limit ends long before any timeout.
	est, err := c.authzEnv.EstimateCost(checked, authzSizes{})
	p.tracked = err != nil || est.Max > c.opts.CostLimit
	// OptOptimize folds constants, so `action in [...]` is a set lookup
	// rather than a list built at every evaluation.
	opts := []cel.ProgramOption{cel.EvalOptions(cel.OptOptimize)}
	if p.tracked {
		c.set.authz.tracked = true
		opts = append(opts, cel.CostLimit(c.opts.CostLimit), cel.InterruptCheckFrequency(64))
	}
	p.prg, err = c.authzEnv.Program(checked, opts...)
	if err != nil {
		line, col := src.position(1, 0)
		c.diags = append(c.diags, Diagnostic{File: file, Line: line, Col: col, Msg: what + ": " + err.Error()})
		return nil, 0
	}
	return p, actionMask(checked.NativeRep().Expr())
}

// knownLiterals reports string literals that `action` or `resource.kind`
// is compared with (==, != or in a list) and that name no action or
// resource kind: such a comparison could never hold, so a typo would
// silently never allow (or never deny).
func (c *compiler) knownLiterals(file string, src *source, what string, checked *cel.Ast) bool {
	native := checked.NativeRep()
	info := native.SourceInfo()
	ok := true
	report := func(lit ast.Expr, subject string, known []string) {
		s, isStr := lit.AsLiteral().(types.String)
		if !isStr || slices.Contains(known, string(s)) {
			return
		}
		loc := info.GetStartLocation(lit.ID())
		line, col := src.position(loc.Line(), loc.Column())
		c.diags = append(c.diags, Diagnostic{File: file, Line: line, Col: col,
			Msg: fmt.Sprintf("%s: unknown %s %q (want one of %s)", what, subject, string(s), strings.Join(known, ", "))})
		ok = false
	}
	// check reports lit when subj is action or resource.kind.
	check := func(subj, lit ast.Expr) {
		subject, known := comparedField(subj)
		if known == nil {
			return
		}
		switch lit.Kind() {
		case ast.LiteralKind:
			report(lit, subject, known)
		case ast.ListKind:
			for _, e := range lit.AsList().Elements() {
				if e.Kind() == ast.LiteralKind {
					report(e, subject, known)
				}
			}
		}
	}
	ast.PreOrderVisit(native.Expr(), ast.NewExprVisitor(func(e ast.Expr) {
		if e.Kind() != ast.CallKind {
			return
		}
		call := e.AsCall()
		args := call.Args()
		if len(args) != 2 {
			return
		}
		switch call.FunctionName() {
		case operators.Equals, operators.NotEquals:
			check(args[0], args[1])
			check(args[1], args[0])
		case operators.In:
			check(args[0], args[1])
		}
	}))
	return ok
}

// comparedField names the checked field e reads, with its known values:
// `action` or `resource.kind`. Anything else gives nil.
func comparedField(e ast.Expr) (string, []string) {
	switch e.Kind() {
	case ast.IdentKind:
		if e.AsIdent() == "action" {
			return "action", actions
		}
	case ast.SelectKind:
		sel := e.AsSelect()
		if op := sel.Operand(); !sel.IsTestOnly() && sel.FieldName() == "kind" && op.Kind() == ast.IdentKind && op.AsIdent() == "resource" {
			return "resource kind", resourceKinds
		}
	}
	return "", nil
}

// Bounds on the input Authorize decides; larger input is denied. They let
// the cost of every expression over caller, action and resource (but not
// claims) be bounded when it loads.
const (
	// AuthzMaxString is the longest string, in bytes, of the action, a
	// caller's principal, tenant, method, issuer or role, or a resource's
	// fields.
	AuthzMaxString = 4096
	// AuthzMaxRoles is the most roles a caller may have.
	AuthzMaxRoles = 256
)

// authzSizes gives the cost estimator the bounds Authorize enforces.
type authzSizes struct{}

func (authzSizes) EstimateSize(n cost.AstNode) *cost.SizeEstimate {
	switch strings.Join(n.Path(), ".") {
	case "action", "caller.principal", "caller.tenant", "caller.method", "caller.issuer", "caller.roles.@items",
		"resource.kind", "resource.id", "resource.owner", "resource.tenant", "resource.ownerMethod", "resource.ownerIssuer":
		return &cost.SizeEstimate{Min: 0, Max: AuthzMaxString}
	case "caller.roles":
		return &cost.SizeEstimate{Min: 0, Max: AuthzMaxRoles}
	}
	return nil
}

func (authzSizes) EstimateCallCost(string, string, *cost.AstNode, []cost.AstNode) *cost.CallEstimate {
	return nil
}

// allActions is the action mask of an expression that can be true for any
// action. (There are fewer than 64 actions; a test checks.)
const allActions = ^uint64(0)

// actionMask returns, as a bit per index in actions, the actions for which
// a boolean expression can be true: an expression requiring action == "x"
// or action in [...] (alone, or as an operand of && or of || whose every
// operand does) can only be true for those. Anything else can be true for
// any action.
func actionMask(e ast.Expr) uint64 {
	if e.Kind() != ast.CallKind {
		return allActions
	}
	call := e.AsCall()
	args := call.Args()
	if len(args) != 2 {
		return allActions
	}
	isAction := func(e ast.Expr) bool { return e.Kind() == ast.IdentKind && e.AsIdent() == "action" }
	bit := func(lit ast.Expr) uint64 {
		if lit.Kind() != ast.LiteralKind {
			return allActions
		}
		s, ok := lit.AsLiteral().(types.String)
		if !ok {
			return allActions
		}
		if i := slices.Index(actions, string(s)); i >= 0 {
			return 1 << i
		}
		return 0
	}
	switch call.FunctionName() {
	case operators.LogicalAnd:
		return actionMask(args[0]) & actionMask(args[1])
	case operators.LogicalOr:
		return actionMask(args[0]) | actionMask(args[1])
	case operators.Equals:
		switch {
		case isAction(args[0]):
			return bit(args[1])
		case isAction(args[1]):
			return bit(args[0])
		}
	case operators.In:
		if !isAction(args[0]) || args[1].Kind() != ast.ListKind {
			return allActions
		}
		mask := uint64(0)
		for _, el := range args[1].AsList().Elements() {
			mask |= bit(el)
		}
		return mask
	}
	return allActions
}
