package credentials

import (
	"reflect"
	"strings"
	"testing"

	"github.com/orchd/orchd/capability"
)

// cardSecurity is a card declaring one scheme of each kind, requiring
// the alternatives given as lists of scheme names.
func cardSecurity(alts ...[]string) *capability.Security {
	s := &capability.Security{Schemes: map[string]capability.Scheme{
		"bearer": {Type: capability.SchemeHTTP, HTTPScheme: "bearer"},
		"basic":  {Type: capability.SchemeHTTP, HTTPScheme: "basic"},
		"digest": {Type: capability.SchemeHTTP, HTTPScheme: "digest"},
		"key":    {Type: capability.SchemeAPIKey, In: capability.InHeader, Name: "X-API-Key"},
		"corp":   {Type: capability.SchemeOAuth2, Flows: []string{"clientCredentials"}, TokenURL: "https://idp.example.com/token"},
		"oidc":   {Type: capability.SchemeOpenIDConnect, OpenIDConnectURL: "https://idp.example.com/.well-known/openid-configuration"},
		"m":      {Type: capability.SchemeMutualTLS},
	}, Requirements: [][]capability.Requirement{}}
	for _, alt := range alts {
		reqs := []capability.Requirement{}
		for _, name := range alt {
			r := capability.Requirement{Scheme: name}
			if name == "corp" {
				r.Scopes = []string{"a2a"}
			}
			reqs = append(reqs, r)
		}
		s.Requirements = append(s.Requirements, reqs)
	}
	return s
}

var (
	cfgBearer = &Config{Bearer: &Bearer{TokenFile: "/run/t"}}
	cfgOAuth  = &Config{OAuth2: &OAuth2{ClientID: "orchd", ClientSecretEnv: "S", TokenURL: "https://idp.example.com/token"}}
	cfgKey    = &Config{APIKey: &APIKey{ValueEnv: "K"}}
	cfgBasic  = &Config{Basic: &Basic{Username: "svc", PasswordEnv: "P"}}
	cfgTLS    = &Config{TLS: &TLS{CertFile: "c", KeyFile: "k"}}
	cfgCaller = &Config{ForwardCaller: true}
	cfgKeyTLS = &Config{APIKey: &APIKey{ValueEnv: "K"}, TLS: &TLS{CertFile: "c", KeyFile: "k"}}
)

