package orchestrator

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient/agentcard"
	"github.com/a2aproject/a2a-go/v2/a2acompat/a2av0"
	"github.com/google/go-cmp/cmp"
	"github.com/lestrrat-go/jwx/v3/jwk"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"

	"github.com/orchd/orchd/capability"
	"github.com/orchd/orchd/internal/testcmp"
)

// schemaBase is where the A2A 1.0.0 schema bundle's definitions are
// registered, each under the file name its $refs use.
const schemaBase = "https://a2a-protocol.org/v1.0.0/spec/"

// agentCardSchema compiles the A2A 1.0.0 AgentCard definition from
// testdata/a2a-schema (see its README).
func agentCardSchema(t *testing.T) *jsonschema.Schema {
	t.Helper()
	f, err := os.Open("testdata/a2a-schema/a2a-v1.0.0-agentcard.json")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	doc, err := jsonschema.UnmarshalJSON(f)
	if err != nil {
		t.Fatal(err)
	}
	defs, _ := doc.(map[string]any)["definitions"].(map[string]any)
	c := jsonschema.NewCompiler()
	for title, def := range defs {
		name := strings.ReplaceAll(title, " ", "")
		pkg := "lf.a2a.v1."
		if name == "Struct" {
			pkg = "google.protobuf."
		}
		if err := c.AddResource(schemaBase+pkg+name+".jsonschema.json", def); err != nil {
			t.Fatal(err)
		}
	}
	s, err := c.Compile(schemaBase + "lf.a2a.v1.AgentCard.jsonschema.json")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// schemaFailures validates card against s and lists what fails, one entry
// per leaf error: "<instance location>: unexpected <properties>" for
// properties the schema does not allow, else the location and the error.
func schemaFailures(t *testing.T, s *jsonschema.Schema, card []byte) []string {
	t.Helper()
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(card))
	if err != nil {
		t.Fatal(err)
	}
	err = s.Validate(inst)
	if err == nil {
		return nil
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		t.Fatal(err)
	}
	var out []string
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) > 0 {
			for _, c := range e.Causes {
				walk(c)
			}
			return
		}
		at := "/" + strings.Join(e.InstanceLocation, "/")
		if ap, ok := e.ErrorKind.(*kind.AdditionalProperties); ok {
			props := slices.Clone(ap.Properties)
			slices.Sort(props)
			out = append(out, at+": unexpected "+strings.Join(props, ","))
			return
		}
		if ty, ok := e.ErrorKind.(*kind.Type); ok {
			out = append(out, fmt.Sprintf("%s: got %s, want %s", at, ty.Got, strings.Join(ty.Want, " or ")))
			return
		}
		out = append(out, fmt.Sprintf("%s: %v", at, e.ErrorKind))
	}
	walk(ve)
	slices.Sort(out)
	return out
}

// cardHeaders is what the card tests check of a card's answer: its
// status and the headers that make it cacheable per A2A version.
type cardHeaders struct {
	Status             int
	ETag, LastModified string
	// VaryVersion is whether Vary names A2A-Version; CacheControl whether
	// there is a Cache-Control header.
	VaryVersion, CacheControl bool
}

// cardHeadersOf reads h's cardHeaders, leaving Status to the caller.
func cardHeadersOf(h http.Header) cardHeaders {
	return cardHeaders{ETag: h.Get("ETag"), LastModified: h.Get("Last-Modified"),
		VaryVersion: slices.Contains(h.Values("Vary"), "A2A-Version"), CacheControl: h.Get("Cache-Control") != ""}
}

// getCard fetches base's card with the given request headers.
func getCard(t *testing.T, base string, headers map[string]string) (int, http.Header, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), "GET", base+"/.well-known/agent-card.json", nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, b
}

// signingKeyFile writes a new P-256 key as PKCS #8 PEM and returns its
// path and public JWK.
func signingKeyFile(t *testing.T) (string, jwk.Key) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	path := t.TempDir() + "/card.key"
	writeFile(t, path, string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})))
	pub, err := jwk.Import(&key.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	return path, pub
}

// The dual card's 0.3 fields, which the 1.0 schema does not allow.
const dual03Fields = "/: unexpected additionalInterfaces,preferredTransport,protocolVersion,url"

