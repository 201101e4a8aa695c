package orchestrator

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
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
	rc := cfg.RegistryConfig()
	if cfg.Listen != "127.0.0.1:8080" || rc.Timeout != 10*time.Second || rc.MaxCardBytes != 1<<20 || len(rc.AllowNetworks) != 2 {
		t.Errorf("defaults = %+v / %+v", cfg, rc)
	}
	if dc := cfg.DelegationConfig(); dc.SilenceTimeout != time.Minute || dc.MaxDuration != 0 || dc.CallTimeout != 30*time.Second {
		t.Errorf("delegation defaults = %+v", dc)
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
	rc := cfg.RegistryConfig()
	if cfg.Listen != "127.0.0.1:9999" || rc.DefaultTTL != 30*time.Second || rc.Timeout != 10*time.Second {
		t.Errorf("merged config = %+v", rc)
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
	rc := cfg.RegistryConfig()
	if len(cfg.Agents) != 2 || rc.DefaultTTL != 2*time.Minute || rc.Timeout != 10*time.Second || rc.Deprecated[0] != "push_notifications" {
		t.Errorf("example config = %+v / %+v", cfg, rc)
	}
	if len(cfg.Auth.Tokens) != 2 || cfg.Auth.Tokens[0].Principal != "ops" || len(cfg.Auth.Peers) != 1 || cfg.Agents[0].Credentials == nil || cfg.Agents[0].Credentials.Bearer == nil {
		t.Errorf("example auth = %+v, credentials %+v", cfg.Auth, cfg.Agents[0].Credentials)
	}
	if len(cfg.Policies.Paths) != 2 || cfg.PolicyOptions().CostLimit != 100_000 {
		t.Errorf("example policies = %+v", cfg.Policies)
	}
	if dc := cfg.DelegationConfig(); dc.MaxDuration != time.Hour || dc.SilenceTimeout != 2*time.Minute || dc.CallTimeout != 10*time.Second || dc.CancelWait != 10*time.Second {
		t.Errorf("example delegation = %+v", dc)
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
