package credentials

import (
	"fmt"
	"slices"
	"strings"

	"github.com/orchd/orchd/capability"
)

// Status says what an agent's card requires of a caller and whether orchd
// can meet it with the agent's [Config]. It holds descriptions only, never
// a secret or where one is kept, so it is safe in the API.
type Status struct {
	// Required lists the card's requirement alternatives, any one of
	// which will do, each described for people: `oauth2 scheme "corp"
	// (scopes a2a)`, `apiKey scheme "key" (header X-API-Key) and
	// mutualTLS scheme "m"`. Empty when the card requires nothing.
	Required []string `json:"required,omitempty"`
	// Configured lists the kinds of credential configured for the agent
	// (see Config.Redacted).
	Configured []string `json:"configured,omitempty"`
	// Satisfied is true when orchd has what one alternative needs, or the
	// card requires nothing. An agent that is not satisfied is not chosen.
	Satisfied bool `json:"satisfied"`
	// Using says what orchd sends: the alternative's schemes and the
	// credential for each, e.g. `oauth2 scheme "corp": client-credentials
	// token`.
	Using string `json:"using,omitempty"`
	// Reason says why Satisfied is false, e.g. `needs oauth2 scheme
	// "corp"; no credentials configured for agent research`.
	Reason string `json:"reason,omitempty"`
}

// use is one credential a call carries.
type use struct {
	scheme string // the card's scheme name, "" when the card declares none
	desc   string // the scheme, described
	kind   string // KindBearer, KindOAuth2, KindAPIKey, KindBasic, KindTLS or KindForwardCaller
	caller bool   // a bearer-type credential: the caller's token first, when forwarded
	in     string // for KindAPIKey: where the key goes
	name   string
	scopes []string // for KindOAuth2
}

// what describes the credential sent, for Status.Using.
func (u use) what() string {
	var s string
	switch u.kind {
	case KindOAuth2:
		s = "client-credentials token"
		if len(u.scopes) > 0 {
			s += " (scopes " + strings.Join(u.scopes, ", ") + ")"
		}
	case KindBearer:
		s = "bearer token"
	case KindBasic:
		s = "basic auth"
	case KindAPIKey:
		s = "API key in " + u.in + " " + u.name
	case KindTLS:
		s = "TLS client certificate"
	case KindForwardCaller:
		return u.prefix() + "the caller's token"
	}
	if u.caller {
		s = "the caller's token, else " + s
	}
	return u.prefix() + s
}

func (u use) prefix() string {
	if u.desc == "" {
		return ""
	}
	return u.desc + ": "
}

// Satisfy matches cfg, the credentials configured for agent, against sec,
// what the agent's card declares. The card's requirement alternatives are
// tried in order; the first that cfg has a credential for every scheme of
// is used. A card that declares no requirement (or allows calls without
// credentials) is satisfied with nothing, and the credentials configured
// are sent all the same. A nil cfg has no credentials.
//
// Which credential meets which scheme: an apiKey scheme takes APIKey, sent
// where the scheme says; http bearer takes Bearer, else an OAuth2 token;
// http basic takes Basic; oauth2 and openIdConnect take an OAuth2 token,
// else Bearer; mutualTLS takes a TLS client certificate. With
// ForwardCaller, a bearer-type scheme is also met by the caller's token.
// Other HTTP schemes (digest, …) and schemes the card declares in a form
// orchd does not read cannot be met.
func Satisfy(agent string, sec *capability.Security, cfg *Config) Status {
	_, st := plan(agent, sec, cfg)
	return st
}

// plan is Satisfy, with the credentials to send.
func plan(agent string, sec *capability.Security, cfg *Config) ([]use, Status) {
	if cfg == nil {
		cfg = &Config{}
	}
	st := Status{Configured: cfg.Redacted()}
	anonymous := sec == nil || len(sec.Requirements) == 0
	var alts []string
	if sec != nil {
		for _, alt := range sec.Requirements {
			if len(alt) == 0 {
				anonymous = true
				alts = append(alts, "no credentials")
				continue
			}
			descs := make([]string, len(alt))
			for i, r := range alt {
				descs[i] = describe(sec, r)
			}
			alts = append(alts, strings.Join(descs, " and "))
		}
	}
	st.Required = alts
	if sec != nil {
		for _, alt := range sec.Requirements {
			if len(alt) == 0 {
				continue
			}
			if uses, ok := match(sec, alt, cfg); ok {
				st.Satisfied, st.Using = true, using(uses)
				return uses, st
			}
		}
	}
	if anonymous {
		uses := optional(sec, cfg)
		st.Satisfied, st.Using = true, using(uses)
		if st.Using == "" {
			st.Using = "no credentials"
		}
		return uses, st
	}
	var needs []string
	for _, a := range alts {
		if a != "no credentials" {
			needs = append(needs, a)
		}
	}
	st.Reason = "needs " + strings.Join(needs, " or ") + "; "
	switch {
	case len(st.Configured) == 0:
		st.Reason += "no credentials configured for agent " + agent
	case len(needs) == 1:
		st.Reason += fmt.Sprintf("the credentials configured for agent %s (%s) do not meet it", agent, strings.Join(st.Configured, ", "))
	default:
		st.Reason += fmt.Sprintf("the credentials configured for agent %s (%s) meet none of them", agent, strings.Join(st.Configured, ", "))
	}
	return nil, st
}