func TestCard_VariantsAgainstTheA2A1Schema(t *testing.T) {
	t.Parallel()
	schema := agentCardSchema(t)
	keyPath, pub := signingKeyFile(t)
	set := jwk.NewSet()
	if err := set.AddKey(pub); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		config func(*Config)
		// dualFails is what the 1.0 schema finds wrong with the dual card.
		dualFails []string
	}{
		{name: "no auth", config: func(*Config) {}, dualFails: []string{dual03Fields}},
		{name: "tokens, API key and signing key", config: func(c *Config) {
			c.Auth = authTokens()
			c.Auth.APIKeyHeader = "X-Api-Key"
			c.Agent.SigningKey = keyPath
		}, dualFails: []string{
			"/: unexpected additionalInterfaces,preferredTransport,protocolVersion,security,url",
			// a2a-go writes scopes as bare arrays, the proto as StringList.
			"/securityRequirements/0/schemes/apiKey: got array, want object",
			"/securityRequirements/1/schemes/bearer: got array, want object",
			// Each scheme in its 0.3 shape and a2av0's, beside the 1.0 one.
			"/securitySchemes/apiKey: unexpected apiKey,in,name,type",
			"/securitySchemes/bearer: unexpected description,http,scheme,type",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg := loadDefaults(t)
			cfg.Agent.Skills = []SkillConfig{{ID: "research", Tags: []string{"web"}}}
			tc.config(&cfg)
			base := startDaemon(t, cfg)

			for _, v := range []string{"1.0", "1", "1.2", " 1.0 "} {
				code, h, v1 := getCard(t, base, map[string]string{"A2A-Version": v})
				if code != 200 {
					t.Fatalf("A2A-Version %q: %d %s", v, code, v1)
				}
				if f := schemaFailures(t, schema, v1); f != nil {
					t.Errorf("A2A-Version %q: the 1.0 card fails the 1.0 schema: %q\n%s", v, f, v1)
				}
				if !slices.Contains(h.Values("Vary"), "A2A-Version") {
					t.Errorf("Vary = %q, want A2A-Version", h.Values("Vary"))
				}
			}
			_, _, v1 := getCard(t, base, map[string]string{"A2A-Version": "1.0"})
			for _, v := range []string{"", "0.3", "0.3.0", "2.0", "banana"} {
				_, _, dual := getCard(t, base, map[string]string{"A2A-Version": v})
				if bytes.Equal(dual, v1) {
					t.Errorf("A2A-Version %q got the 1.0 card", v)
				}
				if got := schemaFailures(t, schema, dual); !slices.Equal(got, tc.dualFails) {
					t.Errorf("A2A-Version %q: the dual card fails the 1.0 schema with\n%q, want\n%q", v, got, tc.dualFails)
				}
			}
			_, _, dual := getCard(t, base, nil)

			// orchd's registry reads both; a2a-go's resolver (which sends no
			// A2A-Version) gets the dual card and reads it with either parser.
			for name, b := range map[string][]byte{"1.0": v1, "dual": dual} {
				p, err := capability.Build(b, capability.Options{})
				if err != nil {
					t.Errorf("%s card: capability.Build: %v", name, err)
				} else if len(p.Protocols) != 4 || p.Name != cfg.Agent.Name {
					t.Errorf("%s card: %q with %d protocols, want %q with 4", name, p.Name, len(p.Protocols), cfg.Agent.Name)
				}
				if cfg.Agent.SigningKey != "" {
					if sig := capability.VerifyCardSignatures(b, capability.KeySet(set)); !sig.Verified {
						t.Errorf("%s card: signature does not verify: %+v", name, sig)
					}
				} else if capability.CardSigned(b) {
					t.Errorf("%s card is signed with no signing key", name)
				}
			}
			for name, parser := range map[string]agentcard.Parser{"default": agentcard.DefaultCardParser, "a2av0": a2av0.NewAgentCardParser()} {
				r := &agentcard.Resolver{Client: http.DefaultClient, CardParser: parser}
				card, err := r.Resolve(t.Context(), base)
				if err != nil {
					t.Errorf("a2a-go resolver with the %s parser: %v", name, err)
					continue
				}
				if len(card.SupportedInterfaces) != 4 || card.Name != cfg.Agent.Name {
					t.Errorf("a2a-go resolver with the %s parser: %q with %d interfaces, want %q with 4", name, card.Name, len(card.SupportedInterfaces), cfg.Agent.Name)
					continue
				}
				if cfg.Agent.SigningKey != "" && len(card.SecurityRequirements) != 2 {
					t.Errorf("a2a-go resolver with the %s parser: security requirements %v", name, card.SecurityRequirements)
				}
			}
			// The 1.0 card has a2a-go's 1.0 shape but for the security
			// requirements' scopes, which it writes as the proto's StringList.
			var got a2a.AgentCard
			err := json.Unmarshal(v1, &got)
			if cfg.Agent.SigningKey == "" && err != nil {
				t.Errorf("a2a-go cannot read the 1.0 card without security: %v", err)
			}
			if cfg.Agent.SigningKey != "" && !bytes.Contains(v1, []byte(`"schemes":{"apiKey":{"list":[]}}`)) {
				t.Errorf("1.0 card's requirements are not StringLists: %s", v1)
			}
		})
	}
}

