package orchestrator

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/google/go-cmp/cmp"

	"github.com/orchd/orchd/delegation"
	"github.com/orchd/orchd/internal/testagent"
	"github.com/orchd/orchd/internal/testcmp"
	"github.com/orchd/orchd/store"
)

// defaultsNode runs a daemon on the embedded defaults with only its state
// directory chosen, as `orchd serve --listen …` runs one.
func defaultsNode(t *testing.T) (string, *Daemon) {
	t.Helper()
	cfg := loadDefaults(t)
	cfg.StateDir = t.TempDir()
	cfg.Delegation.PollInterval = Duration(20 * time.Millisecond)
	base := startDaemon(t, cfg)
	return base, nodeDaemon(base)
}

func TestChain_TwoDaemonsOnDefaults(t *testing.T) {
	t.Parallel()
	agent := testagent.Start(t, testagent.Options{Name: "Research", Skill: "research"}, testagent.Work(10*time.Millisecond))
	b, db := defaultsNode(t)
	a, da := defaultsNode(t)
	if da.Identity() == db.Identity() || !strings.HasPrefix(da.Identity(), "orchd-") {
		t.Fatalf("identities %q and %q", da.Identity(), db.Identity())
	}
	if code := call(t, "POST", b+"/v1/agents", `{"url": "`+agent.URL+`"}`, nil); code != 201 {
		t.Fatalf("register the agent at B = %d", code)
	}
	var reg struct{ ID string }
	if code := call(t, "POST", a+"/v1/agents", `{"url": "`+b+`"}`, &reg); code != 201 || reg.ID != "orchd" {
		t.Fatalf("register B at A = %d, id %q", code, reg.ID)
	}
	for _, body := range []string{
		`{"text": "by skill", "skill": "research"}`,
		`{"text": "pinned", "agent": "orchd"}`,
	} {
		var rec delegation.Record
		if code := call(t, "POST", a+"/v1/delegations", body, &rec); code != 201 {
			t.Fatalf("delegate %s at A = %d %+v", body, code, rec)
		}
		done := waitFor(t, a, rec.ID, a2a.TaskStateCompleted)
		if done.Downstream.Agent != "orchd" {
			t.Errorf("%s: delegated to %q, want orchd", body, done.Downstream.Agent)
		}
		if diff := cmp.Diff(delegation.Chain{Path: []string{da.Identity()}, Names: []string{"orchd"}}, done.Chain,
			testcmp.Only[delegation.Chain]("Path", "Names")); diff != "" {
			t.Errorf("%s: chain, want A's identity and name (-want +got):\n%s", body, diff)
		}
	}

	// Now B knows A too: B → A → B is a real cycle, refused at A with the
	// path of identities.
	if code := call(t, "POST", b+"/v1/agents", `{"id": "a", "url": "`+a+`"}`, nil); code != 201 {
		t.Fatalf("register A at B = %d", code)
	}
	var rec delegation.Record
	if code := call(t, "POST", b+"/v1/delegations", `{"text": "loop", "agent": "a"}`, &rec); code != 201 {
		t.Fatalf("delegate at B = %d %+v", code, rec)
	}
	refused := waitFor(t, b, rec.ID, a2a.TaskStateRejected)
	want := "orchd (" + db.Identity() + ") is already in the delegation path orchd (" + db.Identity() + ") → orchd (" + da.Identity() + ")"
	if !strings.Contains(refused.Error, want) {
		t.Errorf("error = %q, want it to contain %q", refused.Error, want)
	}
}

