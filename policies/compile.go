package policies

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/cost"
	"cel.dev/cel-go/common/types"
	"go.yaml.in/yaml/v3"
)

// Defaults for [Options] fields left at zero.
const (
	DefaultCostLimit = 100_000
	DefaultTimeout   = 50 * time.Millisecond
)

// Options bound policy evaluation. The zero value selects the defaults.
type Options struct {
	// CostLimit bounds the CEL cost of one expression's evaluation; an
	// expression that exceeds it denies the candidate. Default 100,000.
	CostLimit uint64
	// Timeout bounds one Evaluate call over all candidates; candidates not
	// decided by then are denied. Default 50ms.
	Timeout time.Duration
}

func (o Options) withDefaults() Options {
	if o.CostLimit == 0 {
		o.CostLimit = DefaultCostLimit
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	return o
}

// File is a policy file's name and contents.
type File struct {
	// Path names the file in diagnostics.
	Path string
	// Data is the file's contents.
	Data []byte
}

// ReadFiles reads policy files. A directory contributes the *.yaml and
// *.yml files under it, at any depth, sorted by path, except case files
// (a top-level cases: key; they sit beside their policies for
// RunCases) and what is under directories whose names begin with "."
// (Kubernetes keeps a mounted ConfigMap's versions in such directories).
// Symbolic links to directories are not followed. A file named in paths is
// always read.
func ReadFiles(paths []string) ([]File, error) {
	files, err := readFiles(paths, false)
	if err != nil {
		return nil, fmt.Errorf("read policies: %w", err)
	}
	return files, nil
}

// readFiles reads the files named in paths and, under the directories
// among them, the YAML files that are case files when cases is true, or
// policy files when it is false.
func readFiles(paths []string, cases bool) ([]File, error) {
	var files []File
	for _, p := range paths {
		info, err := os.Stat(p)
		if err != nil {
			return nil, err
		}
		if !info.IsDir() {
			b, err := os.ReadFile(p)
			if err != nil {
				return nil, err
			}
			files = append(files, File{Path: p, Data: b})
			continue
		}
		err = filepath.WalkDir(p, func(path string, d fs.DirEntry, err error) error {
			switch {
			case err != nil:
				return err
			case d.IsDir() && path != p && strings.HasPrefix(d.Name(), "."):
				return filepath.SkipDir
			case d.IsDir():
				return nil
			}
			if ext := filepath.Ext(path); ext != ".yaml" && ext != ".yml" {
				return nil
			}
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			if isCaseFile(b) == cases {
				files = append(files, File{Path: path, Data: b})
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return files, nil
}

// isCaseFile reports whether data's first YAML document is a mapping with
// a cases key, as a file of policy test cases is. A file without the word
// is not parsed: the engine reads the policy files at every check for a
// change (Watch).
func isCaseFile(data []byte) bool {
	var doc yaml.Node
	if !bytes.Contains(data, []byte("cases")) || yaml.Unmarshal(data, &doc) != nil || len(doc.Content) == 0 || doc.Content[0].Kind != yaml.MappingNode {
		return false
	}
	m := doc.Content[0].Content
	for i := 0; i < len(m); i += 2 {
		if m[i].Value == "cases" {
			return true
		}
	}
	return false
}

// Set is a compiled, immutable set of policies, safe for concurrent use.
type Set struct {
	policies []*policy
	// requestPrograms are the programs that do not read agent; they are
	// evaluated once per request.
	requestPrograms []*program
	nResults        int
	digest          string
	files           []string
	opts            Options
	adapter         types.Adapter
	// agents caches candidates wrapped as CEL values by adapter.
	agents *agentCache
	// tracked is true when some program runs with cost tracking, and so
	// needs a context to interrupt it.
	tracked bool
	// readsNow is true when some program refers to now.
	readsNow bool
	// authz holds the authorization policies.
	authz authzSet
}

type policy struct {
	name, file   string
	defaultAllow bool
	// defaultReason explains the default's decision.
	defaultReason string
	when          *program
	rules         []*rule
}

type ruleKind int

const (
	kindAllow ruleKind = iota
	kindDeny
	kindRank
)

var ruleKindNames = [...]string{kindAllow: "allow", kindDeny: "deny", kindRank: "rank"}

func (k ruleKind) String() string { return ruleKindNames[k] }

type rule struct {
	name       string
	kind       ruleKind
	when       *program
	body       *program
	reason     string
	reasonExpr *program
}

// program is one compiled expression.
type program struct {
	prg cel.Program
	src string
	// perRequest is true when the expression does not read agent, so one
	// evaluation serves every candidate; slot is its index in
	// Set.requestPrograms.
	perRequest bool
	slot       int
	// tracked is true when the expression's worst-case cost is large or
	// unbounded, so it runs with cost tracking and can be interrupted.
	tracked bool
}

// Digest identifies the set by the content of its files.
func (s *Set) Digest() string { return s.digest }

// Files lists the files the set was compiled from.
func (s *Set) Files() []string { return slices.Clone(s.files) }

// Policies returns the names of the set's policies, in evaluation order.
func (s *Set) Policies() []string {
	out := make([]string, len(s.policies))
	for i, p := range s.policies {
		out[i] = p.name
	}
	return out
}

// Rules counts the set's rules.
func (s *Set) Rules() int {
	n := 0
	for _, p := range s.policies {
		n += len(p.rules)
	}
	return n
}

// Compile parses, type-checks and compiles policy files. It reports every
// problem it finds, not only the first, as [Diagnostics] sorted by
// position; nothing is returned unless every file compiles.
func Compile(files []File, opts Options) (*Set, error) {
	opts = opts.withDefaults()
	env, err := newEnv()
	if err != nil {
		return nil, fmt.Errorf("policy environment: %w", err)
	}
	authzEnv, err := newAuthzEnv()
	if err != nil {
		return nil, fmt.Errorf("authorization policy environment: %w", err)
	}
	c := &compiler{env: env, authzEnv: authzEnv, opts: opts, set: &Set{opts: opts, adapter: env.CELTypeAdapter(), agents: newAgentCache()}}
	names := map[string]*document{}
	for _, f := range files {
		c.set.files = append(c.set.files, f.Path)
		docs, diags := parseDocuments(f.Path, f.Data)
		c.diags = append(c.diags, diags...)
		for _, d := range docs {
			if prev, ok := names[d.name]; ok && d.name != "" {
				c.diags = append(c.diags, Diagnostic{File: d.file, Line: d.line, Col: d.col,
					Msg: fmt.Sprintf("policy %q is also defined at %s:%d", d.name, prev.file, prev.line)})
				continue
			}
			names[d.name] = d
			if d.kind == kindAuthorization {
				c.authorization(d)
			} else {
				c.policy(d)
			}
		}
	}
	c.defaultAuthorization(names)
	if len(c.diags) > 0 {
		c.diags.sort()
		return nil, c.diags
	}
	c.set.digest = digestFiles(files)
	return c.set, nil
}

// digestFiles identifies a list of files by their names and contents.
func digestFiles(files []File) string {
	h := sha256.New()
	for _, f := range files {
		fmt.Fprintf(h, "%s\x00%d\x00", f.Path, len(f.Data))
		h.Write(f.Data)
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

type compiler struct {
	env      *cel.Env
	authzEnv *cel.Env
	opts     Options
	set      *Set
	diags    Diagnostics
}

func (c *compiler) policy(d *document) {
	p := &policy{name: d.name, file: d.file, defaultAllow: d.defaultOp == "allow",
		defaultReason: fmt.Sprintf("policy %q: no rule allows it and the policy denies by default", d.name)}
	if p.defaultAllow {
		p.defaultReason = fmt.Sprintf("policy %q allows by default", d.name)
	}
	if d.when != nil {
		p.when = c.expr(d.file, d.when, "when", cel.BoolType)
	}
	ruleNames := map[string]bool{}
	for _, rd := range d.rules {
		if ruleNames[rd.name] {
			c.diags = append(c.diags, Diagnostic{File: d.file, Line: rd.line, Col: rd.col,
				Msg: fmt.Sprintf("rule %q appears twice in policy %q", rd.name, d.name)})
		}
		ruleNames[rd.name] = true
		r := &rule{name: rd.name, reason: rd.reason}
		if rd.when != nil {
			r.when = c.expr(d.file, rd.when, "when", cel.BoolType)
		}
		switch {
		case rd.allow != nil:
			r.kind, r.body = kindAllow, c.expr(d.file, rd.allow, "allow", cel.BoolType)
		case rd.deny != nil:
			r.kind, r.body = kindDeny, c.expr(d.file, rd.deny, "deny", cel.BoolType)
		default:
			r.kind, r.body = kindRank, c.expr(d.file, rd.rank, "rank", cel.IntType, cel.UintType, cel.DoubleType)
		}
		if rd.reasonExpr != nil {
			r.reasonExpr = c.expr(d.file, rd.reasonExpr, "reasonExpression", cel.StringType)
		}
		if r.reason == "" && r.reasonExpr == nil {
			r.reason = fmt.Sprintf("%s rule %q of policy %q", map[ruleKind]string{kindAllow: "allowed by", kindDeny: "denied by", kindRank: "ranked by"}[r.kind], r.name, d.name)
		}
		p.rules = append(p.rules, r)
	}
	c.set.policies = append(c.set.policies, p)
	c.set.nResults += len(p.rules) + 2
}

// check compiles one expression in env, reporting its errors against the
// file, and checks that its type is one of want (or dyn, checked when it
// runs). It returns nil when the expression is refused.
func (c *compiler) check(env *cel.Env, file string, src *source, what string, want []*cel.Type) *cel.Ast {
	ast, iss := env.Compile(src.text)
	if iss.Err() != nil {
		for _, e := range iss.Errors() {
			line, col := src.position(e.Location.Line(), e.Location.Column())
			c.diags = append(c.diags, Diagnostic{File: file, Line: line, Col: col, Msg: what + ": " + e.Message})
		}
		return nil
	}
	out := ast.OutputType()
	if !slices.ContainsFunc(want, out.IsExactType) && !out.IsExactType(types.DynType) {
		names := make([]string, len(want))
		for i, w := range want {
			names[i] = w.String()
		}
		line, col := src.position(1, 0)
		c.diags = append(c.diags, Diagnostic{File: file, Line: line, Col: col,
			Msg: fmt.Sprintf("%s must be %s, but %q is %s", what, strings.Join(names, " or "), src.text, out)})
		return nil
	}
	return ast
}

// expr compiles one delegation policy expression (see check).
func (c *compiler) expr(file string, src *source, what string, want ...*cel.Type) *program {
	ast := c.check(c.env, file, src, what, want)
	if ast == nil {
		return nil
	}
	p := &program{src: src.text, perRequest: !refersTo(ast, "agent")}
	c.set.readsNow = c.set.readsNow || refersTo(ast, "now")
	est, err := c.env.EstimateCost(ast, noSizeHints{})
	p.tracked = err != nil || est.Max > min(c.opts.CostLimit, untrackedCostCeiling)
	var opts []cel.ProgramOption
	if p.tracked {
		c.set.tracked = true
		opts = append(opts, cel.CostLimit(c.opts.CostLimit), cel.InterruptCheckFrequency(64))
	}
	p.prg, err = c.env.Program(ast, opts...)
	if err != nil {
		line, col := src.position(1, 0)
		c.diags = append(c.diags, Diagnostic{File: file, Line: line, Col: col, Msg: what + ": " + err.Error()})
		return nil
	}
	if p.perRequest {
		p.slot = len(c.set.requestPrograms)
		c.set.requestPrograms = append(c.set.requestPrograms, p)
	}
	return p
}

// refersTo reports whether a checked expression refers to the variable
// (directly or through a macro such as drifted, which reads agent and now).
func refersTo(a *cel.Ast, variable string) bool {
	for _, ref := range a.NativeRep().ReferenceMap() {
		if ref.Name == variable {
			return true
		}
	}
	return false
}

// untrackedCostCeiling is the worst-case cost up to which an expression
// runs without cost tracking or interruption: such an expression finishes
// in well under a microsecond, so neither limit could ever trip.
const untrackedCostCeiling = 1000

// noSizeHints gives the cost estimator no sizes, so any expression whose
// cost grows with its data (a comprehension over a list, say) estimates as
// unbounded and runs with cost tracking.
type noSizeHints struct{}

func (noSizeHints) EstimateSize(cost.AstNode) *cost.SizeEstimate { return nil }
func (noSizeHints) EstimateCallCost(string, string, *cost.AstNode, []cost.AstNode) *cost.CallEstimate {
	return nil
}
