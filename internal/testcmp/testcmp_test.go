package testcmp_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/orchd/orchd/internal/testcmp"
)

type record struct {
	ID, State, Note string
	Inner           inner
}

type inner struct{ A, B int }

func TestOnly(t *testing.T) {
	t.Parallel()
	want := record{ID: "r", State: "done", Note: "x", Inner: inner{A: 1, B: 2}}
	got := record{ID: "r", State: "done", Note: "y", Inner: inner{A: 1, B: 3}}
	if diff := cmp.Diff(want, got, testcmp.Only[record]("ID", "State")); diff != "" {
		t.Errorf("fields left out were compared:\n%s", diff)
	}
	// A field named is compared, at any depth its type appears.
	if diff := cmp.Diff(want, got, testcmp.Only[record]("Inner"), testcmp.Only[inner]("B")); !strings.Contains(diff, "B:") || strings.Contains(diff, "Note") {
		t.Errorf("want a diff of Inner.B alone, got:\n%s", diff)
	}
	got.State = "working"
	if diff := cmp.Diff(want, got, testcmp.Only[record]("ID", "State")); !strings.Contains(diff, `"working"`) {
		t.Errorf("a named field that differs is not in the diff:\n%s", diff)
	}
}

func TestOnly_UnknownFieldPanics(t *testing.T) {
	t.Parallel()
	defer func() {
		if recover() == nil {
			t.Error("Only with a field the type lacks did not panic")
		}
	}()
	testcmp.Only[record]("Nope")
}
