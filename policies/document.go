package policies

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// document is one policy as written, before compilation.
type document struct {
	file        string
	line, col   int
	name        string
	kind        string // "" (or "delegation") or kindAuthorization
	description string
	defaultSet  bool
	defaultOp   string
	when        *source
	rules       []ruleDoc
}

// ruleDoc is one rule as written.
type ruleDoc struct {
	line, col  int
	name       string
	when       *source
	allow      *source
	deny       *source
	rank       *source
	reason     string
	reasonExpr *source
}

// source is a CEL expression with its place in the YAML, so compile errors
// inside it can be reported against the file.
type source struct {
	text      string
	line, col int
	style     yaml.Style
	// indent is the content indentation of a block scalar (| or >).
	indent int
}

// position maps a 1-based line and 0-based column inside the expression to
// a 1-based line and column in the file. Block literals (|) map exactly;
// quoted and plain scalars map exactly on their first line; folded text
// maps to where it starts.
func (s *source) position(line, col int) (int, int) {
	switch {
	case s.style&yaml.LiteralStyle != 0:
		return s.line + line, s.indent + col + 1
	case s.style&yaml.FoldedStyle != 0:
		return s.line + 1, s.indent + 1
	case line > 1:
		return s.line, s.col
	case s.style&(yaml.DoubleQuotedStyle|yaml.SingleQuotedStyle) != 0:
		return s.line, s.col + 1 + col
	}
	return s.line, s.col + col
}

// parseDocuments reads every YAML document of a policy file. Structural
// problems (unknown keys, wrong kinds, missing names) are collected as
// diagnostics; the documents that could be read are returned with them.
func parseDocuments(file string, data []byte) ([]*document, Diagnostics) {
	var diags Diagnostics
	lines := strings.Split(string(data), "\n")
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var docs []*document
	for {
		var root yaml.Node
		err := dec.Decode(&root)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			diags = append(diags, yamlDiagnostic(file, err))
			break
		}
		if len(root.Content) == 0 {
			continue
		}
		p := &docReader{file: file, lines: lines}
		if d := p.document(root.Content[0]); d != nil {
			docs = append(docs, d)
		}
		diags = append(diags, p.diags...)
	}
	if len(docs) == 0 && len(diags) == 0 {
		diags = append(diags, Diagnostic{File: file, Msg: "no policy in file"})
	}
	return docs, diags
}

// yamlDiagnostic turns a YAML syntax error ("yaml: line 3: ...") into a
// diagnostic.
func yamlDiagnostic(file string, err error) Diagnostic {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	var line int
	if n, _ := fmt.Sscanf(msg, "line %d:", &line); n == 1 {
		msg = strings.TrimSpace(msg[strings.Index(msg, ":")+1:])
	}
	return Diagnostic{File: file, Line: line, Msg: msg}
}

type docReader struct {
	file  string
	lines []string
	diags Diagnostics
}

func (p *docReader) errorf(n *yaml.Node, format string, args ...any) {
	p.diags = append(p.diags, Diagnostic{File: p.file, Line: n.Line, Col: n.Column, Msg: fmt.Sprintf(format, args...)})
}

// mapping walks a YAML mapping, calling fn for each known key and
// reporting unknown and repeated keys.
func (p *docReader) mapping(n *yaml.Node, what string, keys []string, fn func(key string, val *yaml.Node)) bool {
	if n.Kind != yaml.MappingNode {
		p.errorf(n, "%s must be a mapping", what)
		return false
	}
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		switch {
		case !slices.Contains(keys, k.Value):
			p.errorf(k, "unknown key %q in %s (want one of %s)", k.Value, what, strings.Join(keys, ", "))
		case seen[k.Value]:
			p.errorf(k, "key %q appears twice in %s", k.Value, what)
		default:
			seen[k.Value] = true
			fn(k.Value, v)
		}
	}
	return true
}

func (p *docReader) scalar(n *yaml.Node, what string) (string, bool) {
	if n.Kind != yaml.ScalarNode {
		p.errorf(n, "%s must be a string", what)
		return "", false
	}
	return n.Value, true
}

