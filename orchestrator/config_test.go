package orchestrator

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/orchd/orchd/delegation"
	"github.com/orchd/orchd/internal/testcmp"
	"github.com/orchd/orchd/registry"
)

func writeConfig(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "orchd.yaml")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestLoadConfig_Defaults(t *testing.T) {
	t.Parallel()
	cfg, err := LoadConfig("")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Listen != "127.0.0.1:8080" {
		t.Errorf("default listen %q", cfg.Listen)
	}
	rc := cfg.RegistryConfig()
	if diff := cmp.Diff(registry.Config{Timeout: 10 * time.Second, MaxCardBytes: 1 << 20}, rc, testcmp.Only[registry.Config]("Timeout", "MaxCardBytes")); diff != "" {
		t.Errorf("registry defaults (-want +got):\n%s", diff)
	}
	if len(rc.AllowNetworks) != 2 {
		t.Errorf("default allowNetworks %v, want the two loopback ones", rc.AllowNetworks)
	}
	want := delegation.Config{SilenceTimeout: time.Minute, MaxDuration: 0, CallTimeout: 30 * time.Second}
	if diff := cmp.Diff(want, cfg.DelegationConfig(), testcmp.Only[delegation.Config]("SilenceTimeout", "MaxDuration", "CallTimeout")); diff != "" {
		t.Errorf("delegation defaults (-want +got):\n%s", diff)
	}
}

func TestLoadConfig_FileOverridesDefaults(t *testing.T) {
	t.Parallel()
	p := writeConfig(t, `
listen: 127.0.0.1:9999
registry:
  allowNetworks: ["10.0.0.0/8"]
  defaultTTL: 30s
agents:
  - url: https://research.example.com
    id: research
`)
	cfg, err := LoadConfig(p)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Listen != "127.0.0.1:9999" {
		t.Errorf("listen %q, want the file's", cfg.Listen)
	}
	rc := cfg.RegistryConfig()
	if diff := cmp.Diff(registry.Config{DefaultTTL: 30 * time.Second, Timeout: 10 * time.Second}, rc, testcmp.Only[registry.Config]("DefaultTTL", "Timeout")); diff != "" {
		t.Errorf("merged registry config (-want +got):\n%s", diff)
	}
	if len(rc.AllowNetworks) != 1 || rc.AllowNetworks[0] != "10.0.0.0/8" {
		t.Errorf("a list in the file must replace the default list, got %v", rc.AllowNetworks)
	}
	if len(cfg.Agents) != 1 || cfg.Agents[0].ID != "research" {
		t.Errorf("agents = %+v", cfg.Agents)
	}
}

func TestLoadConfig_Errors(t *testing.T) {
	t.Parallel()
	tests := []struct{ name, body, want string }{
		{"unknown key", "listen: 127.0.0.1:1\nlisten_addr: x\n", `:2: unknown key "listen_addr"`},
		{"bad duration", "registry:\n  timeout: soon\n", `:2:12: "soon" is not a duration`},
		{"wrong type", "registry:\n  maxEntries: many\n", `:2: "many" given, want a whole number`},
		{"bad listen", "listen: nowhere\n", `listen "nowhere"`},
		{"bad agent url", "agents:\n  - url: ftp://x\n", "agents[0]: invalid agent URL"},
		{"a peer without an id", "agents:\n  - url: http://127.0.0.1:9\n    peer: true\n", "agents[0]: peer needs an id"},
		{"not yaml", "listen: [\n", "orchd.yaml"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := LoadConfig(writeConfig(t, tt.body))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want it to contain %q", err, tt.want)
			}
		})
	}
	if _, err := LoadConfig(filepath.Join(t.TempDir(), "missing.yaml")); err == nil {
		t.Error("a missing file must be an error")
	}
}

