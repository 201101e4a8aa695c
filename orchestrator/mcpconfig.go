package orchestrator

import (
	"fmt"
	"runtime/debug"
	"time"

	"github.com/orchd/orchd/mcpserver"
)

// MCPConfig is the config file's mcp section: orchd's MCP endpoint at
// /mcp (docs/mcp.md).
type MCPConfig struct {
	// Enabled serves the endpoint. Default true.
	Enabled bool `yaml:"enabled"`
	// Wait is how long orchd_delegate and orchd_wait wait by default
	// before answering with where the work stands: 1s to 50s. Default
	// 45s.
	Wait Duration `yaml:"wait"`
	// Heartbeat is the longest a waiting call goes without a progress
	// notification: 1s to 30s. Default 10s.
	Heartbeat Duration `yaml:"heartbeat"`
}

// validate checks the section's settings.
func (c MCPConfig) validate() error {
	if w := time.Duration(c.Wait); w != 0 && (w < time.Second || w > mcpserver.MaxWaitSeconds*time.Second) {
		return fmt.Errorf("config: mcp.wait %s: want 1s to %ds", w, mcpserver.MaxWaitSeconds)
	}
	if h := time.Duration(c.Heartbeat); h != 0 && (h < time.Second || h > 30*time.Second) {
		return fmt.Errorf("config: mcp.heartbeat %s: want 1s to 30s", h)
	}
	return nil
}

// server is the MCP front's config for a daemon named self whose state
// directory is stateDir ("" when it keeps none).
func (c MCPConfig) server(self, stateDir string) (mcpserver.Config, error) {
	keys, err := mcpserver.LoadStateKeys(stateDir, time.Now())
	if err != nil {
		return mcpserver.Config{}, err
	}
	return mcpserver.Config{Wait: time.Duration(c.Wait), Heartbeat: time.Duration(c.Heartbeat), Self: self,
		Version: buildVersion(), StateKeys: keys}, nil
}

// mcpResource describes the MCP endpoint of a daemon configured with cfg
// as an OAuth protected resource (RFC 9728).
func mcpResource(cfg Config) mcpserver.Resource {
	a := cfg.Auth
	res := mcpserver.Resource{Base: cfg.Agent.URL, Name: cfg.Agent.Name,
		Bearer: len(a.Tokens) > 0 || a.TokensFile != "" || a.JWT != nil}
	if a.JWT != nil {
		res.Issuers = []string{a.JWT.Issuer}
	}
	return res
}

// buildVersion is the module version of this binary: a release tag, or
// "(devel)" when built from a checkout.
func buildVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		return bi.Main.Version
	}
	return "(devel)"
}
