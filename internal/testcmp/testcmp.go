// Package testcmp holds go-cmp options the tests share.
package testcmp

import (
	"reflect"
	"slices"

	"github.com/google/go-cmp/cmp"
)

// Only makes cmp.Diff compare just the named fields of struct type T,
// wherever a T appears, and ignore the others: for a test that checks a
// few fields of a large record and wants a diff of those. A name that is
// not a field of T panics, so a renamed field cannot silently drop out of
// a check.
func Only[T any](fields ...string) cmp.Option {
	typ := reflect.TypeFor[T]()
	for _, f := range fields {
		if _, ok := typ.FieldByName(f); !ok {
			panic("testcmp.Only: " + typ.String() + " has no field " + f)
		}
	}
	return cmp.FilterPath(func(p cmp.Path) bool {
		sf, ok := p.Last().(cmp.StructField)
		return ok && len(p) >= 2 && p.Index(-2).Type() == typ && !slices.Contains(fields, sf.Name())
	}, cmp.Ignore())
}
