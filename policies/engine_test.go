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
	if st.Digest != good.Digest() || st.Rules != 1 || st.LastError != "" || len(st.Files) != 1 {
		t.Fatalf("status = %+v", st)
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
	if st.Digest != good.Digest() || !strings.Contains(st.LastError, "healty") || len(st.Diagnostics) != 1 || st.Diagnostics[0].Line != 4 {
		t.Errorf("status after a broken edit = %+v", st)
	}

	write(allowHealthy + "  - name: rank\n    rank: \"1\"\n")
	if err := e.Reload(); err != nil {
		t.Fatal(err)
	}
	if st := e.Status(); e.Set() == good || st.Rules != 2 || st.LastError != "" {
		t.Errorf("status after a fix = %+v", st)
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
