package auth

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Config is the auth section of orchd's configuration. Each section that is
// set enables one kind of credential; with none set nothing is authenticated
// ([Authenticator.Enabled] reports false). In YAML, durations are written as
// Go durations ("30s", "15m"); the JSON form is for output and carries
// nanoseconds. Example:
//
//	tokens:
//	  - sha256: "5b305cb0504c8dba90ef61a72e19f5d628d919aa53085e9da439df2c0c489b4c"
//	    principal: alice
//	    tenant: acme
//	    roles: [admin]
//	tokensFile: /etc/orchd/tokens.yaml
//	apiKeyHeader: X-API-Key
//	jwt:
//	  issuer: https://idp.example.com
//	  audience: orchd
//	mtls:
//	  clientCAFile: /etc/orchd/client-ca.pem
//	  tenants: {"spiffe://acme.example/agent": acme}
type Config struct {
	// Tokens are static bearer tokens (API keys), each naming the principal,
	// tenant and roles it authenticates. Callers present them as
	// "Authorization: Bearer <token>" or in APIKeyHeader.
	Tokens []TokenConfig `yaml:"tokens" json:"tokens,omitempty"`
	// TokensFile is a YAML file holding more tokens, as {tokens: [...]} in
	// the shape of Tokens. It is read at start-up (where it must exist and
	// be valid) and again whenever it changes; an edit that does not parse
	// or validate keeps the previous set and is logged.
	TokensFile string `yaml:"tokensFile" json:"tokensFile,omitempty"`
	// TokensFileInterval is how often TokensFile is checked for changes
	// (its modification time and size, then its SHA-256). Default 5s.
	TokensFileInterval time.Duration `yaml:"tokensFileInterval" json:"tokensFileInterval,omitempty"`
	// APIKeyHeader, when set, is a request header (such as X-API-Key) in
	// which a static token is accepted besides the Authorization header.
	// JWTs are accepted only as bearer tokens. Empty means only the
	// Authorization header.
	APIKeyHeader string `yaml:"apiKeyHeader" json:"apiKeyHeader,omitempty"`
	// JWT, when set, accepts bearer JWTs from one issuer.
	JWT *JWTConfig `yaml:"jwt" json:"jwt,omitempty"`
	// MTLS, when set, accepts client certificates issued by a client CA.
	MTLS *MTLSConfig `yaml:"mtls" json:"mtls,omitempty"`
}

// TokenConfig is one static token. Exactly one of SHA256 and Token is set.
// Its JSON and YAML forms always carry the hash, never the token.
type TokenConfig struct {
	// SHA256 is the lowercase or uppercase hex SHA-256 of the token, as
	// printed by "printf %s TOKEN | sha256sum".
	SHA256 string `yaml:"sha256" json:"sha256,omitempty"`
	// Token is the token itself, in plain text: for development only (a
	// warning is logged when one is loaded). Prefer SHA256.
	Token string `yaml:"token" json:"-"`
	// Principal is the caller's id. Several tokens may name the same
	// principal (for rotation); one token may not be listed twice.
	Principal string `yaml:"principal" json:"principal"`
	// Tenant is the tenant the caller acts for.
	Tenant string `yaml:"tenant" json:"tenant,omitempty"`
	// Roles are the caller's roles.
	Roles []string `yaml:"roles" json:"roles,omitempty"`
}

// tokenConfigOut is the form TokenConfig marshals to: hash only.
type tokenConfigOut struct {
	SHA256    string   `yaml:"sha256" json:"sha256"`
	Principal string   `yaml:"principal" json:"principal"`
	Tenant    string   `yaml:"tenant,omitempty" json:"tenant,omitempty"`
	Roles     []string `yaml:"roles,omitempty" json:"roles,omitempty"`
}

func (t TokenConfig) out() tokenConfigOut {
	o := tokenConfigOut{SHA256: strings.ToLower(t.SHA256), Principal: t.Principal, Tenant: t.Tenant, Roles: t.Roles}
	if t.Token != "" {
		sum := sha256.Sum256([]byte(t.Token))
		o.SHA256 = hex.EncodeToString(sum[:])
	}
	return o
}

// MarshalYAML writes the token's hash, never the token.
func (t TokenConfig) MarshalYAML() (any, error) { return t.out(), nil }

// MarshalJSON is the JSON form of MarshalYAML.
func (t TokenConfig) MarshalJSON() ([]byte, error) {
	return json.Marshal(t.out())
}

