package policies

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/orchd/orchd/internal/testcmp"
	"github.com/orchd/orchd/internal/testwait"
	"github.com/orchd/orchd/registry"
)

const allowHealthy = "policy: p\nrules:\n  - name: healthy\n    allow: agent.healthy\n"

func TestEngine_ReloadKeepsLastGoodSet(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "p.yaml")
	write := func(s string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(allowHealthy)
	e, err := NewEngine([]string{dir}, Options{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	good := e.Set()
	st := e.Status()
	if diff := cmp.Diff(Status{Digest: good.Digest(), Rules: 1, Files: []string{path}}, st, testcmp.Only[Status]("Digest", "Rules", "LastError", "Files"), cmpopts.EquateEmpty()); diff != "" {
		t.Fatalf("status (-want +got):\n%s", diff)
	}

	write("policy: p\nrules:\n  - name: healthy\n    allow: agent.healty\n")
	err = e.Reload()
	if err == nil || !strings.Contains(err.Error(), "p.yaml:4:17: allow: undefined field 'healty'") {
		t.Fatalf("Reload of a broken edit: err = %v", err)
	}
	if e.Set() != good {
		t.Error("a broken edit replaced the set in force")
	}
	st = e.Status()
	want := Status{Digest: good.Digest(), Diagnostics: []Diagnostic{{Line: 4}}}
	if diff := cmp.Diff(want, st, testcmp.Only[Status]("Digest", "Diagnostics"), cmpopts.EquateEmpty(), testcmp.Only[Diagnostic]("Line")); diff != "" {
		t.Errorf("status after a broken edit (-want +got):\n%s", diff)
	}
	if !strings.Contains(st.LastError, "healty") {
		t.Errorf("status after a broken edit: last error %q, want it to name the field healty", st.LastError)
	}

	write(allowHealthy + "  - name: rank\n    rank: \"1\"\n")
	if err := e.Reload(); err != nil {
		t.Fatal(err)
	}
	if e.Set() == good {
		t.Error("the fix did not replace the set in force")
	}
	if diff := cmp.Diff(Status{Rules: 2}, e.Status(), testcmp.Only[Status]("Rules", "LastError"), cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("status after a fix (-want +got):\n%s", diff)
	}
}

func TestEngine_FirstLoadMustSucceed(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "p.yaml"), []byte("policy: [\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := NewEngine([]string{dir}, Options{}, nil); err == nil {
		t.Error("NewEngine accepted a broken policy")
	}
	e, err := NewEngine(nil, Options{}, nil)
	if err != nil || len(e.Set().Policies()) != 0 {
		t.Errorf("no paths: %v, %v", e, err)
	}
}

func TestEngine_WatchReloadsOnChange(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "p.yaml")
	if err := os.WriteFile(path, []byte(allowHealthy), 0o600); err != nil {
		t.Fatal(err)
	}
	e, err := NewEngine([]string{path}, Options{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	wg.Go(func() { e.Watch(ctx, 10*time.Millisecond) })
	defer func() { cancel(); wg.Wait() }()

	// Evaluations keep running while the set is replaced.
	a := testAgent(t, "a", "v1-minimal.json")
	stop := make(chan struct{})
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
				e.Set().Evaluate(ctx, []*registry.Agent{a}, Input{})
			}
		}
	})
	defer close(stop)

	if err := os.WriteFile(path, []byte("policy: renamed\ndefault: allow\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	testwait.Succeeds(t, 10*time.Second, "Watch reloading the changed file", func() error {
		if got := e.Status().Policies; got[0] != "renamed" {
			return fmt.Errorf("policies %q", got)
		}
		return nil
	})
}