// expression reads a CEL expression scalar.
func (p *docReader) expression(n *yaml.Node, what string) *source {
	s, ok := p.scalar(n, what)
	if !ok {
		return nil
	}
	if n.Tag != "!!str" && n.Tag != "" {
		// `allow: true` is a YAML boolean; CEL reads its text the same.
		s = n.Value
	}
	src := &source{text: s, line: n.Line, col: n.Column, style: n.Style}
	if n.Style&(yaml.LiteralStyle|yaml.FoldedStyle) != 0 {
		src.indent = p.blockIndent(n.Line)
	}
	return src
}

// blockIndent returns the indentation of the first non-blank line after
// line (1-based), where a block scalar's content starts.
func (p *docReader) blockIndent(line int) int {
	for i := line; i < len(p.lines); i++ {
		l := p.lines[i]
		if strings.TrimSpace(l) == "" {
			continue
		}
		return len(l) - len(strings.TrimLeft(l, " "))
	}
	return 0
}

func (p *docReader) document(n *yaml.Node) *document {
	d := &document{file: p.file, line: n.Line, col: n.Column, kind: p.kind(n)}
	keys := []string{"policy", "kind", "description", "default", "when", "rules"}
	if d.kind == kindAuthorization {
		keys = authorizationKeys
	}
	ok := p.mapping(n, "a policy", keys, func(key string, v *yaml.Node) {
		switch key {
		case "kind":
			// read by p.kind
		case "policy":
			d.name, _ = p.scalar(v, "policy")
		case "description":
			d.description, _ = p.scalar(v, "description")
		case "default":
			if s, ok := p.scalar(v, "default"); ok {
				if s != "allow" && s != "deny" {
					p.errorf(v, "default must be allow or deny, not %q", s)
				}
				d.defaultSet, d.defaultOp = true, s
			}
		case "when":
			d.when = p.expression(v, "when")
		case "rules":
			if v.Kind != yaml.SequenceNode {
				p.errorf(v, "rules must be a list")
				return
			}
			for _, r := range v.Content {
				if rd, ok := p.rule(r); ok {
					d.rules = append(d.rules, rd)
				}
			}
		}
	})
	if !ok {
		return nil
	}
	if d.name == "" {
		p.errorf(n, "policy needs a name (policy: NAME)")
	}
	if !d.defaultSet {
		d.defaultOp = "deny"
	}
	if d.kind == kindAuthorization {
		d.rules = p.authorizationRules(d.rules)
	}
	return d
}

func (p *docReader) rule(n *yaml.Node) (ruleDoc, bool) {
	r := ruleDoc{line: n.Line, col: n.Column}
	ok := p.mapping(n, "a rule", []string{"name", "when", "allow", "deny", "rank", "reason", "reasonExpression"}, func(key string, v *yaml.Node) {
		switch key {
		case "name":
			r.name, _ = p.scalar(v, "name")
		case "when":
			r.when = p.expression(v, "when")
		case "allow":
			r.allow = p.expression(v, "allow")
		case "deny":
			r.deny = p.expression(v, "deny")
		case "rank":
			r.rank = p.expression(v, "rank")
		case "reason":
			r.reason, _ = p.scalar(v, "reason")
		case "reasonExpression":
			r.reasonExpr = p.expression(v, "reasonExpression")
		}
	})
	if !ok {
		return r, false
	}
	if r.name == "" {
		p.errorf(n, "rule needs a name")
	}
	kinds := 0
	for _, s := range []*source{r.allow, r.deny, r.rank} {
		if s != nil {
			kinds++
		}
	}
	if kinds != 1 {
		p.errorf(n, "rule %q needs exactly one of allow, deny or rank", r.name)
		return r, false
	}
	if r.reason != "" && r.reasonExpr != nil {
		p.errorf(n, "rule %q has both reason and reasonExpression; keep one", r.name)
	}
	if r.rank != nil && (r.reason != "" || r.reasonExpr != nil) {
		p.errorf(n, "rule %q ranks; reasons belong to allow and deny rules", r.name)
	}
	return r, true
}