func TestLoadConfig_Example(t *testing.T) {
	t.Parallel()
	cfg, err := LoadConfig("../examples/orchd.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Agents) != 2 {
		t.Fatalf("example agents = %+v, want 2", cfg.Agents)
	}
	rc := cfg.RegistryConfig()
	if diff := cmp.Diff(registry.Config{DefaultTTL: 2 * time.Minute, Timeout: 10 * time.Second}, rc, testcmp.Only[registry.Config]("DefaultTTL", "Timeout")); diff != "" {
		t.Errorf("example registry config (-want +got):\n%s", diff)
	}
	if len(rc.Deprecated) == 0 || rc.Deprecated[0] != "push_notifications" {
		t.Errorf("example deprecated %v, want push_notifications first", rc.Deprecated)
	}
	if len(cfg.Auth.Tokens) != 2 || cfg.Auth.Tokens[0].Principal != "ops" {
		t.Errorf("example tokens = %+v, want two, ops's first", cfg.Auth.Tokens)
	}
	if len(cfg.Auth.Peers) != 1 {
		t.Errorf("example peers = %v, want one", cfg.Auth.Peers)
	}
	if c := cfg.Agents[0].Credentials; c == nil || c.Bearer == nil {
		t.Errorf("example credentials of the first agent = %+v, want a bearer token", c)
	}
	if len(cfg.Policies.Paths) != 2 || cfg.PolicyOptions().CostLimit != 100_000 {
		t.Errorf("example policies = %+v", cfg.Policies)
	}
	want := delegation.Config{MaxDuration: time.Hour, SilenceTimeout: 2 * time.Minute, CallTimeout: 10 * time.Second, CancelWait: 10 * time.Second}
	if diff := cmp.Diff(want, cfg.DelegationConfig(), testcmp.Only[delegation.Config]("MaxDuration", "SilenceTimeout", "CallTimeout", "CancelWait")); diff != "" {
		t.Errorf("example delegation (-want +got):\n%s", diff)
	}
	// The example's policy paths are relative to the repository root.
	for _, p := range cfg.Policies.Paths {
		if _, err := os.Stat(filepath.Join("..", p)); err != nil {
			t.Errorf("example policy path: %v", err)
		}
	}
}

// FuzzLoadConfig checks that no config file makes LoadConfig panic, seeded
// with the embedded defaults and the example configs.
func FuzzLoadConfig(f *testing.F) {
	f.Add(DefaultsYAML())
	examples, _ := filepath.Glob(filepath.Join("..", "examples", "*.yaml"))
	for _, p := range examples {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte("registry:\n  timeout: 1s\nagents:\n  - url: http://a.example.com\n"))
	f.Add([]byte("listen: [\n"))
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, body []byte) {
		p := filepath.Join(dir, "c.yaml")
		if err := os.WriteFile(p, body, 0o600); err != nil {
			t.Fatal(err)
		}
		cfg, err := LoadConfig(p)
		if err == nil {
			_ = cfg.RegistryConfig()
		}
	})
}

// TestLoadConfig_QuickWriteLag reads store.quickWriteLag as a config file
// writes it: its default, a lag, "off", and the values refused.
func TestLoadConfig_QuickWriteLag(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, body string
		want       string // the store's setting; "" when refused
		err        string
	}{
		{"default", "", "100ms", ""},
		{"a lag", "store:\n  quickWriteLag: 20ms\n", "20ms", ""},
		{"off", "store:\n  quickWriteLag: \"off\"\n", "off", ""},
		{"the most", "store:\n  quickWriteLag: 1s\n", "1s", ""},
		{"too long", "store:\n  quickWriteLag: 2s\n", "", `store.quickWriteLag "2s" is neither "off" nor a duration from 1ms to 1s`},
		{"zero", "store:\n  quickWriteLag: 0s\n", "", `store.quickWriteLag "0s"`},
		{"a word", "store:\n  quickWriteLag: later\n", "", `store.quickWriteLag "later"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg, err := LoadConfig(writeConfig(t, "listen: 127.0.0.1:0\n"+tc.body))
			switch {
			case tc.err == "" && err != nil:
				t.Fatalf("config refused: %v", err)
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
				t.Fatalf("err = %v, want it to contain %q", err, tc.err)
			case tc.err == "" && cfg.Store.storeConfig().QuickWriteLag != tc.want:
				t.Errorf("store quickWriteLag = %q, want %q", cfg.Store.storeConfig().QuickWriteLag, tc.want)
			}
		})
	}
}

func TestLoadConfig_RunningLimits(t *testing.T) {
	t.Parallel()
	type limits struct{ node, perCaller int }
	tests := []struct {
		name, body string
		want       limits
		err        string
	}{
		{"defaults", "", limits{20_000, 0}, ""},
		{"both set", "delegation:\n  maxRunning: 500\n  maxRunningPerCaller: 50\n", limits{500, 50}, ""},
		{"per caller only", "delegation:\n  maxRunningPerCaller: 10\n", limits{20_000, 10}, ""},
		{"no limit", "delegation:\n  maxRunning: 0\n", limits{0, 0}, ""},
		{"negative node", "delegation:\n  maxRunning: -1\n", limits{}, "delegation.maxRunning and maxRunningPerCaller must not be negative"},
		{"negative per caller", "delegation:\n  maxRunningPerCaller: -3\n", limits{}, "must not be negative"},
		{"not a number", "delegation:\n  maxRunning: lots\n", limits{}, `"lots" given, want a whole number`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg, err := LoadConfig(writeConfig(t, "listen: 127.0.0.1:1\n"+tt.body))
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err = %v, want it to contain %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			dc := cfg.DelegationConfig()
			if got := (limits{dc.MaxRunning, dc.MaxRunningPerCaller}); got != tt.want {
				t.Errorf("maxRunning, maxRunningPerCaller = %v, want %v", got, tt.want)
			}
		})
	}
}
