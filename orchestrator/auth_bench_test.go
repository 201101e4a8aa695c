package orchestrator

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"testing"
	"time"

	"github.com/orchd/orchd/auth"
	"github.com/orchd/orchd/registry"
)

// BenchmarkAuth measures what authenticating callers costs, in the same
// run: the same delegation through orchd to a no-op a2a-go agent, and the
// same small API read (GET /v1/agents/noop), with no authentication, with
// a static token (one of 100 configured, kept as hashes) and with an RS256
// JWT whose issuer's keys are cached. Each path gets its own daemon, with
// the daemon's logger and its delegation store filled, and 16 callers; it
// reports throughput. The paths take turns, five rounds of each.
//
//	go test ./orchestrator -run '^$' -bench 'BenchmarkAuth$' -benchtime 500ms
func BenchmarkAuth(b *testing.B) {
	agent := noopAgent(b)
	token, jwtConfig, jwtToken := benchTokens(b)

	type path struct {
		name       string
		send, read func() error
	}
	var paths []path
	for _, p := range []struct {
		name   string
		auth   AuthConfig
		bearer string
	}{
		{"none", AuthConfig{}, ""},
		{"token", token, "bench-token-42"},
		{"jwt", AuthConfig{Config: auth.Config{JWT: jwtConfig}}, jwtToken},
	} {
		cfg := benchConfig(b)
		cfg.Agents = []registry.Spec{{ID: "noop", URL: agent.URL}}
		cfg.Auth = p.auth
		d, base, _ := runBenchDaemon(b, cfg)
		h := http.Header{}
		if p.bearer != "" {
			h.Set("Authorization", "Bearer "+p.bearer)
		}
		c := benchClient(b, base, h)
		// Each daemon's store is filled first, as in BenchmarkHop, so every
		// path runs at the same steady state.
		fillDaemon(b, d, c)
		hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
		b.Cleanup(hc.CloseIdleConnections)
		paths = append(paths, path{name: p.name,
			send: func() error { return send(context.Background(), c) },
			read: func() error {
				req, _ := http.NewRequest("GET", base+"/v1/agents/noop", nil)
				req.Header = h.Clone()
				resp, err := hc.Do(req)
				if err != nil {
					return err
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					return fmt.Errorf("GET /v1/agents/noop = %d", resp.StatusCode)
				}
				return nil
			}})
	}
	// The paths take turns, each round starting with the next one, so
	// that what the machine does meanwhile weighs on all of them alike.
	for round := range authRounds {
		for i := range paths {
			p := paths[(round+i)%len(paths)]
			runtime.GC()
			b.Run(p.name+"/delegate", func(b *testing.B) { parallelCalls(b, p.send) })
		}
	}
	for round := range authRounds {
		for i := range paths {
			p := paths[(round+i)%len(paths)]
			runtime.GC()
			b.Run(p.name+"/api-read", func(b *testing.B) { parallelCalls(b, p.read) })
		}
	}
}

// authRounds is how many turns each path of BenchmarkAuth takes.
const authRounds = 5

// benchTokens returns an auth section with 100 static tokens, the
// 43rd of them "bench-token-42", and a JWT configuration whose issuer's
// key set a test server serves, with a token it signed.
func benchTokens(b *testing.B) (AuthConfig, *auth.JWTConfig, string) {
	b.Helper()
	var tokens AuthConfig
	for i := range 100 {
		tokens.Tokens = append(tokens.Tokens, auth.TokenConfig{SHA256: sha256Hex(fmt.Sprintf("bench-token-%d", i)), Principal: fmt.Sprintf("caller-%d", i), Tenant: "bench"})
	}
	idp := newTestIssuer(b)
	return tokens, idp.config(), idp.token(b, "orchd", "bench", time.Hour)
}
