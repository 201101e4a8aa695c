package capability

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
)

// securityCard returns a minimal 1.0 card carrying the given top-level
// security fields, as JSON object members ("" for none).
func securityCard(members string) []byte {
	card := `{"name":"Secure","version":"1","supportedInterfaces":[{"url":"https://a.example.com/rpc","protocolBinding":"JSONRPC","protocolVersion":"1.0"}],` +
		`"capabilities":{},"defaultInputModes":["text/plain"],"defaultOutputModes":["text/plain"],"skills":[]`
	if members != "" {
		card += "," + members
	}
	return []byte(card + "}")
}

// securityCard03 is securityCard for a 0.3 card.
func securityCard03(members string) []byte {
	card := `{"name":"Secure","version":"1","url":"https://a.example.com/rpc","protocolVersion":"0.3.0",` +
		`"capabilities":{},"defaultInputModes":["text/plain"],"defaultOutputModes":["text/plain"],"skills":[]`
	if members != "" {
		card += "," + members
	}
	return []byte(card + "}")
}

func TestBuild_Security(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		card     []byte
		want     *Security
		warnings []string // substrings, one per expected warning
	}{
		{name: "none", card: securityCard("")},
		{
			name: "v1 every scheme type",
			card: securityCard(`"securitySchemes":{
				"key":{"apiKeySecurityScheme":{"location":"query","name":"api_key"}},
				"bearer":{"httpAuthSecurityScheme":{"scheme":"Bearer","bearerFormat":"JWT"}},
				"corp":{"oauth2SecurityScheme":{"flows":{"clientCredentials":{"tokenUrl":"https://idp.example.com/token","scopes":{"a2a":"call agents","read":"read"}}},"oauth2MetadataUrl":"https://idp.example.com/.well-known/oauth-authorization-server"}},
				"oidc":{"openIdConnectSecurityScheme":{"openIdConnectUrl":"https://idp.example.com/.well-known/openid-configuration"}},
				"mtls":{"mtlsSecurityScheme":{}}},
				"securityRequirements":[{"schemes":{"corp":{"list":["a2a"]}}},{"schemes":{"mtls":{"list":[]},"key":{"list":[]}}}]`),
			want: &Security{
				Schemes: map[string]Scheme{
					"key":    {Type: SchemeAPIKey, In: InQuery, Name: "api_key"},
					"bearer": {Type: SchemeHTTP, HTTPScheme: "bearer", BearerFormat: "JWT"},
					"corp": {Type: SchemeOAuth2, Flows: []string{"clientCredentials"}, TokenURL: "https://idp.example.com/token",
						Scopes: []string{"a2a", "read"}, MetadataURL: "https://idp.example.com/.well-known/oauth-authorization-server"},
					"oidc": {Type: SchemeOpenIDConnect, OpenIDConnectURL: "https://idp.example.com/.well-known/openid-configuration"},
					"mtls": {Type: SchemeMutualTLS},
				},
				Requirements: [][]Requirement{
					{{Scheme: "corp", Scopes: []string{"a2a"}}},
					{{Scheme: "key"}, {Scheme: "mtls"}},
				},
			},
		},
		{
			name: "v1 plain scope arrays",
			card: securityCard(`"securitySchemes":{"corp":{"oauth2SecurityScheme":{"flows":{"authorizationCode":{"authorizationUrl":"https://idp/a","tokenUrl":"https://idp/t","scopes":{}}}}}},
				"securityRequirements":[{"schemes":{"corp":["x","x","y"]}}]`),
			want: &Security{
				Schemes:      map[string]Scheme{"corp": {Type: SchemeOAuth2, Flows: []string{"authorizationCode"}}},
				Requirements: [][]Requirement{{{Scheme: "corp", Scopes: []string{"x", "y"}}}},
			},
		},
		{
			name: "v03 types",
			card: securityCard03(`"securitySchemes":{
				"key":{"type":"apiKey","in":"cookie","name":"session"},
				"basic":{"type":"http","scheme":"basic"},
				"m":{"type":"mutualTLS"}},
				"security":[{"key":[]},{"basic":[],"m":[]}]`),
			want: &Security{
				Schemes: map[string]Scheme{
					"key":   {Type: SchemeAPIKey, In: InCookie, Name: "session"},
					"basic": {Type: SchemeHTTP, HTTPScheme: "basic"},
					"m":     {Type: SchemeMutualTLS},
				},
				Requirements: [][]Requirement{{{Scheme: "key"}}, {{Scheme: "basic"}, {Scheme: "m"}}},
			},
		},
		{
			name: "schemes without requirements",
			card: securityCard(`"securitySchemes":{"b":{"httpAuthSecurityScheme":{"scheme":"bearer"}}}`),
			want: &Security{Schemes: map[string]Scheme{"b": {Type: SchemeHTTP, HTTPScheme: "bearer"}}, Requirements: [][]Requirement{}},
		},
		{
			name: "anonymous alternative",
			card: securityCard(`"securitySchemes":{"b":{"httpAuthSecurityScheme":{"scheme":"bearer"}}},"securityRequirements":[{"schemes":{"b":{"list":[]}}},{"schemes":{}}]`),
			want: &Security{Schemes: map[string]Scheme{"b": {Type: SchemeHTTP, HTTPScheme: "bearer"}},
				Requirements: [][]Requirement{{{Scheme: "b"}}, {}}},
		},
		{
			name: "bad shapes are warnings",
			card: securityCard03(`"securitySchemes":{
				"weird":{"type":"kerberos"},
				"nokey":{"type":"apiKey","in":"body","name":"k"},
				"noname":{"type":"apiKey","in":"header"},
				"noscheme":{"type":"http"},
				"notobj":"bearer",
				"badflows":{"type":"oauth2","flows":[1]}},
				"security":[{"weird":[]},"x",{"nokey":"all"},{"noscheme":[1,"s"]}]`),
			want: &Security{
				Schemes: map[string]Scheme{
					"nokey":    {Type: SchemeAPIKey, Name: "k"},
					"noname":   {Type: SchemeAPIKey},
					"noscheme": {Type: SchemeHTTP, HTTPScheme: "bearer"},
					"badflows": {Type: SchemeOAuth2},
				},
				Requirements: [][]Requirement{{{Scheme: "weird"}}, {{Scheme: "nokey"}}, {{Scheme: "noscheme", Scopes: []string{"s"}}}},
			},
			warnings: []string{
				`securitySchemes.badflows.flows: want object, got array`,
				`securitySchemes.nokey: API key location "body"`,
				`securitySchemes.noname: API key scheme names no header`,
				`securitySchemes.noscheme: HTTP auth scheme names no scheme; read as bearer`,
				`securitySchemes.notobj: want object, got string; scheme ignored`,
				`securitySchemes.weird.type: unknown security scheme type "kerberos"`,
				`security[0]: requires scheme "weird", which the card does not declare`,
				`security[1]: want object, got string; ignored`,
				`security[2].nokey: want an array of scopes, got string`,
				`security[3].noscheme[0]: want string, got number; ignored`,
			},
		},
		{
			name: "v1 wrapper with two schemes",
			card: securityCard(`"securitySchemes":{"two":{"apiKeySecurityScheme":{"location":"header","name":"k"},"mtlsSecurityScheme":{}}}`),
			want: &Security{Schemes: map[string]Scheme{}, Requirements: [][]Requirement{}},
			warnings: []string{
				`securitySchemes.two: want exactly one of`,
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			raw := tt.card
			p, err := Build(raw, Options{ID: "a"})
			if err != nil {
				// a2a-go refuses some shapes that orchd only warns
				// about; the profile must still read them.
				doc, dErr := decodeCard(raw, Options{})
				if dErr != nil {
					t.Fatalf("Build: %v; decode: %v", err, dErr)
				}
				p = &Profile{}
				readSecurity(doc, p)
			}
			if !reflect.DeepEqual(p.Security, tt.want) {
				got, _ := json.Marshal(p.Security)
				want, _ := json.Marshal(tt.want)
				t.Errorf("Security:\n got %s\nwant %s", got, want)
			}
			if len(p.Warnings) != len(tt.warnings) {
				t.Errorf("warnings %q, want %d of them", p.Warnings, len(tt.warnings))
			}
			for _, w := range tt.warnings {
				found := false
				for _, g := range p.Warnings {
					found = found || strings.Contains(g, w)
				}
				if !found {
					t.Errorf("no warning contains %q in %q", w, p.Warnings)
				}
			}
		})
	}
}