// describe names one required scheme for people.
func describe(sec *capability.Security, r capability.Requirement) string {
	s, ok := sec.Schemes[r.Scheme]
	if !ok {
		return fmt.Sprintf("scheme %q (not declared in a form orchd reads)", r.Scheme)
	}
	d := s.Describe(r.Scheme)
	if s.Type == capability.SchemeHTTP && s.HTTPScheme != "bearer" && s.HTTPScheme != "basic" {
		d += " (orchd cannot send it)"
	}
	if len(r.Scopes) > 0 {
		d += " (scopes " + strings.Join(r.Scopes, ", ") + ")"
	}
	return d
}

// match returns the credentials meeting every scheme of alt, or false.
func match(sec *capability.Security, alt []capability.Requirement, cfg *Config) ([]use, bool) {
	uses := make([]use, 0, len(alt))
	for _, r := range alt {
		s, ok := sec.Schemes[r.Scheme]
		if !ok {
			return nil, false
		}
		u := use{scheme: r.Scheme, desc: s.Describe(r.Scheme)}
		switch s.Type {
		case capability.SchemeAPIKey:
			if s.In == "" || cfg.APIKey == nil {
				return nil, false
			}
			u.kind, u.in, u.name = KindAPIKey, s.In, s.Name
		case capability.SchemeHTTP:
			switch s.HTTPScheme {
			case "bearer":
				if !bearerish(&u, cfg, false, nil) {
					return nil, false
				}
			case "basic":
				if cfg.Basic == nil {
					return nil, false
				}
				u.kind = KindBasic
			default:
				return nil, false
			}
		case capability.SchemeOAuth2, capability.SchemeOpenIDConnect:
			if !bearerish(&u, cfg, true, r.Scopes) {
				return nil, false
			}
		case capability.SchemeMutualTLS:
			if cfg.TLS == nil || cfg.TLS.CertFile == "" {
				return nil, false
			}
			u.kind = KindTLS
		default:
			return nil, false
		}
		uses = append(uses, u)
	}
	return uses, true
}

// bearerish fills u with the credential for a scheme that takes a bearer
// token: an OAuth2 token or the static Bearer token, in the order
// preferOAuth says, and the caller's token first when forwarded.
func bearerish(u *use, cfg *Config, preferOAuth bool, scopes []string) bool {
	u.caller = cfg.ForwardCaller
	oauth := func() bool {
		if cfg.OAuth2 == nil {
			return false
		}
		u.kind, u.scopes = KindOAuth2, cfg.OAuth2.Scopes
		if len(u.scopes) == 0 {
			u.scopes = scopes
		}
		return true
	}
	static := func() bool {
		if cfg.Bearer == nil {
			return false
		}
		u.kind = KindBearer
		return true
	}
	found := false
	if preferOAuth {
		found = oauth() || static()
	} else {
		found = static() || oauth()
	}
	if !found && cfg.ForwardCaller {
		u.kind, u.caller, found = KindForwardCaller, false, true
	}
	return found
}

// optional returns what is sent to an agent whose card requires nothing:
// one Authorization credential (OAuth2, else Bearer, else Basic; the
// caller's token first when forwarded), the API key where the
// configuration or else the card's first apiKey scheme places it, and the
// TLS client certificate.
func optional(sec *capability.Security, cfg *Config) []use {
	var uses []use
	var u use
	switch {
	case bearerish(&u, cfg, true, nil):
		uses = append(uses, u)
	case cfg.Basic != nil:
		uses = append(uses, use{kind: KindBasic})
	}
	if k := cfg.APIKey; k != nil {
		u := use{kind: KindAPIKey, in: k.In, name: k.Name}
		if u.in == "" && sec != nil {
			names := make([]string, 0, len(sec.Schemes))
			for n, s := range sec.Schemes {
				if s.Type == capability.SchemeAPIKey && s.In != "" {
					names = append(names, n)
				}
			}
			slices.Sort(names)
			if len(names) > 0 {
				s := sec.Schemes[names[0]]
				u.scheme, u.desc, u.in, u.name = names[0], s.Describe(names[0]), s.In, s.Name
			}
		}
		if u.in != "" {
			uses = append(uses, u)
		}
	}
	if cfg.TLS != nil && cfg.TLS.CertFile != "" {
		uses = append(uses, use{kind: KindTLS})
	}
	return uses
}

// using describes uses for Status.Using.
func using(uses []use) string {
	parts := make([]string, len(uses))
	for i, u := range uses {
		parts[i] = u.what()
	}
	return strings.Join(parts, "; ")
}
