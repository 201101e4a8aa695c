package orchestrator

import (
	"os"
	"path/filepath"
	"testing"
)

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