func TestCard_AdvertisesIdentityAndRoutedSkills(t *testing.T) {
	t.Parallel()
	base, d := defaultsNode(t)
	card := func() (map[string]any, string) {
		t.Helper()
		var c map[string]any
		resp, err := http.Get(base + "/.well-known/agent-card.json")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if err := json.NewDecoder(resp.Body).Decode(&c); err != nil || resp.StatusCode != 200 {
			t.Fatalf("card: %d %v", resp.StatusCode, err)
		}
		return c, resp.Header.Get("ETag")
	}
	c, etag := card()
	if skills := c["skills"].([]any); len(skills) != 0 {
		t.Errorf("skills before any agent: %v", skills)
	}
	var params map[string]any
	for _, x := range c["capabilities"].(map[string]any)["extensions"].([]any) {
		if x := x.(map[string]any); x["uri"] == delegation.ExtensionURI {
			params, _ = x["params"].(map[string]any)
		}
	}
	if params[delegation.IdentityParam] != d.Identity() || params[delegation.NameParam] != "orchd" {
		t.Errorf("delegation extension params = %v", params)
	}

	r1 := testagent.Start(t, testagent.Options{Name: "R1", Skill: "research"}, testagent.Reply("ok"))
	r2 := testagent.Start(t, testagent.Options{Name: "R2", Skill: "research"}, testagent.Reply("ok"))
	for _, u := range []string{r1.URL, r2.URL} {
		if code := call(t, "POST", base+"/v1/agents", `{"url": "`+u+`"}`, nil); code != 201 {
			t.Fatalf("register = %d", code)
		}
	}
	c, etag2 := card()
	skills := c["skills"].([]any)
	if etag2 == etag || len(skills) != 1 {
		t.Fatalf("after two research agents: ETag %s → %s, skills %v", etag, etag2, skills)
	}
	s := skills[0].(map[string]any)
	if s["id"] != "research" || s["description"] != "Routed by this orchd to: r1, r2" {
		t.Errorf("skill = %v", s)
	}
}

func TestStateDir_IdentityKeptAcrossRestarts(t *testing.T) {
	t.Parallel()
	cfg := loadDefaults(t)
	cfg.StateDir = t.TempDir()
	first, err := New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	first.Close()
	second, err := New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if first.Identity() != second.Identity() {
		t.Errorf("identity changed across restarts: %q then %q", first.Identity(), second.Identity())
	}
	cfg.StateDir = t.TempDir()
	other, err := New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if other.Identity() == first.Identity() {
		t.Errorf("two state directories share identity %q", other.Identity())
	}
	cfg.Delegation.Self = "gateway"
	other.Close()
	configured, err := New(cfg, nil)
	if err != nil || configured.Identity() != "gateway" {
		t.Errorf("configured identity = %q, %v", configured.Identity(), err)
	}
	for _, d := range []*Daemon{second, configured} {
		d.Close()
	}
}

func TestStateDir_ConcurrentFirstStartsAgree(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ids := make([]string, 8)
	var wg sync.WaitGroup
	for i := range ids {
		wg.Go(func() {
			id, err := loadIdentity(dir)
			if err != nil {
				t.Error(err)
			}
			ids[i] = id
		})
	}
	wg.Wait()
	for _, id := range ids {
		if id != ids[0] || id == "" {
			t.Fatalf("identities %v", ids)
		}
	}
}

func TestStateDir_BadIdentityFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, identityFile), []byte("two words\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := loadDefaults(t)
	cfg.StateDir = dir
	if _, err := New(cfg, nil); err == nil || !strings.Contains(err.Error(), `identity "two words"`) {
		t.Errorf("New = %v", err)
	}
}

func TestStateDir_SecondDaemonRefused(t *testing.T) {
	t.Parallel()
	cfg := loadDefaults(t)
	cfg.StateDir = t.TempDir()
	startDaemon(t, cfg)
	_, err := New(cfg, nil)
	want := "state directory " + cfg.StateDir + " is in use by orchd pid " + strconv.Itoa(os.Getpid())
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("second New = %v, want %q", err, want)
	}
}

