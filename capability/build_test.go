package capability

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite golden files in testdata/golden")

func readCard(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "cards", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func buildCard(t *testing.T, name string) *Profile {
	t.Helper()
	p, err := Build(readCard(t, name), Options{ID: "agent", URL: "https://agents.example.com", Legacy: strings.HasPrefix(name, "v02-")})
	if err != nil {
		t.Fatalf("Build(%s): %v", name, err)
	}
	return p
}

// TestBuild_Golden builds a profile from every card in testdata/cards and
// compares it, or the error, with testdata/golden/NAME.golden. Run
// `go test ./capability -update` to rewrite the golden files after a
// deliberate change, and review the diff.
func TestBuild_Golden(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob(filepath.Join("testdata", "cards", "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no cards: %v", err)
	}
	for _, path := range files {
		name := filepath.Base(path)
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			raw := readCard(t, name)
			p, err := Build(raw, Options{ID: "agent", URL: "https://agents.example.com", Legacy: strings.HasPrefix(name, "v02-")})
			var got []byte
			if err != nil {
				if !errors.Is(err, ErrInvalidCard) {
					t.Fatalf("error %v does not match ErrInvalidCard", err)
				}
				got = []byte("error: " + err.Error() + "\n")
			} else {
				got, err = json.MarshalIndent(p, "", "  ")
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, '\n')
			}
			if strings.HasPrefix(name, "bad-") != bytes.HasPrefix(got, []byte("error: ")) {
				t.Errorf("bad-* cards must fail and others must build; got:\n%s", got)
			}
			golden := filepath.Join("testdata", "golden", strings.TrimSuffix(name, ".json")+".golden")
			if *update {
				if err := os.WriteFile(golden, got, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test ./capability -update to create it)", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("profile differs from %s (-update rewrites it)\ngot:\n%s\nwant:\n%s", golden, got, want)
			}
		})
	}
}

func TestBuild_Facts(t *testing.T) {
	t.Parallel()
	tests := []struct {
		card       string
		compatible bool
		reason     string
		versions   map[string][]string
		supports   []string
		lacks      []string
		tiers      map[string]Tier
		steering   Steering
		warning    string
	}{
		{
			card: "v1-minimal.json", compatible: true,
			versions: map[string][]string{BindingJSONRPC: {"1.0"}},
			supports: []string{SendMessage, GetTask, ListTasks, CancelTask},
			lacks:    []string{Streaming, PushNotifications, Steerable},
			tiers:    map[string]Tier{SendMessage: TierImplicit},
		},
		{
			card: "v1-full.json", compatible: true,
			versions: map[string][]string{BindingJSONRPC: {"1.0"}, BindingHTTPJSON: {"1.0"}, BindingGRPC: {"1.0"}},
			supports: []string{"streaming_message", "streamingMessage", PushNotifications, ExtendedAgentCard, SteeringURI, Steerable, Interruptible, MultiTenant},
			tiers:    map[string]Tier{Streaming: TierDeclared, SteeringURI: TierDeclared},
			steering: Steering{Interruptible: true, Steerable: true},
		},
		{
			card: "v1-steerable-only.json", compatible: true,
			supports: []string{Steerable}, lacks: []string{Interruptible},
			steering: Steering{Steerable: true},
		},
		{
			card: "v1-contract-fields.json", compatible: true,
			supports: []string{PauseResume, Streaming, ContextReuse, MultiTenant, MessageHistoryInjection},
		},
		{
			card: "v1-contract-camel.json", compatible: true,
			supports: []string{PauseResume, Streaming, ContextReuse, MultiTenant, MessageHistoryInjection},
		},
		{
			card: "v1-deprecated-artifact-streaming.json", compatible: true,
			tiers:   map[string]Tier{ArtifactStreaming: TierDeprecated},
			warning: `declares deprecated capability "artifact_streaming"`,
		},
		{
			card: "v1-grpc-2.0-only.json", compatible: false,
			reason:   "speaks only 2.0 over GRPC; orchd speaks 0.3, 1.0",
			versions: map[string][]string{BindingGRPC: {"2.0"}},
		},
		{
			card: "v1-grpc-only.json", compatible: true,
			versions: map[string][]string{BindingGRPC: {"1.0"}},
		},
		{
			card: "v1-multi-tenant-by-interface.json", compatible: true,
			tiers: map[string]Tier{MultiTenant: TierDeclared},
		},
		{card: "v1-unknown-binding.json", compatible: true},
		{
			card: "v03-minimal.json", compatible: true,
			versions: map[string][]string{BindingJSONRPC: {"0.3"}},
		},
		{
			card: "v03-full.json", compatible: true,
			supports: []string{Streaming, PushNotifications, ExtendedAgentCard},
			tiers:    map[string]Tier{StateTransitionHistory: TierDeprecated},
		},
		{card: "v03-steering.json", compatible: true, steering: Steering{Interruptible: true, Steerable: true}},
		{card: "v03-dual-format.json", compatible: true},
		{
			card: "v02-minimal.json", compatible: false,
			reason:   "speaks only 0.2 over JSONRPC; orchd speaks 0.3, 1.0",
			versions: map[string][]string{BindingJSONRPC: {"0.2"}},
		},
		{card: "v02-5.json", compatible: false, versions: map[string][]string{BindingJSONRPC: {"0.2"}}},
	}
	for _, tt := range tests {
		t.Run(tt.card, func(t *testing.T) {
			t.Parallel()
			p := buildCard(t, tt.card)
			if p.ClientCompatible != tt.compatible {
				t.Errorf("ClientCompatible = %v, want %v (reason %q)", p.ClientCompatible, tt.compatible, p.IncompatibleReason)
			}
			if tt.reason != "" && p.IncompatibleReason != tt.reason {
				t.Errorf("IncompatibleReason = %q, want %q", p.IncompatibleReason, tt.reason)
			}
			for b, want := range tt.versions {
				if got := p.Versions(b); !slices.Equal(got, want) {
					t.Errorf("Versions(%s) = %v, want %v", b, got, want)
				}
			}
			for _, c := range tt.supports {
				if !p.Supports(c) {
					t.Errorf("Supports(%q) = false, want true", c)
				}
			}
			for _, c := range tt.lacks {
				if p.Supports(c) {
					t.Errorf("Supports(%q) = true, want false", c)
				}
			}
			for c, want := range tt.tiers {
				if got, ok := p.Tier(c); !ok || got != want {
					t.Errorf("Tier(%q) = %v, %v; want %v", c, got, ok, want)
				}
			}
			if p.Steering != tt.steering {
				t.Errorf("Steering = %+v, want %+v", p.Steering, tt.steering)
			}
			if tt.warning != "" && !slices.Contains(p.Warnings, tt.warning) {
				t.Errorf("Warnings = %q, want one %q", p.Warnings, tt.warning)
			}
			sdk, err := p.AgentCard()
			if err != nil || len(sdk.SupportedInterfaces) == 0 || sdk.Name != p.Name {
				t.Errorf("AgentCard() = %+v, %v; want a card with interfaces", sdk, err)
			}
			for _, it := range sdk.SupportedInterfaces {
				if _, _, ok := normalizeVersion(string(it.ProtocolVersion)); ok && strings.Count(string(it.ProtocolVersion), ".") != 1 {
					t.Errorf("interface version %q not in Major.Minor form", it.ProtocolVersion)
				}
			}
			if !strings.HasPrefix(p.Digest, "sha256:") || len(p.Digest) != len("sha256:")+64 {
				t.Errorf("Digest = %q", p.Digest)
			}
		})
	}
}

