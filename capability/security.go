package capability

import (
	"fmt"
	"slices"
	"sort"
	"strings"
)

// Security scheme types, as [Scheme.Type] gives them: the A2A 0.3 names,
// which are also OpenAPI's.
const (
	SchemeAPIKey        = "apiKey"
	SchemeHTTP          = "http"
	SchemeOAuth2        = "oauth2"
	SchemeOpenIDConnect = "openIdConnect"
	SchemeMutualTLS     = "mutualTLS"
)

// API key locations, as [Scheme.In] gives them.
const (
	InHeader = "header"
	InQuery  = "query"
	InCookie = "cookie"
)

// Bounds on what a card may declare about security; what goes beyond them
// is dropped with a warning.
const (
	maxSecuritySchemes      = 32
	maxSecurityAlternatives = 32
	maxSchemesPerAlt        = 8
	maxScopes               = 64
)

// Security is what a card says about authenticating to its agent: the
// schemes it declares and which of them a caller must use. orchd reads it
// to decide which of the credentials configured for the agent to send,
// and whether it has any the agent will take.
type Security struct {
	// Schemes are the card's declared security schemes by name. Schemes
	// of a kind orchd does not read are left out, with a warning.
	Schemes map[string]Scheme `json:"schemes"`
	// Requirements lists the alternatives a caller may satisfy, any one
	// of them (OR). Each alternative lists the schemes to use together
	// (AND), sorted by scheme name. An empty alternative means the agent
	// also takes calls with no credentials. No requirements at all means
	// the card requires nothing, whatever schemes it declares.
	Requirements [][]Requirement `json:"requirements"`
}

// Scheme is one declared security scheme. Which fields are set depends on
// Type.
type Scheme struct {
	// Type is SchemeAPIKey, SchemeHTTP, SchemeOAuth2, SchemeOpenIDConnect
	// or SchemeMutualTLS.
	Type string `json:"type"`
	// In and Name say where an API key goes: InHeader, InQuery or
	// InCookie, and the header, parameter or cookie name. In is "" when
	// the card gives a location orchd cannot send a key in.
	In   string `json:"in,omitempty"`
	Name string `json:"name,omitempty"`
	// HTTPScheme is the HTTP authentication scheme in lower case,
	// "bearer" or "basic" (others are kept, though orchd cannot send
	// them); BearerFormat is the card's hint about the token, e.g. "JWT".
	HTTPScheme   string `json:"scheme,omitempty"`
	BearerFormat string `json:"bearerFormat,omitempty"`
	// Flows names the OAuth 2.0 flows the scheme declares, sorted.
	Flows []string `json:"flows,omitempty"`
	// TokenURL and Scopes come from the client-credentials flow, the one
	// flow orchd uses: where tokens are issued, and the scope names it
	// offers, sorted.
	TokenURL string   `json:"tokenUrl,omitempty"`
	Scopes   []string `json:"scopes,omitempty"`
	// MetadataURL is the OAuth 2.0 authorization server metadata URL.
	MetadataURL string `json:"metadataUrl,omitempty"`
	// OpenIDConnectURL is the OpenID Connect discovery URL.
	OpenIDConnectURL string `json:"openIdConnectUrl,omitempty"`
}

// Requirement is one scheme of a requirement alternative, with the scopes
// the credential must carry (OAuth 2.0 and OpenID Connect only).
type Requirement struct {
	// Scheme is the name of a scheme in Security.Schemes.
	Scheme string `json:"scheme"`
	// Scopes are the scopes required, in the card's order.
	Scopes []string `json:"scopes,omitempty"`
}

// Describe names the scheme for people, e.g. `oauth2 scheme "corp"` or
// `apiKey scheme "key" (header X-API-Key)`.
func (s Scheme) Describe(name string) string {
	switch s.Type {
	case SchemeHTTP:
		return fmt.Sprintf("http %s scheme %q", s.HTTPScheme, name)
	case SchemeAPIKey:
		if s.In == "" {
			return fmt.Sprintf("apiKey scheme %q (in no location orchd can send)", name)
		}
		return fmt.Sprintf("apiKey scheme %q (%s %s)", name, s.In, s.Name)
	}
	return fmt.Sprintf("%s scheme %q", s.Type, name)
}

// wrappedSchemeTypes maps the keys of an A2A 1.0 security scheme object,
// which wraps exactly one scheme, to the scheme's type.
var wrappedSchemeTypes = map[string]string{
	"apiKeySecurityScheme":        SchemeAPIKey,
	"httpAuthSecurityScheme":      SchemeHTTP,
	"oauth2SecurityScheme":        SchemeOAuth2,
	"openIdConnectSecurityScheme": SchemeOpenIDConnect,
	"mtlsSecurityScheme":          SchemeMutualTLS,
}