func TestSatisfy(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		sec  *capability.Security
		cfg  *Config
		want Status
	}{
		{name: "no security, no config", want: Status{Satisfied: true, Using: "no credentials"}},
		{name: "no requirements, bearer sent anyway", sec: cardSecurity(), cfg: cfgBearer,
			want: Status{Configured: []string{KindBearer}, Satisfied: true, Using: "bearer token"}},
		{name: "no requirements, api key placed by the card's scheme", sec: cardSecurity(), cfg: cfgKey,
			want: Status{Configured: []string{KindAPIKey}, Satisfied: true, Using: `apiKey scheme "key" (header X-API-Key): API key in header X-API-Key`}},
		{name: "oauth2 required, nothing configured", sec: cardSecurity([]string{"corp"}),
			want: Status{Required: []string{`oauth2 scheme "corp" (scopes a2a)`},
				Reason: `needs oauth2 scheme "corp" (scopes a2a); no credentials configured for agent research`}},
		{name: "oauth2 required and configured", sec: cardSecurity([]string{"corp"}), cfg: cfgOAuth,
			want: Status{Required: []string{`oauth2 scheme "corp" (scopes a2a)`}, Configured: []string{KindOAuth2}, Satisfied: true,
				Using: `oauth2 scheme "corp": client-credentials token (scopes a2a)`}},
		{name: "oauth2 met by a static bearer token", sec: cardSecurity([]string{"corp"}), cfg: cfgBearer,
			want: Status{Required: []string{`oauth2 scheme "corp" (scopes a2a)`}, Configured: []string{KindBearer}, Satisfied: true,
				Using: `oauth2 scheme "corp": bearer token`}},
		{name: "bearer met by oauth2", sec: cardSecurity([]string{"bearer"}), cfg: cfgOAuth,
			want: Status{Required: []string{`http bearer scheme "bearer"`}, Configured: []string{KindOAuth2}, Satisfied: true,
				Using: `http bearer scheme "bearer": client-credentials token`}},
		{name: "openIdConnect met by the caller's token", sec: cardSecurity([]string{"oidc"}), cfg: cfgCaller,
			want: Status{Required: []string{`openIdConnect scheme "oidc"`}, Configured: []string{KindForwardCaller}, Satisfied: true,
				Using: `openIdConnect scheme "oidc": the caller's token`}},
		{name: "caller first, else bearer", sec: cardSecurity([]string{"bearer"}), cfg: &Config{Bearer: cfgBearer.Bearer, ForwardCaller: true},
			want: Status{Required: []string{`http bearer scheme "bearer"`}, Configured: []string{KindBearer, KindForwardCaller}, Satisfied: true,
				Using: `http bearer scheme "bearer": the caller's token, else bearer token`}},
		{name: "second alternative", sec: cardSecurity([]string{"corp"}, []string{"basic"}), cfg: cfgBasic,
			want: Status{Required: []string{`oauth2 scheme "corp" (scopes a2a)`, `http basic scheme "basic"`}, Configured: []string{KindBasic},
				Satisfied: true, Using: `http basic scheme "basic": basic auth`}},
		{name: "and of two", sec: cardSecurity([]string{"key", "m"}), cfg: cfgKeyTLS,
			want: Status{Required: []string{`apiKey scheme "key" (header X-API-Key) and mutualTLS scheme "m"`}, Configured: []string{KindAPIKey, KindTLS},
				Satisfied: true, Using: `apiKey scheme "key" (header X-API-Key): API key in header X-API-Key; mutualTLS scheme "m": TLS client certificate`}},
		{name: "and of two, one missing", sec: cardSecurity([]string{"key", "m"}), cfg: cfgKey,
			want: Status{Required: []string{`apiKey scheme "key" (header X-API-Key) and mutualTLS scheme "m"`}, Configured: []string{KindAPIKey},
				Reason: `needs apiKey scheme "key" (header X-API-Key) and mutualTLS scheme "m"; the credentials configured for agent research (apiKey) do not meet it`}},
		{name: "none of two", sec: cardSecurity([]string{"corp"}, []string{"m"}), cfg: cfgKey,
			want: Status{Required: []string{`oauth2 scheme "corp" (scopes a2a)`, `mutualTLS scheme "m"`}, Configured: []string{KindAPIKey},
				Reason: `needs oauth2 scheme "corp" (scopes a2a) or mutualTLS scheme "m"; the credentials configured for agent research (apiKey) meet none of them`}},
		{name: "digest cannot be sent", sec: cardSecurity([]string{"digest"}), cfg: cfgBasic,
			want: Status{Required: []string{`http digest scheme "digest" (orchd cannot send it)`}, Configured: []string{KindBasic},
				Reason: `needs http digest scheme "digest" (orchd cannot send it); the credentials configured for agent research (basic) do not meet it`}},
		{name: "undeclared scheme", sec: cardSecurity([]string{"ghost"}), cfg: cfgBearer,
			want: Status{Required: []string{`scheme "ghost" (not declared in a form orchd reads)`}, Configured: []string{KindBearer},
				Reason: `needs scheme "ghost" (not declared in a form orchd reads); the credentials configured for agent research (bearer) do not meet it`}},
		{name: "anonymous alternative", sec: cardSecurity([]string{"corp"}, []string{}),
			want: Status{Required: []string{`oauth2 scheme "corp" (scopes a2a)`, "no credentials"}, Satisfied: true, Using: "no credentials"}},
		{name: "tls alone when nothing is required", sec: nil, cfg: cfgTLS,
			want: Status{Configured: []string{KindTLS}, Satisfied: true, Using: "TLS client certificate"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := Satisfy("research", tt.sec, tt.cfg)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Satisfy:\n got %#v\nwant %#v", got, tt.want)
			}
		})
	}
}

// TestSatisfy_Scopes checks an OAuth 2.0 credential asks for the
// configured scopes, else the requirement's.
func TestSatisfy_Scopes(t *testing.T) {
	t.Parallel()
	uses, _ := plan("a", cardSecurity([]string{"corp"}), cfgOAuth)
	if len(uses) != 1 || !reflect.DeepEqual(uses[0].scopes, []string{"a2a"}) {
		t.Fatalf("uses %+v, want the requirement's scopes", uses)
	}
	own := &Config{OAuth2: &OAuth2{ClientID: "x", ClientSecretEnv: "S", TokenURL: "https://i/t", Scopes: []string{"mine"}}}
	uses, _ = plan("a", cardSecurity([]string{"corp"}), own)
	if len(uses) != 1 || !reflect.DeepEqual(uses[0].scopes, []string{"mine"}) {
		t.Fatalf("uses %+v, want the configured scopes", uses)
	}
}

// FuzzSatisfy feeds arbitrary requirements to Satisfy: it must not panic,
// and an unsatisfied status must say why.
func FuzzSatisfy(f *testing.F) {
	f.Add("corp,m|key", uint8(0))
	f.Add("bearer|", uint8(3))
	f.Add("ghost,digest", uint8(7))
	cfgs := []*Config{nil, cfgBearer, cfgOAuth, cfgKey, cfgBasic, cfgTLS, cfgCaller, cfgKeyTLS}
	f.Fuzz(func(t *testing.T, alts string, which uint8) {
		var list [][]string
		for _, a := range strings.Split(alts, "|") {
			var names []string
			if a != "" {
				names = strings.Split(a, ",")
			}
			list = append(list, names)
		}
		st := Satisfy("a", cardSecurity(list...), cfgs[int(which)%len(cfgs)])
		if !st.Satisfied && st.Reason == "" {
			t.Fatalf("unsatisfied without a reason: %+v", st)
		}
		if st.Satisfied && st.Reason != "" {
			t.Fatalf("satisfied with a reason: %+v", st)
		}
	})
}