func TestCard_ConditionalRequestsPerVariant(t *testing.T) {
	t.Parallel()
	base := startDaemon(t, loadDefaults(t))
	v1Hdr := map[string]string{"A2A-Version": "1.0"}
	_, hDual, dual := getCard(t, base, nil)
	_, hV1, v1 := getCard(t, base, v1Hdr)
	etagDual, etagV1, lm := hDual.Get("ETag"), hV1.Get("ETag"), hDual.Get("Last-Modified")
	if etagDual == "" || etagV1 == "" {
		t.Fatalf("ETags dual %q, 1.0 %q: want both", etagDual, etagV1)
	}
	if etagDual == etagV1 {
		t.Fatalf("ETags dual and 1.0 are both %q: want two different ones", etagDual)
	}
	modified, err := http.ParseTime(lm)
	if err != nil || hV1.Get("Last-Modified") != lm {
		t.Fatalf("Last-Modified dual %q, 1.0 %q: %v", lm, hV1.Get("Last-Modified"), err)
	}
	if modified.After(time.Now()) || time.Since(modified) > time.Minute {
		t.Errorf("Last-Modified %s is not when the card was built", lm)
	}
	_, h, again := getCard(t, base, nil)
	if diff := cmp.Diff(cardHeaders{LastModified: lm, ETag: etagDual}, cardHeadersOf(h), testcmp.Only[cardHeaders]("LastModified", "ETag")); diff != "" {
		t.Errorf("second fetch (-want +got):\n%s", diff)
	}
	if !bytes.Equal(again, dual) {
		t.Error("second fetch: other bytes")
	}
	before := modified.Add(-time.Hour).Format(http.TimeFormat)
	after := modified.Add(time.Hour).Format(http.TimeFormat)
	for _, tc := range []struct {
		name    string
		headers map[string]string
		status  int
		etag    string
	}{
		{"dual, its ETag", map[string]string{"If-None-Match": etagDual}, 304, etagDual},
		{"dual, weak form of its ETag in a list", map[string]string{"If-None-Match": `"x", W/` + etagDual}, 304, etagDual},
		{"dual, any", map[string]string{"If-None-Match": "*"}, 304, etagDual},
		{"dual, the 1.0 ETag", map[string]string{"If-None-Match": etagV1}, 200, etagDual},
		{"1.0, its ETag", map[string]string{"A2A-Version": "1.0", "If-None-Match": etagV1}, 304, etagV1},
		{"1.0, the dual ETag", map[string]string{"A2A-Version": "1.0", "If-None-Match": etagDual}, 200, etagV1},
		{"since Last-Modified", map[string]string{"If-Modified-Since": lm}, 304, etagDual},
		{"since later", map[string]string{"If-Modified-Since": after}, 304, etagDual},
		{"since earlier", map[string]string{"If-Modified-Since": before}, 200, etagDual},
		{"since garbage", map[string]string{"If-Modified-Since": "yesterday"}, 200, etagDual},
		{"1.0 since Last-Modified", map[string]string{"A2A-Version": "1.0", "If-Modified-Since": lm}, 304, etagV1},
		{"If-None-Match wins over a matching date", map[string]string{"If-None-Match": `"other"`, "If-Modified-Since": after}, 200, etagDual},
		{"If-None-Match wins over an old date", map[string]string{"If-None-Match": etagDual, "If-Modified-Since": before}, 304, etagDual},
	} {
		code, h, body := getCard(t, base, tc.headers)
		got := cardHeadersOf(h)
		got.Status = code
		want := cardHeaders{Status: tc.status, ETag: tc.etag, LastModified: lm, VaryVersion: true, CacheControl: true}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tc.name, diff)
		}
		wantBody := dual
		if tc.etag == etagV1 {
			wantBody = v1
		}
		if (code == 304 && len(body) != 0) || (code == 200 && !bytes.Equal(body, wantBody)) {
			t.Errorf("%s: body %.80s", tc.name, body)
		}
	}
	// CORS, as a2a-go serves public cards.
	if _, h, _ := getCard(t, base, nil); h.Get("Access-Control-Allow-Origin") != "*" {
		t.Errorf("Access-Control-Allow-Origin = %q", h.Get("Access-Control-Allow-Origin"))
	}
	req, _ := http.NewRequestWithContext(t.Context(), "OPTIONS", base+"/.well-known/agent-card.json", nil)
	req.Header.Set("Origin", "https://app.example")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("OPTIONS = %d", resp.StatusCode)
	}
	if got := resp.Header.Get("Access-Control-Allow-Origin"); got != "https://app.example" {
		t.Errorf("OPTIONS: Access-Control-Allow-Origin %q, want the origin", got)
	}
	if got := resp.Header.Get("Access-Control-Allow-Headers"); !strings.Contains(got, "A2A-Version") {
		t.Errorf("OPTIONS: Access-Control-Allow-Headers %q, want A2A-Version among them", got)
	}
}