// plainSchemeTypes maps an A2A 0.3 scheme's "type" to the scheme's type.
var plainSchemeTypes = map[string]string{
	"apiKey": SchemeAPIKey, "http": SchemeHTTP, "oauth2": SchemeOAuth2,
	"openIdConnect": SchemeOpenIDConnect, "mutualTLS": SchemeMutualTLS,
}

// readSecurity fills p.Security from the card's securitySchemes and its
// requirements: the 1.0 securityRequirements ([{"schemes": {name:
// {"list": [...]}}}], or with plain scope arrays) or else the 0.3 security
// ([{name: [...]}]). Build has already checked the top-level types; any
// shape inside that orchd cannot read becomes a warning and is left out,
// so a sloppy security declaration never takes an agent out of service.
func readSecurity(doc map[string]any, p *Profile) {
	warn := func(format string, args ...any) { p.Warnings = append(p.Warnings, fmt.Sprintf(format, args...)) }
	rawSchemes, _ := doc["securitySchemes"].(map[string]any)
	reqKey := "securityRequirements"
	rawReqs, _ := doc[reqKey].([]any)
	if len(rawReqs) == 0 {
		if legacy, _ := doc["security"].([]any); len(legacy) > 0 {
			reqKey, rawReqs = "security", legacy
		}
	}
	if len(rawSchemes) == 0 && len(rawReqs) == 0 {
		return
	}
	sec := &Security{Schemes: map[string]Scheme{}, Requirements: [][]Requirement{}}
	names := make([]string, 0, len(rawSchemes))
	for name := range rawSchemes {
		names = append(names, name)
	}
	sort.Strings(names)
	if len(names) > maxSecuritySchemes {
		warn("securitySchemes: %d schemes, more than the limit of %d; only the first %d by name are read", len(names), maxSecuritySchemes, maxSecuritySchemes)
		names = names[:maxSecuritySchemes]
	}
	for _, name := range names {
		path := join("securitySchemes", name)
		if s, ok := readScheme(rawSchemes[name], path, warn); ok {
			sec.Schemes[name] = s
		}
	}

	if len(rawReqs) > maxSecurityAlternatives {
		warn("%s: %d alternatives, more than the limit of %d; only the first %d are read", reqKey, len(rawReqs), maxSecurityAlternatives, maxSecurityAlternatives)
		rawReqs = rawReqs[:maxSecurityAlternatives]
	}
	for i, raw := range rawReqs {
		path := index(reqKey, i)
		obj, ok := raw.(map[string]any)
		if !ok {
			warn("%s: want object, got %s; ignored", path, jsonKind(raw))
			continue
		}
		if reqKey == "securityRequirements" {
			if inner, present := obj["schemes"]; present {
				if obj, ok = inner.(map[string]any); !ok && inner != nil {
					warn("%s.schemes: want object, got %s; ignored", path, jsonKind(inner))
					continue
				}
			}
		}
		if alt, ok := readAlternative(obj, path, sec.Schemes, warn); ok {
			sec.Requirements = append(sec.Requirements, alt)
		}
	}
	p.Security = sec
}

