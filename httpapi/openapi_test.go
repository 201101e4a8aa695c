package httpapi

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/orchd/orchd/httpgate"
)

// TestOpenAPI_MatchesRoutes checks that /openapi.yaml is served as it
// is written, parses, and documents exactly the API's routes.
func TestOpenAPI_MatchesRoutes(t *testing.T) {
	t.Parallel()
	limits := httpgate.NewBodyLimits(httpgate.Limits{MaxBodyBytes: 1 << 20, MaxAPIBodyBytes: 1 << 20, MaxJSONDepth: 64,
		MaxBufferedBodyBytes: 4 << 20, ReadTimeout: 30 * time.Second}, nil)
	srv := httptest.NewServer(New(Deps{Limits: limits}).Handler())
	t.Cleanup(srv.Close)
	resp, err := http.Get(srv.URL + "/openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if written, err := os.ReadFile("openapi.yaml"); err != nil || !bytes.Equal(body, written) {
		t.Errorf("GET /openapi.yaml served %d bytes, not openapi.yaml's %d (%v)", len(body), len(written), err)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/yaml" {
		t.Errorf("Content-Type %q, want application/yaml", ct)
	}
	var doc struct {
		OpenAPI string                    `yaml:"openapi"`
		Paths   map[string]map[string]any `yaml:"paths"`
	}
	if resp.StatusCode != 200 {
		t.Fatalf("openapi.yaml: %d", resp.StatusCode)
	}
	if err := yaml.Unmarshal(body, &doc); err != nil {
		t.Fatalf("openapi.yaml: %v", err)
	}
	if !strings.HasPrefix(doc.OpenAPI, "3.1") {
		t.Fatalf("openapi.yaml is OpenAPI %q, want 3.1", doc.OpenAPI)
	}
	var documented []string
	for path, ops := range doc.Paths {
		for method := range ops {
			if method != "parameters" {
				documented = append(documented, strings.ToUpper(method)+" "+path)
			}
		}
	}
	src, err := os.ReadFile("api.go")
	if err != nil {
		t.Fatal(err)
	}
	var routed []string
	for _, m := range regexp.MustCompile(`mux\.HandleFunc\("([A-Z]+) (/[^"]*)"`).FindAllStringSubmatch(string(src), -1) {
		switch m[2] {
		case "/v1/agents/{action}":
			for _, verb := range []string{"refresh", "contain", "release"} {
				routed = append(routed, m[1]+" /v1/agents/{id}:"+verb)
			}
		case "/v1/delegations/{action}":
			for _, verb := range []string{"cancel", "steer", "interrupt"} {
				routed = append(routed, m[1]+" /v1/delegations/{id}:"+verb)
			}
		default:
			routed = append(routed, m[1]+" "+m[2])
		}
	}
	slices.Sort(documented)
	slices.Sort(routed)
	if !slices.Equal(documented, routed) {
		t.Errorf("documented:\n%s\nrouted:\n%s", strings.Join(documented, "\n"), strings.Join(routed, "\n"))
	}
}
