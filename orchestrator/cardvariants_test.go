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
	"github.com/orchd/orchd/internal/a2aschema"
	"github.com/orchd/orchd/internal/testcmp"
)

// agentCardSchema compiles the A2A 1.0.0 AgentCard definition from
// testdata/a2a-schema (see its README).
func agentCardSchema(t *testing.T) *jsonschema.Schema {
	t.Helper()
	s, err := a2aschema.AgentCard("testdata/a2a-schema/a2a-v1.0.0-agentcard.json")
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

// getCard fetches base's card at the well-known path with the given
// request headers.
func getCard(t *testing.T, base string, headers map[string]string) (int, http.Header, []byte) {
	t.Helper()
	return getCardAt(t, base, "/.well-known/agent-card.json", headers)
}

// getCardAt fetches base's card at path with the given request headers.
func getCardAt(t *testing.T, base, path string, headers map[string]string) (int, http.Header, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), "GET", base+path, nil)
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
		// secured is whether the card declares security.
		secured bool
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
		}, secured: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg := loadDefaults(t)
			cfg.Agent.Skills = []SkillConfig{{ID: "research", Tags: []string{"web"}}}
			tc.config(&cfg)
			base := startDaemon(t, cfg)

			// A 1.x client, and one that names no version or one orchd does
			// not know, gets the 1.0 card.
			for _, v := range []string{"1.0", "1", "1.2", " 1.0 ", "", "2.0", "banana"} {
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
			if _, _, none := getCard(t, base, nil); !bytes.Equal(none, v1) {
				t.Errorf("a request without A2A-Version did not get the 1.0 card:\n%s", none)
			}
			// A 0.x client gets the dual card, and so does every client at
			// the 0.2-era path but one that asks for 1.x.
			for _, v := range []string{"0.3", "0.3.0", "0.2", "legacy path", "legacy path 2.0"} {
				path, hdr := "/.well-known/agent-card.json", map[string]string{"A2A-Version": v}
				if rest, ok := strings.CutPrefix(v, "legacy path"); ok {
					path, hdr = "/.well-known/agent.json", map[string]string{"A2A-Version": strings.TrimSpace(rest)}
				}
				_, h, dual := getCardAt(t, base, path, hdr)
				if bytes.Equal(dual, v1) {
					t.Errorf("A2A-Version %q got the 1.0 card", v)
				}
				if got := schemaFailures(t, schema, dual); !slices.Equal(got, tc.dualFails) {
					t.Errorf("A2A-Version %q: the dual card fails the 1.0 schema with\n%q, want\n%q", v, got, tc.dualFails)
				}
				if !slices.Contains(h.Values("Vary"), "A2A-Version") {
					t.Errorf("A2A-Version %q: Vary = %q, want A2A-Version", v, h.Values("Vary"))
				}
			}
			if _, _, b := getCardAt(t, base, "/.well-known/agent.json", map[string]string{"A2A-Version": "1.0"}); !bytes.Equal(b, v1) {
				t.Errorf("A2A-Version 1.0 at /.well-known/agent.json did not get the 1.0 card:\n%s", b)
			}
			_, _, dual := getCard(t, base, map[string]string{"A2A-Version": "0.3"})

			// orchd's registry reads both.
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
			// a2a-go's resolver sends no A2A-Version. It reads the 1.0 card
			// at the well-known path with either parser when the card
			// declares no security; a2a-go v2.4.0 cannot read the 1.0
			// shape of security requirements (StringList scopes, a2a-go
			// issue #430), so a client of an orchd that declares security
			// reads the dual card at the 0.2-era path.
			var opts []agentcard.ResolveOption
			if tc.secured {
				opts = append(opts, agentcard.WithPath("/.well-known/agent.json"))
				if _, err := agentcard.DefaultResolver.Resolve(t.Context(), base); err == nil {
					t.Errorf("a2a-go v2.4.0 read StringList scopes at the well-known path: drop the 0.2-era path here and in docs/a2a.md")
				}
			}
			for name, parser := range map[string]agentcard.Parser{"default": agentcard.DefaultCardParser, "a2av0": a2av0.NewAgentCardParser()} {
				r := &agentcard.Resolver{Client: http.DefaultClient, CardParser: parser}
				card, err := r.Resolve(t.Context(), base, opts...)
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
	// The dual card is a 0.x client's; one that names no version gets the
	// 1.0 card, as one naming 1.0 does.
	dualHdr := map[string]string{"A2A-Version": "0.3"}
	_, hDual, dual := getCard(t, base, dualHdr)
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
	_, h, again := getCard(t, base, dualHdr)
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
		{"dual, its ETag", map[string]string{"A2A-Version": "0.3", "If-None-Match": etagDual}, 304, etagDual},
		{"dual, weak form of its ETag in a list", map[string]string{"A2A-Version": "0.3", "If-None-Match": `"x", W/` + etagDual}, 304, etagDual},
		{"dual, any", map[string]string{"A2A-Version": "0.3", "If-None-Match": "*"}, 304, etagDual},
		{"dual, the 1.0 ETag", map[string]string{"A2A-Version": "0.3", "If-None-Match": etagV1}, 200, etagDual},
		{"1.0, its ETag", map[string]string{"A2A-Version": "1.0", "If-None-Match": etagV1}, 304, etagV1},
		{"no version, the 1.0 ETag", map[string]string{"If-None-Match": etagV1}, 304, etagV1},
		{"no version, the dual ETag", map[string]string{"If-None-Match": etagDual}, 200, etagV1},
		{"1.0, the dual ETag", map[string]string{"A2A-Version": "1.0", "If-None-Match": etagDual}, 200, etagV1},
		{"since Last-Modified", map[string]string{"A2A-Version": "0.3", "If-Modified-Since": lm}, 304, etagDual},
		{"since later", map[string]string{"A2A-Version": "0.3", "If-Modified-Since": after}, 304, etagDual},
		{"since earlier", map[string]string{"A2A-Version": "0.3", "If-Modified-Since": before}, 200, etagDual},
		{"since garbage", map[string]string{"A2A-Version": "0.3", "If-Modified-Since": "yesterday"}, 200, etagDual},
		{"1.0 since Last-Modified", map[string]string{"A2A-Version": "1.0", "If-Modified-Since": lm}, 304, etagV1},
		{"If-None-Match wins over a matching date", map[string]string{"A2A-Version": "0.3", "If-None-Match": `"other"`, "If-Modified-Since": after}, 200, etagDual},
		{"If-None-Match wins over an old date", map[string]string{"A2A-Version": "0.3", "If-None-Match": etagDual, "If-Modified-Since": before}, 304, etagDual},
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
