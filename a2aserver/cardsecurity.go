package a2aserver

import (
	"encoding/json"
	"fmt"
	"slices"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/orchd/orchd/httpgate"
)

// cardSecurity is what orchd's card declares of how callers authenticate
// (A2A securitySchemes and securityRequirements): nothing with no
// authentication configured; else bearer tokens (static or JWT), an API
// key header and client certificates, as configured, any one of which
// will do.
func cardSecurity(g *httpgate.Gate) (a2a.NamedSecuritySchemes, a2a.SecurityRequirementsOptions) {
	if !g.Enabled() {
		return nil, nil
	}
	cfg := g.Config()
	schemes := a2a.NamedSecuritySchemes{}
	if len(cfg.Tokens) > 0 || cfg.TokensFile != "" || cfg.JWT != nil {
		bearer := a2a.HTTPAuthSecurityScheme{Scheme: "Bearer", Description: "a token or JWT orchd's operator issued"}
		if cfg.JWT != nil {
			bearer.BearerFormat = "JWT"
		}
		schemes["bearer"] = bearer
	}
	if h := cfg.APIKeyHeader; h != "" && (len(cfg.Tokens) > 0 || cfg.TokensFile != "") {
		schemes["apiKey"] = a2a.APIKeySecurityScheme{Location: a2a.APIKeySecuritySchemeLocationHeader, Name: h}
	}
	if cfg.MTLS != nil {
		schemes["mtls"] = a2a.MutualTLSSecurityScheme{Description: "a client certificate from orchd's client CA"}
	}
	names := make([]string, 0, len(schemes))
	for n := range schemes {
		names = append(names, string(n))
	}
	slices.Sort(names)
	var reqs a2a.SecurityRequirementsOptions
	for _, n := range names {
		reqs = append(reqs, a2a.SecurityRequirements{a2a.SecuritySchemeName(n): {}})
	}
	return schemes, reqs
}

// dualSecuritySchemes makes the securitySchemes of a card that a2a-go's
// 0.3-compatible producer wrote readable by 1.0 parsers too. The producer
// writes each scheme in the 0.3 shape ({"type": "http", "scheme": ...}),
// which a2a-go's 1.0 parser refuses, failing the whole card; each scheme
// gains its 1.0 shape ({"httpAuthSecurityScheme": {...}}) beside it. Each
// parser reads its own keys and ignores the other's.
func dualSecuritySchemes(card []byte, schemes a2a.NamedSecuritySchemes) ([]byte, error) {
	if len(schemes) == 0 {
		return card, nil
	}
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(card, &doc); err != nil {
		return nil, fmt.Errorf("card security schemes: %w", err)
	}
	var legacy, current map[string]map[string]json.RawMessage
	if err := json.Unmarshal(doc["securitySchemes"], &legacy); err != nil {
		return nil, fmt.Errorf("card security schemes: %w", err)
	}
	b, err := json.Marshal(schemes)
	if err == nil {
		err = json.Unmarshal(b, &current)
	}
	if err != nil {
		return nil, fmt.Errorf("card security schemes: %w", err)
	}
	for name, fields := range current {
		if legacy[name] == nil {
			legacy[name] = map[string]json.RawMessage{}
		}
		for k, v := range fields {
			legacy[name][k] = v
		}
	}
	if doc["securitySchemes"], err = json.Marshal(legacy); err != nil {
		return nil, fmt.Errorf("card security schemes: %w", err)
	}
	return json.Marshal(doc)
}