// TestBuild_SecurityJSON checks the profile's JSON leaves security out for
// a card that declares none.
func TestBuild_SecurityJSON(t *testing.T) {
	t.Parallel()
	p, err := Build(securityCard(""), Options{})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(p)
	if strings.Contains(string(b), `"security"`) {
		t.Fatalf("profile of a card without security has a security field: %s", b)
	}
}

func TestBuild_SecurityBounds(t *testing.T) {
	t.Parallel()
	var schemes, reqs []string
	for i := range maxSecuritySchemes + 5 {
		schemes = append(schemes, `"s`+strings.Repeat("x", i)+`":{"type":"mutualTLS"}`)
	}
	for range maxSecurityAlternatives + 3 {
		reqs = append(reqs, `{"s":[]}`)
	}
	card := securityCard03(`"securitySchemes":{` + strings.Join(schemes, ",") + `},"security":[` + strings.Join(reqs, ",") + `]`)
	p, err := Build(card, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(p.Security.Schemes); n != maxSecuritySchemes {
		t.Errorf("%d schemes kept, want %d", n, maxSecuritySchemes)
	}
	if n := len(p.Security.Requirements); n != maxSecurityAlternatives {
		t.Errorf("%d alternatives kept, want %d", n, maxSecurityAlternatives)
	}
	if len(p.Warnings) != 2 {
		t.Errorf("warnings %q, want one per bound", p.Warnings)
	}
}

func TestScheme_Describe(t *testing.T) {
	t.Parallel()
	tests := []struct {
		s    Scheme
		want string
	}{
		{Scheme{Type: SchemeOAuth2}, `oauth2 scheme "n"`},
		{Scheme{Type: SchemeHTTP, HTTPScheme: "bearer"}, `http bearer scheme "n"`},
		{Scheme{Type: SchemeAPIKey, In: InHeader, Name: "X-Key"}, `apiKey scheme "n" (header X-Key)`},
		{Scheme{Type: SchemeAPIKey}, `apiKey scheme "n" (in no location orchd can send)`},
		{Scheme{Type: SchemeMutualTLS}, `mutualTLS scheme "n"`},
	}
	for _, tt := range tests {
		if got := tt.s.Describe("n"); got != tt.want {
			t.Errorf("Describe = %q, want %q", got, tt.want)
		}
	}
}

// FuzzSecurity reads arbitrary security declarations: Build must not
// panic, must fail only with ErrInvalidCard, and every requirement it
// keeps must name a scheme and stay within the bounds. Seeds live in
// testdata/fuzz/FuzzSecurity.
func FuzzSecurity(f *testing.F) {
	f.Add(`"securitySchemes":{"b":{"httpAuthSecurityScheme":{"scheme":"bearer"}}},"securityRequirements":[{"schemes":{"b":{"list":[]}}}]`, false)
	f.Add(`"securitySchemes":{"k":{"type":"apiKey","in":"header","name":"X"}},"security":[{"k":[]}]`, true)
	f.Add(`"securitySchemes":{"o":{"oauth2SecurityScheme":{"flows":{"clientCredentials":{"tokenUrl":"https://i/t","scopes":{"a":"b"}}}}}}`, false)
	f.Fuzz(func(t *testing.T, members string, v03 bool) {
		card := securityCard(members)
		if v03 {
			card = securityCard03(members)
		}
		p, err := Build(card, Options{})
		if err != nil {
			if !errors.Is(err, ErrInvalidCard) {
				t.Fatalf("error %v is not an ErrInvalidCard", err)
			}
			return
		}
		if p.Security == nil {
			return
		}
		if len(p.Security.Schemes) > maxSecuritySchemes || len(p.Security.Requirements) > maxSecurityAlternatives {
			t.Fatalf("bounds exceeded: %d schemes, %d alternatives", len(p.Security.Schemes), len(p.Security.Requirements))
		}
		for _, alt := range p.Security.Requirements {
			if len(alt) > maxSchemesPerAlt {
				t.Fatalf("alternative of %d schemes", len(alt))
			}
			for _, r := range alt {
				if len(r.Scopes) > maxScopes {
					t.Fatalf("%d scopes", len(r.Scopes))
				}
			}
		}
		for name, s := range p.Security.Schemes {
			if s.Describe(name) == "" || s.Type == "" {
				t.Fatalf("scheme %q without a type", name)
			}
		}
	})
}