// JWTConfig accepts JWTs signed by one issuer.
type JWTConfig struct {
	// Issuer is the required "iss" of every token. When JWKSURL is empty,
	// the keys are found by OIDC discovery: Issuer +
	// "/.well-known/openid-configuration", whose "issuer" must equal Issuer
	// and whose "jwks_uri" names the keys.
	Issuer string `yaml:"issuer" json:"issuer"`
	// JWKSURL is where the issuer's JSON Web Key Set is fetched; https, or
	// http to a loopback address. Empty means OIDC discovery.
	JWKSURL string `yaml:"jwksURL" json:"jwksURL,omitempty"`
	// Audience must be one of the token's "aud" values: without it a token
	// the issuer minted for any other service would be accepted. Required.
	Audience string `yaml:"audience" json:"audience"`
	// ClockSkew is how far exp, nbf and iat may be off. Default 30s, at
	// most 5m.
	ClockSkew time.Duration `yaml:"clockSkew" json:"clockSkew,omitempty"`
	// Algorithms are the signature algorithms accepted. Default RS256,
	// RS384, RS512, ES256, ES384, ES512, PS256, PS384, PS512, EdDSA. "none"
	// and the HMAC algorithms (HS256...) are refused: a shared-secret
	// algorithm cannot be verified with an issuer's public keys.
	Algorithms []string `yaml:"algorithms" json:"algorithms,omitempty"`
	// PrincipalClaim is the claim holding the caller's id. Default "sub".
	PrincipalClaim string `yaml:"principalClaim" json:"principalClaim,omitempty"`
	// TenantClaim is the claim holding the caller's tenant, a string.
	// Default "tenant"; a token without it has no tenant.
	TenantClaim string `yaml:"tenantClaim" json:"tenantClaim,omitempty"`
	// RolesClaim is the claim holding the caller's roles: a list of strings,
	// or one string of space-separated roles. Default "roles".
	RolesClaim string `yaml:"rolesClaim" json:"rolesClaim,omitempty"`
	// RefreshInterval is how often the key set is fetched again. Default
	// 15m, at least 1s.
	RefreshInterval time.Duration `yaml:"refreshInterval" json:"refreshInterval,omitempty"`
	// RefetchInterval bounds how often a token naming an unknown key id (or
	// arriving before any key set was fetched) may trigger an immediate
	// fetch of the key set, so that rotated keys are picked up without
	// letting callers make orchd hammer the issuer. Default 10s.
	RefetchInterval time.Duration `yaml:"refetchInterval" json:"refetchInterval,omitempty"`
}

// MTLSConfig accepts client certificates. The HTTPS server must use
// [Authenticator.ServerTLS] so that certificates are requested and verified.
type MTLSConfig struct {
	// ClientCAFile is a PEM file of the CA certificates client certificates
	// must chain to. Required.
	ClientCAFile string `yaml:"clientCAFile" json:"clientCAFile"`
	// Tenants maps a certificate principal (SPIFFE ID or common name) to
	// its tenant.
	Tenants map[string]string `yaml:"tenants" json:"tenants,omitempty"`
	// Roles maps a certificate principal to its roles.
	Roles map[string][]string `yaml:"roles" json:"roles,omitempty"`
}

// Bounds and defaults.
const (
	// MaxTokenLen bounds a presented token (static or JWT), in bytes.
	MaxTokenLen = 8 << 10
	// maxTokensFileSize bounds the tokens file.
	maxTokensFileSize = 1 << 20
	// maxTokens bounds the configured tokens, inline and file together.
	maxTokens = 10000
	// maxNameLen bounds principals, tenants and roles in the configuration.
	maxNameLen = 256

	defaultTokensFileInterval = 5 * time.Second
	defaultClockSkew          = 30 * time.Second
	maxClockSkew              = 5 * time.Minute
	defaultRefreshInterval    = 15 * time.Minute
	minRefreshInterval        = time.Second
	defaultRefetchInterval    = 10 * time.Second
)

// defaultAlgorithms is JWTConfig.Algorithms' default.
var defaultAlgorithms = []string{"RS256", "RS384", "RS512", "ES256", "ES384", "ES512", "PS256", "PS384", "PS512", "EdDSA"}

// DecodeConfig decodes YAML (or JSON, which is YAML) into a Config strictly:
// an unknown key is an error. It does not validate; [New] does.
func DecodeConfig(data []byte) (Config, error) {
	var cfg Config
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&cfg); err != nil && !errors.Is(err, io.EOF) {
		return Config{}, fmt.Errorf("auth config: %s", yamlError(err))
	}
	return cfg, nil
}

// Enabled reports whether any kind of credential is configured.
func (c *Config) Enabled() bool {
	return len(c.Tokens) > 0 || c.TokensFile != "" || c.JWT != nil || c.MTLS != nil
}

