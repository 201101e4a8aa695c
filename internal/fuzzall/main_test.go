package main

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// testModule is a module of fuzz targets, and of functions that only look
// like them, in packages at several depths.
const testModule = "testdata/mod"

func TestDiscover_FindsEveryTargetByGoTestsRule(t *testing.T) {
	t.Parallel()
	root, err := filepath.Abs(testModule)
	if err != nil {
		t.Fatal(err)
	}
	got, err := discover(t.Context(), root)
	if err != nil {
		t.Fatal(err)
	}
	want := []target{
		{"./a", filepath.Join(root, "a"), "FuzzTwo"},
		{"./a", filepath.Join(root, "a"), "Fuzz"},
		{"./a", filepath.Join(root, "a"), "Fuzz_External"},
		{"./c/deep", filepath.Join(root, "c", "deep"), "FuzzDeep"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got  %v\nwant %v", got, want)
	}
}

func TestIsFuzzName(t *testing.T) {
	t.Parallel()
	for name, want := range map[string]bool{
		"Fuzz": true, "FuzzJSONNames": true, "Fuzz_x": true, "Fuzz2": true,
		"Fuzzy": false, "fuzzX": false, "TestFuzz": false, "Fuz": false,
	} {
		if got := isFuzzName(name); got != want {
			t.Errorf("isFuzzName(%q) = %v, want %v", name, got, want)
		}
	}
}

func TestRun_ListsTargetsAndRefusesBadFlags(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		opts    options
		want    string // the output, or the error
		wantErr bool
	}{
		{"all", options{time: time.Second, list: true}, "./a FuzzTwo\n./a Fuzz\n./a Fuzz_External\n./c/deep FuzzDeep\n", false},
		{"matching", options{time: time.Second, match: "Deep|External", list: true}, "./a Fuzz_External\n./c/deep FuzzDeep\n", false},
		{"none matches", options{time: time.Second, match: "Nothing", list: true}, `no fuzz target matches "Nothing"`, true},
		{"bad regexp", options{time: time.Second, match: "(", list: true}, "-match: error parsing regexp", true},
		{"no time", options{list: true}, "-time 0s: must be above zero", true},
		{"negative minimize", options{time: time.Second, minimize: -time.Second}, "-minimize -1s: must not be below zero", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var out bytes.Buffer
			err := run(t.Context(), &out, testModule, tc.opts)
			if tc.wantErr {
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("got error %v, want one containing %q", err, tc.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if out.String() != tc.want {
				t.Errorf("got\n%s\nwant\n%s", out.String(), tc.want)
			}
		})
	}
}

// TestRun_SaysWhereTheCrashInputIs fuzzes a target that fails on almost
// any input, in a copy of the test module, and checks that the run fails
// and names the file go test saved.
func TestRun_SaysWhereTheCrashInputIs(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS(testModule)); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	err := run(t.Context(), &out, dir, options{time: 5 * time.Second, minimize: time.Second, match: "^FuzzTwo$"})
	if !errors.Is(err, errFound) {
		t.Fatalf("got error %v, want %v; output:\n%s", err, errFound, out.String())
	}
	crashes, err := filepath.Glob(filepath.Join(dir, "a", "testdata", "fuzz", "FuzzTwo", "*"))
	if err != nil || len(crashes) != 1 {
		t.Fatalf("crash inputs %v (%v), want one; output:\n%s", crashes, err, out.String())
	}
	name := filepath.Base(crashes[0])
	for _, want := range []string{
		"FAIL ./a FuzzTwo: crash input written to a/testdata/fuzz/FuzzTwo/" + name,
		"go test ./a -run '^FuzzTwo$/^" + name + "$'",
		"commit the input in <pkg>/testdata/fuzz/<Name>/ with the fix",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}
