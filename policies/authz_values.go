package policies

import (
	"fmt"
	"reflect"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
)

// callerObjType and resourceObjType are the CEL types of caller and
// resource values.
var (
	callerObjType   = cel.ObjectType(callerTypeName)
	resourceObjType = cel.ObjectType(resourceTypeName)
)

// nativeRef is caller or resource as a CEL object value. It holds only a
// pointer, so making one allocates nothing: wrapping through the type
// adapter would cost more than a simple rule takes to run. Fields are read
// by the native type provider's getters, which take the pointer from
// Value.
type nativeRef[T Caller | Resource] struct{ v *T }

var (
	_ ref.Val = nativeRef[Caller]{}
	_ ref.Val = nativeRef[Resource]{}
)

func (n nativeRef[T]) ConvertToNative(t reflect.Type) (any, error) {
	switch t {
	case reflect.TypeFor[*T]():
		return n.v, nil
	case reflect.TypeFor[T]():
		return *n.v, nil
	}
	return nil, fmt.Errorf("%s cannot convert to %v", n.Type().TypeName(), t)
}

func (n nativeRef[T]) ConvertToType(t ref.Type) ref.Val {
	switch {
	case t == types.TypeType:
		return n.Type().(*types.Type)
	case t.TypeName() == n.Type().TypeName():
		return n
	}
	return types.NewErr("type conversion error from '%s' to '%s'", n.Type().TypeName(), t.TypeName())
}

func (n nativeRef[T]) Equal(other ref.Val) ref.Val {
	o, ok := other.(nativeRef[T])
	return types.Bool(ok && reflect.DeepEqual(*n.v, *o.v))
}

func (n nativeRef[T]) Type() ref.Type {
	if _, ok := any(n.v).(*Caller); ok {
		return callerObjType
	}
	return resourceObjType
}

func (n nativeRef[T]) Value() any { return n.v }