func TestBuild_Errors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		card string
		path string
		msg  string
	}{
		{"bad-not-json.json", "", "not valid JSON"},
		{"bad-top-array.json", "", "want a JSON object, got array"},
		{"bad-name-number.json", "name", "want string, got number"},
		{"bad-streaming-string.json", "capabilities.streaming", "want boolean, got string"},
		{"bad-interfaces-object.json", "supportedInterfaces", "want array, got object"},
		{"bad-interface-no-url.json", "supportedInterfaces[1].url", "required field is missing or empty"},
		{"bad-no-interfaces.json", "supportedInterfaces", "declares no interface"},
		{"bad-skills-tags-string.json", "skills[0].tags", "want array, got string"},
		{"bad-extension-params-array.json", "capabilities.extensions[0].params", "want object, got array"},
		{"bad-deep-nesting.json", "", "more than the limit of 32"},
		{"bad-empty.json", "", "card is empty"},
		{"bad-null.json", "", "want a JSON object, got null"},
	}
	for _, tt := range tests {
		t.Run(tt.card, func(t *testing.T) {
			t.Parallel()
			_, err := Build(readCard(t, tt.card), Options{})
			var ce *CardError
			if !errors.As(err, &ce) {
				t.Fatalf("Build error = %v, want *CardError", err)
			}
			if ce.Path != tt.path || !strings.Contains(ce.Error(), tt.msg) {
				t.Errorf("error = path %q, %q; want path %q containing %q", ce.Path, ce.Error(), tt.path, tt.msg)
			}
		})
	}
}

func TestBuild_Limits(t *testing.T) {
	t.Parallel()
	raw := readCard(t, "v1-full.json")
	if _, err := Build(raw, Options{MaxBytes: 100}); err == nil || !strings.Contains(err.Error(), "more than the limit of 100") {
		t.Errorf("MaxBytes: err = %v", err)
	}
	if _, err := Build(append(append([]byte{}, raw...), []byte(" {}")...), Options{}); err == nil || !strings.Contains(err.Error(), "after the card") {
		t.Errorf("trailing data: err = %v", err)
	}
}

