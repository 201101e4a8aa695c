package credentials

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
)

// Kinds of credential, as [Config.Redacted] and [Status.Configured] name
// them.
const (
	KindBearer        = "bearer"
	KindAPIKey        = "apiKey"
	KindBasic         = "basic"
	KindOAuth2        = "oauth2"
	KindTLS           = "tls"
	KindForwardCaller = "forwardCaller"
)

// maxScopes bounds the scopes an OAuth 2.0 credential asks for.
const maxScopes = 64

// Config is what orchd may send to authenticate to one agent: the
// agents[].credentials section of the configuration. Every field is
// optional; which ones are used for a call depends on what the agent's card
// requires (see [Satisfy]). Config holds where secrets are, never the
// secrets: each comes from a file or an environment variable. A Config is
// read-only once in use.
//
//	credentials:
//	  bearer: {tokenFile: /run/secrets/research-token}
//	  oauth2: {clientID: orchd, clientSecretFile: /run/secrets/idp, tokenURL: https://idp.example.com/token, scopes: [a2a]}
//	  tls: {certFile: /etc/orchd/client.pem, keyFile: /etc/orchd/client-key.pem}
type Config struct {
	// Bearer is a static token sent as "Authorization: Bearer".
	Bearer *Bearer `yaml:"bearer,omitempty"`
	// APIKey is a key sent where the card's apiKey scheme says.
	APIKey *APIKey `yaml:"apiKey,omitempty"`
	// Basic is a user name and password sent as "Authorization: Basic".
	Basic *Basic `yaml:"basic,omitempty"`
	// OAuth2 gets tokens with the OAuth 2.0 client-credentials grant.
	OAuth2 *OAuth2 `yaml:"oauth2,omitempty"`
	// TLS is a client certificate for mutual TLS, and the CA the agent's
	// server certificate must chain to.
	TLS *TLS `yaml:"tls,omitempty"`
	// ForwardCaller sends the bearer token orchd's own caller presented
	// (see WithCallerToken) to this agent, for schemes that take a bearer
	// token; the configured credential is sent when there is none. Off by
	// default: a caller's token is for orchd, and forwarding it lets the
	// agent act as the caller.
	ForwardCaller bool `yaml:"forwardCaller,omitempty"`
}

// Bearer is a static bearer token, from TokenFile or TokenEnv.
type Bearer struct {
	TokenFile string `yaml:"tokenFile,omitempty"`
	TokenEnv  string `yaml:"tokenEnv,omitempty"`
}

// APIKey is an API key, from ValueFile or ValueEnv. It goes where the
// card's apiKey scheme says. In and Name place it for cards that declare
// no apiKey scheme: In is "header", "query" or "cookie" and Name the
// header, parameter or cookie name.
type APIKey struct {
	ValueFile string `yaml:"valueFile,omitempty"`
	ValueEnv  string `yaml:"valueEnv,omitempty"`
	In        string `yaml:"in,omitempty"`
	Name      string `yaml:"name,omitempty"`
}

// Basic is HTTP basic authentication: Username, and the password from
// PasswordFile or PasswordEnv.
type Basic struct {
	Username     string `yaml:"username"`
	PasswordFile string `yaml:"passwordFile,omitempty"`
	PasswordEnv  string `yaml:"passwordEnv,omitempty"`
}

// OAuth2 is an OAuth 2.0 client of the client-credentials grant (RFC 6749
// §4.4). TokenURL is required: orchd never sends its client secret to a
// token URL that only the agent's card names. Scopes empty means the
// scopes the card's requirement asks for.
type OAuth2 struct {
	ClientID         string   `yaml:"clientID"`
	ClientSecretFile string   `yaml:"clientSecretFile,omitempty"`
	ClientSecretEnv  string   `yaml:"clientSecretEnv,omitempty"`
	TokenURL         string   `yaml:"tokenURL"`
	Scopes           []string `yaml:"scopes,omitempty"`
}

// TLS is a client certificate (CertFile and KeyFile, PEM) and CAFile, the
// PEM CA bundle the agent's server certificate must chain to instead of
// the base transport's roots. The certificate files are re-read when they
// change; the CA file when the agent's transport is built.
type TLS struct {
	CertFile string `yaml:"certFile,omitempty"`
	KeyFile  string `yaml:"keyFile,omitempty"`
	CAFile   string `yaml:"caFile,omitempty"`
}

