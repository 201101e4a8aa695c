package policies

import (
	"fmt"
	"reflect"
	"slices"
	"strings"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common"
	"cel.dev/cel-go/common/ast"
	"cel.dev/cel-go/common/decls"
	"cel.dev/cel-go/common/operators"
	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
	"cel.dev/cel-go/common/types/traits"
	"cel.dev/cel-go/ext"
	"cel.dev/cel-go/parser"
	"github.com/hashicorp/go-version"

	"github.com/orchd/orchd/registry"
)

// CEL type names of the variables, as NativeTypes derives them from the Go
// types.
const (
	agentTypeName   = "registry.Agent"
	requestTypeName = "policies.Request"
	chainTypeName   = "policies.Chain"
	callerTypeName  = "policies.Caller"
)

var (
	agentType = cel.ObjectType(agentTypeName)
	// semverType carries the Comparer trait so CEL's own <, <=, > and >=
	// dispatch to semver.Compare.
	semverType = types.NewObjectType("semver", traits.ComparerType)
)

// newEnv returns the CEL environment policy expressions compile in: the
// variables agent, request, chain, caller and now, and orchd's functions.
func newEnv() (*cel.Env, error) {
	return cel.NewEnv(
		ext.NativeTypes(ext.ParseStructTag("json"),
			reflect.TypeFor[registry.Agent](), reflect.TypeFor[Request](),
			reflect.TypeFor[Chain](), reflect.TypeFor[Caller]()),
		ext.Strings(),
		ext.Lists(),
		cel.Variable("agent", agentType),
		cel.Variable("request", cel.ObjectType(requestTypeName)),
		cel.Variable("chain", cel.ObjectType(chainTypeName)),
		cel.Variable("caller", cel.ObjectType(callerTypeName)),
		cel.Variable("now", cel.TimestampType),
		cel.Macros(cel.ReceiverMacro("drifted", 1, expandDrifted)),
		agentMethod("speaks", cel.BoolType, func(ag *registry.Agent, constraint string) ref.Val {
			if strings.TrimSpace(constraint) == "" {
				return types.True
			}
			ok, err := ag.Compatible(constraint)
			if err != nil {
				return types.NewErrFromString(err.Error())
			}
			return types.Bool(ok)
		}),
		agentMethod("supports", cel.BoolType, func(ag *registry.Agent, name string) ref.Val {
			return types.Bool(ag.Supports(name))
		}),
		agentMethod("tier", cel.IntType, func(ag *registry.Agent, name string) ref.Val {
			t, _ := ag.Tier(name)
			return types.Int(t)
		}),
		agentMethod("hasExtension", cel.BoolType, func(ag *registry.Agent, uri string) ref.Val {
			return types.Bool(ag.HasExtension(uri))
		}),
		agentMethod("hasSkill", cel.BoolType, func(ag *registry.Agent, idOrTag string) ref.Val {
			for _, sk := range ag.Skills {
				if sk.ID == idOrTag || slices.Contains(sk.Tags, idOrTag) {
					return types.True
				}
			}
			return types.False
		}),
		// agent.signed() is true when the agent's card signature verified;
		// agent.signedBy(kid) when it verified with the key named kid.
		cel.Function("signed",
			cel.MemberOverload("agent_signed", []*cel.Type{agentType}, cel.BoolType,
				cel.UnaryBinding(func(a ref.Val) ref.Val {
					ag, err := agentOf(a)
					if err != nil {
						return types.NewErrFromString(err.Error())
					}
					return types.Bool(ag.Signature.Verified)
				}))),
		agentMethod("signedBy", cel.BoolType, func(ag *registry.Agent, kid string) ref.Val {
			return types.Bool(ag.Signature.Verified && ag.Signature.KeyID == kid)
		}),
		cel.Function("semver",
			cel.Overload("semver_string", []*cel.Type{cel.StringType}, semverType,
				cel.UnaryBinding(func(s ref.Val) ref.Val {
					v, err := version.NewVersion(string(s.(types.String)))
					if err != nil {
						return types.NewErrFromString(fmt.Sprintf("semver(%q): %v", string(s.(types.String)), err))
					}
					return semver{v}
				}))),
		semverComparison(operators.Less, "less_semver"),
		semverComparison(operators.LessEquals, "less_equals_semver"),
		semverComparison(operators.Greater, "greater_semver"),
		semverComparison(operators.GreaterEquals, "greater_equals_semver"),
		cel.Function("versions",
			cel.MemberOverload("agent_versions", []*cel.Type{agentType}, cel.ListType(cel.StringType),
				cel.UnaryBinding(func(a ref.Val) ref.Val {
					ag, err := agentOf(a)
					if err != nil {
						return types.NewErrFromString(err.Error())
					}
					return types.NewStringList(types.DefaultTypeAdapter, ag.Versions(""))
				}))),
	)
}