func TestBuild_DigestIgnoresFormatting(t *testing.T) {
	t.Parallel()
	a := []byte(`{"name":"A","url":"http://a.example.com","skills":[],"capabilities":{"streaming":true}}`)
	b := []byte("{\n  \"capabilities\": {\"streaming\": true},\n  \"skills\": [],\n  \"url\": \"http://a.example.com\",\n  \"name\": \"A\"\n}")
	c := []byte(`{"name":"B","url":"http://a.example.com","skills":[],"capabilities":{"streaming":true}}`)
	pa, errA := Build(a, Options{})
	pb, errB := Build(b, Options{})
	pc, errC := Build(c, Options{})
	if err := errors.Join(errA, errB, errC); err != nil {
		t.Fatal(err)
	}
	if pa.Digest != pb.Digest {
		t.Errorf("same card, different formatting: %s != %s", pa.Digest, pb.Digest)
	}
	if pa.Digest == pc.Digest {
		t.Errorf("different cards share digest %s", pa.Digest)
	}
}

func TestBuild_VersionRange(t *testing.T) {
	t.Parallel()
	card := `{"name":"R","minProtocolVersion":"1.0","max_protocol_version":"1.1","supportedInterfaces":[
		{"url":"http://r.example.com","protocolBinding":"JSONRPC","protocolVersions":["0.3","1.0","1.1","2.0"]}]}`
	p, err := Build([]byte(card), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got := p.Versions(BindingJSONRPC); !slices.Equal(got, []string{"1.0", "1.1"}) {
		t.Errorf("Versions = %v, want [1.0 1.1]", got)
	}
	if p.MinProtocolVersion != "1.0" || p.MaxProtocolVersion != "1.1" {
		t.Errorf("range = %s–%s", p.MinProtocolVersion, p.MaxProtocolVersion)
	}
	if len(p.Warnings) != 2 {
		t.Errorf("want a warning per dropped version, got %q", p.Warnings)
	}
	_, err = Build([]byte(`{"name":"R","url":"http://r.example.com","minProtocolVersion":"1.2","maxProtocolVersion":"1.0"}`), Options{})
	var ce *CardError
	if !errors.As(err, &ce) || ce.Path != "minProtocolVersion" {
		t.Errorf("inverted range: err = %v", err)
	}
}

func TestProfile_Compatible(t *testing.T) {
	t.Parallel()
	p := buildCard(t, "v1-contract-fields.json")
	tests := []struct {
		constraint string
		want       bool
	}{
		{">= 0.3, < 2.0", true},
		{"~> 1.0", true},
		{">= 2.0", false},
		{"= 0.2", false},
	}
	for _, tt := range tests {
		got, err := p.Compatible(tt.constraint)
		if err != nil || got != tt.want {
			t.Errorf("Compatible(%q) = %v, %v; want %v", tt.constraint, got, err, tt.want)
		}
	}
	if _, err := p.Compatible("not a constraint"); err == nil {
		t.Error("Compatible accepted a malformed constraint")
	}
}

func TestBuild_DeprecatedOption(t *testing.T) {
	t.Parallel()
	p, err := Build(readCard(t, "v1-full.json"), Options{Deprecated: []string{"pushNotifications"}})
	if err != nil {
		t.Fatal(err)
	}
	if c := p.Capabilities[PushNotifications]; c.Tier != TierDeprecated || !c.Deprecated {
		t.Errorf("push_notifications = %+v, want deprecated", c)
	}
}

func TestBuild_SteeringParamWrongType(t *testing.T) {
	t.Parallel()
	card := `{"name":"S","url":"http://s.example.com","capabilities":{"extensions":[
		{"uri":"` + SteeringURI + `","params":{"steerable":"yes","interruptible":true}}]}}`
	p, err := Build([]byte(card), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if p.Steering != (Steering{Interruptible: true}) || p.Supports(Steerable) {
		t.Errorf("Steering = %+v", p.Steering)
	}
	if len(p.Warnings) != 1 || !strings.Contains(p.Warnings[0], "params.steerable: want boolean, got string") {
		t.Errorf("Warnings = %q", p.Warnings)
	}
}

// TestBuild_HostileSizeIsLinear builds a card just under the size limit
// made of thousands of interfaces and tags; work that grew quadratically
// with them would take minutes, not the milliseconds this takes.
func TestBuild_HostileSizeIsLinear(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	b.WriteString(`{"name":"H","supportedInterfaces":[`)
	for i := 0; b.Len() < 480_000; i++ {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `{"url":"http://h%d.example.com","protocolBinding":"JSONRPC","protocolVersion":"1.0"}`, i)
	}
	b.WriteString(`],"skills":[{"id":"s","tags":[`)
	for i := 0; b.Len() < 1_000_000; i++ {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `"t%d"`, i)
	}
	b.WriteString(`]}]}`)
	start := time.Now()
	p, err := Build([]byte(b.String()), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Protocols) < 5000 || len(p.Skills[0].Tags) < 50_000 {
		t.Fatalf("card not read whole: %d protocols, %d tags", len(p.Protocols), len(p.Skills[0].Tags))
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("building a 1 MB card took %s", d)
	}
}