// Validate checks the Config's shape: each secret has exactly one source,
// names are set where they must be, the token URL is absolute and https
// (http only to a loopback host). It reads no file: secrets may be put in
// place after orchd starts. A nil Config is valid.
func (c *Config) Validate() error {
	if c == nil {
		return nil
	}
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	one := func(what, file, env string) {
		switch {
		case file == "" && env == "":
			bad("%s: set a file or an environment variable", what)
		case file != "" && env != "":
			bad("%s: set a file or an environment variable, not both", what)
		}
	}
	if b := c.Bearer; b != nil {
		one("bearer token", b.TokenFile, b.TokenEnv)
	}
	if k := c.APIKey; k != nil {
		one("apiKey value", k.ValueFile, k.ValueEnv)
		switch k.In {
		case "", "header", "query", "cookie":
		default:
			bad("apiKey.in %q: want header, query or cookie", k.In)
		}
		if (k.In == "") != (k.Name == "") {
			bad("apiKey: set both in and name, or neither")
		}
		if k.Name != "" && !validName(k.Name) {
			bad("apiKey.name %q: not a valid header, parameter or cookie name", k.Name)
		}
	}
	if b := c.Basic; b != nil {
		if b.Username == "" || strings.ContainsAny(b.Username, ":\r\n") {
			bad("basic.username: required, without ':' or line breaks")
		}
		one("basic password", b.PasswordFile, b.PasswordEnv)
	}
	if o := c.OAuth2; o != nil {
		if o.ClientID == "" {
			bad("oauth2.clientID: required")
		}
		one("oauth2 client secret", o.ClientSecretFile, o.ClientSecretEnv)
		if err := checkTokenURL(o.TokenURL); err != nil {
			bad("oauth2.tokenURL: %w", err)
		}
		if len(o.Scopes) > maxScopes {
			bad("oauth2.scopes: %d scopes, more than the limit of %d", len(o.Scopes), maxScopes)
		}
		for _, s := range o.Scopes {
			if s == "" || strings.ContainsAny(s, " \t\r\n\"\\") {
				bad("oauth2.scopes: %q is not a scope", s)
			}
		}
	}
	if t := c.TLS; t != nil {
		if (t.CertFile == "") != (t.KeyFile == "") {
			bad("tls: set both certFile and keyFile, or neither")
		}
		if t.CertFile == "" && t.CAFile == "" {
			bad("tls: set certFile and keyFile, caFile, or both")
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("credentials: %w", errors.Join(errs...))
	}
	return nil
}

// checkTokenURL accepts an absolute https URL, or http to a loopback host.
func checkTokenURL(s string) error {
	if s == "" {
		return errors.New("required")
	}
	u, err := url.Parse(s)
	if err != nil || u.Host == "" {
		return fmt.Errorf("%q is not an absolute URL", s)
	}
	switch {
	case u.Scheme == "https":
	case u.Scheme == "http" && isLoopback(u.Hostname()):
	default:
		return fmt.Errorf("%q: want https (http only to a loopback host): the client secret travels in the request", s)
	}
	if u.User != nil {
		return fmt.Errorf("%q: no user information in the URL", s)
	}
	return nil
}

func isLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// validName reports whether s is a token (RFC 9110 §5.6.2), as header
// and cookie names must be; parameter names are held to the same rule.
func validName(s string) bool {
	if s == "" || len(s) > 256 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c <= ' ' || c >= 0x7f || strings.IndexByte(`"(),/:;<=>?@[\]{}`, c) >= 0 {
			return false
		}
	}
	return true
}

// Redacted lists the kinds of credential configured (KindBearer,
// KindAPIKey, KindBasic, KindOAuth2, KindTLS, KindForwardCaller), without
// any value or location: what the API may show. A nil Config has none.
func (c *Config) Redacted() []string {
	if c == nil {
		return nil
	}
	var kinds []string
	add := func(set bool, kind string) {
		if set {
			kinds = append(kinds, kind)
		}
	}
	add(c.Bearer != nil, KindBearer)
	add(c.APIKey != nil, KindAPIKey)
	add(c.Basic != nil, KindBasic)
	add(c.OAuth2 != nil, KindOAuth2)
	add(c.TLS != nil, KindTLS)
	add(c.ForwardCaller, KindForwardCaller)
	return kinds
}

// String names the kinds configured and nothing else.
func (c Config) String() string {
	return "credentials(" + strings.Join(c.Redacted(), ", ") + ")"
}

// MarshalJSON gives the redacted view, {"configured": [kinds]}, so a
// Config marshalled by mistake shows no file, variable or user name.
func (c Config) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		Configured []string `json:"configured"`
	}{Configured: c.Redacted()})
}