// agentMethod declares agent.name(string), implemented by impl on the
// unwrapped agent. The function checks its arguments' types itself, with
// the same outcome as cel-go's generated guard (an error or unknown
// argument propagates, any other mismatch is "no such overload"), and so
// skips the guard's more general check, which costs more than most
// implementations.
func agentMethod(name string, result *cel.Type, impl func(ag *registry.Agent, arg string) ref.Val) cel.EnvOption {
	return cel.Function(name, decls.DisableTypeGuards(true),
		cel.MemberOverload("agent_"+name+"_string", []*cel.Type{agentType, cel.StringType}, result,
			cel.BinaryBinding(func(a, arg ref.Val) ref.Val {
				s, isStr := arg.(types.String)
				if !isStr || a.Type().TypeName() != agentTypeName {
					return decls.MaybeNoSuchOverload(name, a, arg)
				}
				ag, err := agentOf(a)
				if err != nil {
					return types.NewErrFromString(err.Error())
				}
				return impl(ag, string(s))
			})))
}

// agentOf unwraps the agent a function was called on.
func agentOf(v ref.Val) (*registry.Agent, error) {
	switch a := v.Value().(type) {
	case *registry.Agent:
		if a.Profile != nil {
			return a, nil
		}
	case registry.Agent:
		if a.Profile != nil {
			return &a, nil
		}
	}
	return nil, fmt.Errorf("not an agent with a profile: %T", v.Value())
}

// expandDrifted rewrites agent.drifted(d) into
// agent.drift.exists(x, x.at > now - d): true when the agent's card changed
// in a way that matters within d before now.
func expandDrifted(eh parser.ExprHelper, target ast.Expr, args []ast.Expr) (ast.Expr, *common.Error) {
	const v = "__drift__"
	cond := eh.NewCall(operators.Greater,
		eh.NewSelect(eh.NewIdent(v), "at"),
		eh.NewCall(operators.Subtract, eh.NewIdent("now"), args[0]))
	return parser.MakeExists(eh, eh.NewSelect(target, "drift"), []ast.Expr{eh.NewIdent(v), cond})
}

// semver is a CEL value holding a version, compared numerically:
// semver("1.2") < semver("1.10").
type semver struct{ v *version.Version }

func (s semver) ConvertToNative(t reflect.Type) (any, error) {
	if t == reflect.TypeFor[*version.Version]() {
		return s.v, nil
	}
	if t.Kind() == reflect.String {
		return s.v.String(), nil
	}
	return nil, fmt.Errorf("semver cannot convert to %v", t)
}

func (s semver) ConvertToType(t ref.Type) ref.Val {
	switch t {
	case semverType:
		return s
	case types.StringType:
		return types.String(s.v.String())
	case types.TypeType:
		return semverType
	}
	return types.NewErr("semver cannot convert to %s", t.TypeName())
}

func (s semver) Equal(o ref.Val) ref.Val {
	other, ok := o.(semver)
	return types.Bool(ok && s.v.Equal(other.v))
}

func (s semver) Type() ref.Type { return semverType }
func (s semver) Value() any     { return s.v }

// Compare orders two versions numerically.
func (s semver) Compare(o ref.Val) ref.Val {
	other, ok := o.(semver)
	if !ok {
		return types.MaybeNoSuchOverloadErr(o)
	}
	return types.Int(s.v.Compare(other.v))
}

// semverComparison declares a comparison operator over semver values; the
// standard library's implementation calls semver.Compare.
func semverComparison(op, id string) cel.EnvOption {
	return cel.Function(op, cel.Overload(id, []*cel.Type{semverType, semverType}, cel.BoolType))
}