// TestStateDir_LockOfAKilledProcess takes the lock in a child process,
// kills it with SIGKILL and takes the lock again.
func TestStateDir_LockOfAKilledProcess(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cmd := helpers.Command(t, "hold-lock", dir)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	buf := make([]byte, 7)
	if _, err := out.Read(buf); err != nil || string(buf) != "locked\n" {
		t.Fatalf("child: %q %v", buf, err)
	}
	if _, err := lockStateDir(dir); err == nil || !strings.Contains(err.Error(), "pid "+strconv.Itoa(cmd.Process.Pid)) {
		t.Fatalf("lock while the child holds it = %v", err)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err == nil {
		t.Fatal("the child was not killed")
	}
	f, err := lockStateDir(dir)
	if err != nil {
		t.Fatalf("lock after kill -9: %v", err)
	}
	f.Close()
}

func TestDefaultStateDir(t *testing.T) {
	t.Setenv("XDG_STATE_HOME", "/state")
	for _, tt := range []struct{ listen, want string }{
		{"127.0.0.1:8080", "/state/orchd/127.0.0.1-8080"},
		{"127.0.0.1:8081", "/state/orchd/127.0.0.1-8081"},
		{"[::1]:8080", "/state/orchd/__1-8080"},
		{":8080", "/state/orchd/any-8080"},
		{"127.0.0.1:0", ""},
	} {
		got, err := DefaultStateDir(tt.listen)
		if err != nil || got != tt.want {
			t.Errorf("DefaultStateDir(%q) = %q, %v; want %q", tt.listen, got, err, tt.want)
		}
	}
	t.Setenv("XDG_STATE_HOME", "")
	t.Setenv("HOME", "/home/op")
	if got, _ := DefaultStateDir("127.0.0.1:8080"); got != "/home/op/.local/state/orchd/127.0.0.1-8080" {
		t.Errorf("without XDG_STATE_HOME: %q", got)
	}
}

// TestStateDir_IdentityOfAnExistingStore removes the identity file of a
// state directory whose store holds state, and puts another one in its
// place: the daemon refuses to start, naming the identity the store
// belongs to, rather than go on as another orchd on the old store. With
// the file back it starts as before. A store made before the identity
// was kept in it (no identity there) is refused as well.
func TestStateDir_IdentityOfAnExistingStore(t *testing.T) {
	t.Parallel()
	cfg := loadDefaults(t)
	cfg.StateDir = t.TempDir()
	first, err := New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	id := first.Identity()
	first.Close()
	path := filepath.Join(cfg.StateDir, identityFile)
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	_, err = New(cfg, nil)
	if err == nil {
		t.Fatal("New with the identity file gone: no error")
	}
	for _, want := range []string{path + " is missing", id} {
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("New with the identity file gone = %v, want a refusal naming %s", err, want)
		}
	}
	if _, err := os.Stat(path); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a refused start left an identity file: %v", err)
	}
	if err := os.WriteFile(path, []byte("orchd-0123456789abcdef\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := New(cfg, nil); err == nil || !strings.Contains(err.Error(), "belongs to orchd \""+id+"\"") {
		t.Fatalf("New with another identity file = %v, want a refusal naming %s", err, id)
	}
	if err := os.WriteFile(path, []byte(id+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	again, err := New(cfg, nil)
	if err != nil || again.Identity() != id {
		t.Fatalf("New with the identity file back = %v, %v", again, err)
	}
	again.Close()

	// A store holding state, but no identity.
	dir := t.TempDir()
	st, err := store.Open(t.Context(), dir, store.Config{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Delegations(t.Context(), store.DelegationsConfig{}); err != nil {
		t.Fatal(err)
	}
	st.Close()
	cfg.StateDir = dir
	if _, err := New(cfg, nil); err == nil || !strings.Contains(err.Error(), "already holds state") {
		t.Fatalf("New on a store with state and no identity file = %v, want a refusal", err)
	}
}

// holdLockProcess is the body of the helper process
// TestStateDir_LockOfAKilledProcess kills: it locks the state directory
// args[0], says so on its standard output and waits to be killed.
func holdLockProcess(args []string) int {
	if len(args) != 1 {
		return helperFailed(fmt.Errorf("hold-lock: want a state directory, got %q", args))
	}
	if _, err := lockStateDir(args[0]); err != nil {
		return helperFailed(err)
	}
	os.Stdout.WriteString("locked\n")
	time.Sleep(time.Minute)
	return 0
}