// readScheme reads one declared scheme in either generation's form.
func readScheme(raw any, path string, warn func(string, ...any)) (Scheme, bool) {
	obj, ok := raw.(map[string]any)
	if !ok {
		warn("%s: want object, got %s; scheme ignored", path, jsonKind(raw))
		return Scheme{}, false
	}
	var typ string
	body := obj
	if t, ok := obj["type"].(string); ok {
		if typ = plainSchemeTypes[t]; typ == "" {
			warn("%s.type: unknown security scheme type %q; scheme ignored", path, t)
			return Scheme{}, false
		}
	} else {
		var keys []string
		for k := range obj {
			if _, known := wrappedSchemeTypes[k]; known {
				keys = append(keys, k)
			}
		}
		if len(keys) != 1 {
			warn("%s: want exactly one of apiKeySecurityScheme, httpAuthSecurityScheme, oauth2SecurityScheme, openIdConnectSecurityScheme, mtlsSecurityScheme or a type, got %d; scheme ignored", path, len(keys))
			return Scheme{}, false
		}
		typ = wrappedSchemeTypes[keys[0]]
		path = join(path, keys[0])
		if body, ok = obj[keys[0]].(map[string]any); !ok {
			if obj[keys[0]] != nil {
				warn("%s: want object, got %s; scheme ignored", path, jsonKind(obj[keys[0]]))
				return Scheme{}, false
			}
			body = map[string]any{}
		}
	}
	str := func(keys ...string) string {
		for _, k := range keys {
			if v, present := body[k]; present && v != nil {
				s, ok := v.(string)
				if !ok {
					warn("%s.%s: want string, got %s; ignored", path, k, jsonKind(v))
				}
				return s
			}
		}
		return ""
	}
	s := Scheme{Type: typ}
	switch typ {
	case SchemeAPIKey:
		in := str("location", "in")
		s.Name = str("name")
		switch strings.ToLower(in) {
		case InHeader, InQuery, InCookie:
			s.In = strings.ToLower(in)
		default:
			warn("%s: API key location %q is not header, query or cookie; orchd cannot send this key", path, in)
		}
		if s.Name == "" {
			warn("%s: API key scheme names no header, parameter or cookie; orchd cannot send this key", path)
			s.In = ""
		}
	case SchemeHTTP:
		s.HTTPScheme = strings.ToLower(str("scheme"))
		s.BearerFormat = str("bearerFormat")
		if s.HTTPScheme == "" {
			warn("%s: HTTP auth scheme names no scheme; read as bearer", path)
			s.HTTPScheme = "bearer"
		}
	case SchemeOAuth2:
		s.MetadataURL = str("oauth2MetadataUrl")
		readFlows(body["flows"], join(path, "flows"), &s, warn)
	case SchemeOpenIDConnect:
		s.OpenIDConnectURL = str("openIdConnectUrl")
	}
	return s, true
}

// readFlows reads an OAuth 2.0 scheme's flows: their names, and the
// client-credentials flow's token URL and scopes.
func readFlows(raw any, path string, s *Scheme, warn func(string, ...any)) {
	flows, ok := raw.(map[string]any)
	if !ok {
		if raw != nil {
			warn("%s: want object, got %s; no flows read", path, jsonKind(raw))
		}
		return
	}
	for name := range flows {
		s.Flows = append(s.Flows, name)
	}
	sort.Strings(s.Flows)
	cc, ok := flows["clientCredentials"].(map[string]any)
	if !ok {
		return
	}
	s.TokenURL, _ = cc["tokenUrl"].(string)
	if scopes, ok := cc["scopes"].(map[string]any); ok {
		for name := range scopes {
			s.Scopes = append(s.Scopes, name)
		}
		sort.Strings(s.Scopes)
		if len(s.Scopes) > maxScopes {
			warn("%s.clientCredentials.scopes: %d scopes, more than the limit of %d; the rest are ignored", path, len(s.Scopes), maxScopes)
			s.Scopes = s.Scopes[:maxScopes]
		}
	}
}

// readAlternative reads one requirement alternative: scheme names mapped
// to scope lists, either plain arrays or wrapped as {"list": [...]}. A
// reference to a scheme the card does not declare (or declares in a form
// orchd cannot read) is kept, with a warning: the alternative then cannot
// be satisfied, and the reason says so.
func readAlternative(obj map[string]any, path string, schemes map[string]Scheme, warn func(string, ...any)) ([]Requirement, bool) {
	names := make([]string, 0, len(obj))
	for name := range obj {
		names = append(names, name)
	}
	sort.Strings(names)
	if len(names) > maxSchemesPerAlt {
		warn("%s: %d schemes, more than the limit of %d; alternative ignored", path, len(names), maxSchemesPerAlt)
		return nil, false
	}
	alt := make([]Requirement, 0, len(names))
	for _, name := range names {
		p := join(path, name)
		raw := obj[name]
		if m, ok := raw.(map[string]any); ok {
			raw = m["list"]
		}
		var scopes []string
		switch v := raw.(type) {
		case nil:
		case []any:
			for i, sc := range v {
				s, ok := sc.(string)
				if !ok {
					warn("%s: want string, got %s; ignored", index(p, i), jsonKind(sc))
					continue
				}
				if len(scopes) == maxScopes {
					warn("%s: more than %d scopes; the rest are ignored", p, maxScopes)
					break
				}
				if !slices.Contains(scopes, s) {
					scopes = append(scopes, s)
				}
			}
		default:
			warn("%s: want an array of scopes, got %s; read as no scopes", p, jsonKind(raw))
		}
		if _, ok := schemes[name]; !ok {
			warn("%s: requires scheme %q, which the card does not declare in a form orchd reads", path, name)
		}
		alt = append(alt, Requirement{Scheme: name, Scopes: scopes})
	}
	return alt, true
}