// Validate checks the configuration without reading any file: token hashes,
// duplicates, names, URLs, algorithms and durations. [New] calls it and then
// reads the files.
func (c *Config) Validate() error {
	var errs []error
	if _, err := tokenEntries("tokens", c.Tokens); err != nil {
		errs = append(errs, err)
	}
	if c.TokensFileInterval < 0 {
		errs = append(errs, fmt.Errorf("tokensFileInterval %s is negative", c.TokensFileInterval))
	}
	if h := c.APIKeyHeader; h != "" {
		switch {
		case !validHeaderName(h):
			errs = append(errs, fmt.Errorf("apiKeyHeader %q is not a header name", h))
		case strings.EqualFold(h, "Authorization"):
			errs = append(errs, errors.New("apiKeyHeader may not be Authorization, where tokens are always accepted as Bearer"))
		case len(c.Tokens) == 0 && c.TokensFile == "":
			errs = append(errs, fmt.Errorf("apiKeyHeader %s is set but no tokens or tokensFile are configured", h))
		}
	}
	if c.JWT != nil {
		errs = append(errs, c.JWT.validate())
	}
	if c.MTLS != nil {
		if c.MTLS.ClientCAFile == "" {
			errs = append(errs, errors.New("mtls.clientCAFile is required"))
		}
		for id := range c.MTLS.Tenants {
			if id == "" {
				errs = append(errs, errors.New("mtls.tenants has an empty principal"))
			}
		}
		for id, roles := range c.MTLS.Roles {
			if id == "" {
				errs = append(errs, errors.New("mtls.roles has an empty principal"))
			}
			if err := checkNames("mtls.roles["+id+"]", roles); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// withDefaults returns the JWT configuration with defaults filled in.
func (j JWTConfig) withDefaults() JWTConfig {
	if j.ClockSkew == 0 {
		j.ClockSkew = defaultClockSkew
	}
	if len(j.Algorithms) == 0 {
		j.Algorithms = slices.Clone(defaultAlgorithms)
	}
	if j.PrincipalClaim == "" {
		j.PrincipalClaim = "sub"
	}
	if j.TenantClaim == "" {
		j.TenantClaim = "tenant"
	}
	if j.RolesClaim == "" {
		j.RolesClaim = "roles"
	}
	if j.RefreshInterval == 0 {
		j.RefreshInterval = defaultRefreshInterval
	}
	if j.RefetchInterval == 0 {
		j.RefetchInterval = defaultRefetchInterval
	}
	j.Issuer = strings.TrimSpace(j.Issuer)
	return j
}

// validate checks the jwt section.
func (j *JWTConfig) validate() error {
	var errs []error
	if j.Issuer == "" {
		errs = append(errs, errors.New("jwt.issuer is required: with jwksURL, or alone to find the keys by OIDC discovery"))
	} else if err := checkFetchURL(j.Issuer); err != nil {
		errs = append(errs, fmt.Errorf("jwt.issuer: %w", err))
	}
	if j.JWKSURL != "" {
		if err := checkFetchURL(j.JWKSURL); err != nil {
			errs = append(errs, fmt.Errorf("jwt.jwksURL: %w", err))
		}
	}
	if j.Audience == "" {
		errs = append(errs, errors.New("jwt.audience is required: without it a token the issuer minted for any other service would be accepted"))
	}
	if j.ClockSkew < 0 || j.ClockSkew > maxClockSkew {
		errs = append(errs, fmt.Errorf("jwt.clockSkew %s is not between 0 and %s", j.ClockSkew, maxClockSkew))
	}
	for _, a := range j.Algorithms {
		if _, err := signatureAlgorithm(a); err != nil {
			errs = append(errs, fmt.Errorf("jwt.algorithms: %w", err))
		}
	}
	if j.RefreshInterval != 0 && j.RefreshInterval < minRefreshInterval {
		errs = append(errs, fmt.Errorf("jwt.refreshInterval %s is shorter than %s", j.RefreshInterval, minRefreshInterval))
	}
	if j.RefetchInterval < 0 {
		errs = append(errs, fmt.Errorf("jwt.refetchInterval %s is negative", j.RefetchInterval))
	}
	return errors.Join(errs...)
}

// checkFetchURL accepts https URLs, and http ones to loopback addresses
// (a development identity provider on the same machine).
func checkFetchURL(s string) error {
	u, err := url.Parse(s)
	if err != nil {
		return fmt.Errorf("%q is not a URL", s)
	}
	if u.Host == "" || u.User != nil || u.Fragment != "" {
		return fmt.Errorf("%q is not an absolute URL without credentials or fragment", s)
	}
	switch u.Scheme {
	case "https":
		return nil
	case "http":
		if isLoopbackHost(u.Hostname()) {
			return nil
		}
		return fmt.Errorf("%q uses http to a host that is not loopback; use https", s)
	default:
		return fmt.Errorf("%q is not an https URL", s)
	}
}

// isLoopbackHost reports whether host is localhost or a loopback IP.
func isLoopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// validHeaderName reports whether s is an HTTP field name (RFC 9110 token).
func validHeaderName(s string) bool {
	if s == "" || len(s) > 128 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0 {
			continue
		}
		return false
	}
	return true
}

// checkNames checks a list of roles: each non-empty and bounded.
func checkNames(what string, names []string) error {
	for _, n := range names {
		if n == "" || len(n) > maxNameLen {
			return fmt.Errorf("%s: role %q is empty or longer than %d bytes", what, n, maxNameLen)
		}
	}
	return nil
}
