package capability

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2acompat/a2av0"
	"github.com/hashicorp/go-version"
)

// Defaults for [Options] fields left at zero.
const (
	DefaultMaxBytes = 1 << 20
	DefaultMaxDepth = 32
)

// Options says how [Build] reads a card. The zero value is ready to use.
type Options struct {
	// ID is the identifier the profile carries; the registry assigns it.
	ID string
	// URL is the base URL the card was discovered at. When empty, the URL of
	// the card's first interface is used.
	URL string
	// Legacy marks a card served at the 0.2 path /.well-known/agent.json:
	// a card without protocolVersion is then read as A2A 0.2, not 0.3.
	Legacy bool
	// MaxBytes bounds the card's size; 0 means DefaultMaxBytes (1 MiB).
	MaxBytes int
	// MaxDepth bounds how deeply the card's JSON may nest; 0 means
	// DefaultMaxDepth (32).
	MaxDepth int
	// Deprecated adds capability names or extension URIs to the Tier 3
	// list. artifact_streaming and state_transition_history are always
	// deprecated.
	Deprecated []string
	// Client is what the calling client speaks; nil means [DefaultClient].
	Client ClientSupport
}

// Build reads an Agent Card of any A2A generation and returns its profile.
// A card orchd cannot use gives a *[CardError] naming the field at fault;
// oddities it can live with become profile warnings. Build never panics on
// any input.
func Build(raw []byte, opts Options) (*Profile, error) {
	doc, err := decodeCard(raw, opts)
	if err != nil {
		return nil, err
	}
	var f fields
	p := &Profile{ID: opts.ID, URL: opts.URL, Warnings: []string{}, compatible: &compatCache{}}
	p.Name = f.requiredStr(doc, "name", "")
	p.CardVersion = f.str(doc, "version", "")
	for _, k := range []string{"description", "documentationUrl", "iconUrl"} {
		f.str(doc, k, "")
	}
	f.strs(doc, "defaultInputModes", "")
	f.strs(doc, "defaultOutputModes", "")
	if prov := f.object(doc, "provider", ""); prov != nil {
		f.str(prov, "organization", "provider")
		f.str(prov, "url", "provider")
	}
	f.object(doc, "securitySchemes", "")
	f.array(doc, "security", "")
	f.array(doc, "securityRequirements", "")
	if f.err == nil {
		readSecurity(doc, p)
	}
	f.objects(doc, "signatures", "")

	readProtocols(&f, doc, opts, p)
	readCapabilities(&f, doc, opts, p)
	readSkills(&f, doc, p)
	if f.err != nil {
		return nil, f.err
	}
	if p.URL == "" && len(p.Protocols) > 0 {
		p.URL = p.Protocols[0].URL
	}
	for _, pr := range p.Protocols {
		if !slices.ContainsFunc(p.versions, pr.v.Equal) {
			p.versions = append(p.versions, pr.v)
		}
	}

	client := opts.Client
	if client == nil {
		client = DefaultClient()
	}
	for _, pr := range p.Protocols {
		if client.speaks(pr) {
			p.ClientCompatible = true
			break
		}
	}
	if !p.ClientCompatible {
		p.IncompatibleReason = incompatibleReason(p.Protocols, client)
	}

	p.Digest, err = digest(doc)
	if err != nil {
		return nil, &CardError{Msg: "cannot compute digest", Err: err}
	}
	if p.card, err = parseableCard(raw, doc, p.Protocols); err != nil {
		return nil, err
	}
	return p, nil
}

// decodeCard checks the card's size and nesting and decodes it into generic
// JSON values with numbers kept as written.
func decodeCard(raw []byte, opts Options) (map[string]any, error) {
	maxBytes := opts.MaxBytes
	if maxBytes <= 0 {
		maxBytes = DefaultMaxBytes
	}
	maxDepth := opts.MaxDepth
	if maxDepth <= 0 {
		maxDepth = DefaultMaxDepth
	}
	if len(raw) > maxBytes {
		return nil, &CardError{Msg: fmt.Sprintf("card is %d bytes, more than the limit of %d", len(raw), maxBytes)}
	}
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil, &CardError{Msg: "card is empty"}
	}
	if d := nestingDepth(raw); d > maxDepth {
		return nil, &CardError{Msg: fmt.Sprintf("card nests %d levels deep, more than the limit of %d", d, maxDepth)}
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		msg := "not valid JSON"
		if se, ok := errors.AsType[*json.SyntaxError](err); ok {
			msg = fmt.Sprintf("not valid JSON at byte %d", se.Offset)
		}
		return nil, &CardError{Msg: msg, Err: err}
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, &CardError{Msg: "unexpected data after the card's JSON object"}
	}
	doc, ok := v.(map[string]any)
	if !ok {
		return nil, &CardError{Msg: fmt.Sprintf("want a JSON object, got %s", jsonKind(v))}
	}
	return doc, nil
}

// readProtocols fills p.Protocols and the version range. A 1.0 card's
// supportedInterfaces win over the 0.3 url/additionalInterfaces fields, as
// dual-format cards carry both.
func readProtocols(f *fields, doc map[string]any, opts Options, p *Profile) {
	minKey := either(doc, "minProtocolVersion", "min_protocol_version")
	maxKey := either(doc, "maxProtocolVersion", "max_protocol_version")
	var lo, hi *version.Version
	if s := f.str(doc, minKey, ""); s != "" {
		var ok bool
		if p.MinProtocolVersion, lo, ok = normalizeVersion(s); !ok {
			f.fail(minKey, "%q is not a version", s)
		}
	}
	if s := f.str(doc, maxKey, ""); s != "" {
		var ok bool
		if p.MaxProtocolVersion, hi, ok = normalizeVersion(s); !ok {
			f.fail(maxKey, "%q is not a version", s)
		}
	}
	if lo != nil && hi != nil && lo.GreaterThan(hi) {
		f.fail(minKey, "%s is above %s %s", p.MinProtocolVersion, maxKey, p.MaxProtocolVersion)
	}

	seen := map[[3]string]bool{}
	add := func(path, url, binding, tenant string, versions []string) {
		n := 0
		for _, s := range versions {
			mm, v, ok := normalizeVersion(s)
			if !ok {
				p.Warnings = append(p.Warnings, fmt.Sprintf("%s: protocol version %q is not a version; ignored", path, s))
				continue
			}
			if (lo != nil && v.LessThan(lo)) || (hi != nil && v.GreaterThan(hi)) {
				p.Warnings = append(p.Warnings, fmt.Sprintf("%s: protocol version %s is outside the card's range %s–%s; ignored", path, mm, p.MinProtocolVersion, p.MaxProtocolVersion))
				continue
			}
			key := [3]string{mm, binding, url}
			if seen[key] {
				n++ // usable, and already listed (0.3 cards repeat url in additionalInterfaces)
				continue
			}
			seen[key] = true
			p.Protocols = append(p.Protocols, Protocol{Version: mm, Binding: binding, URL: url, Tenant: tenant, v: v})
			n++
		}
		if n == 0 && len(versions) > 0 {
			p.Warnings = append(p.Warnings, path+": no usable protocol version")
		}
	}

	ifaces := f.objects(doc, "supportedInterfaces", "")
	if len(ifaces) > 0 {
		p.CardFormat = "1.0"
		for i, it := range ifaces {
			path := index("supportedInterfaces", i)
			url := f.requiredStr(it, "url", path)
			binding := f.requiredStr(it, "protocolBinding", path)
			tenant := f.str(it, "tenant", path)
			versions := f.strs(it, either(it, "protocolVersions", "protocol_versions"), path)
			if len(versions) == 0 {
				v := f.str(it, "protocolVersion", path)
				if v == "" {
					v = string(a2a.Version)
					p.Warnings = append(p.Warnings, path+": no protocolVersion; assuming "+v)
				}
				versions = []string{v}
			}
			add(path, url, binding, tenant, versions)
		}
		return
	}

	// A 0.3 or 0.2 card: one version for the whole card.
	url := f.str(doc, "url", "")
	if url == "" && f.err == nil {
		f.fail("supportedInterfaces", "the card declares no interface: neither supportedInterfaces nor url is set")
		return
	}
	ver := f.str(doc, "protocolVersion", "")
	switch {
	case ver != "":
	case opts.Legacy:
		ver = "0.2"
	default:
		ver = string(a2av0.Version)
	}
	p.CardFormat = "0.3"
	if _, v, ok := normalizeVersion(ver); opts.Legacy || ok && v.LessThan(version.Must(version.NewVersion("0.3"))) {
		p.CardFormat = "0.2"
	}
	preferred := f.str(doc, "preferredTransport", "")
	if preferred == "" {
		preferred = BindingJSONRPC
	}
	add("url", url, preferred, "", []string{ver})
	for i, it := range f.objects(doc, "additionalInterfaces", "") {
		path := index("additionalInterfaces", i)
		u := f.requiredStr(it, "url", path)
		t := f.str(it, "transport", path)
		if t == "" {
			t = BindingJSONRPC
		}
		add(path, u, t, "", []string{ver})
	}
}

// readCapabilities fills p.Capabilities, p.Extensions and p.Steering.
func readCapabilities(f *fields, doc map[string]any, opts Options, p *Profile) {
	p.Capabilities = make(map[string]Capability, len(implicitCapabilities)+4)
	for _, c := range implicitCapabilities {
		p.Capabilities[c] = Capability{Tier: TierImplicit}
	}
	declare := func(name string, declared bool) {
		if _, ok := p.Capabilities[name]; ok {
			return
		}
		c := Capability{Tier: TierDeclared, Declared: declared}
		if isDeprecated(name, opts.Deprecated) {
			c.Tier, c.Deprecated = TierDeprecated, true
			p.Warnings = append(p.Warnings, fmt.Sprintf("declares deprecated capability %q", name))
		}
		p.Capabilities[name] = c
	}

	caps := f.object(doc, "capabilities", "")
	keys := make([]string, 0, len(caps))
	for k := range caps {
		keys = append(keys, k)
	}
	sort.Strings(keys) // deterministic warnings and first error
	for _, k := range keys {
		if name, ok := cardCapabilityKeys[k]; ok && f.boolean(caps, k, "capabilities") {
			declare(name, true)
		}
	}
	if f.boolean(doc, "supportsAuthenticatedExtendedCard", "") {
		declare(ExtendedAgentCard, true)
	}

	seen := map[string]bool{}
	for i, ext := range f.objects(caps, "extensions", "capabilities") {
		path := index("capabilities.extensions", i)
		uri := f.requiredStr(ext, "uri", path)
		f.str(ext, "description", path)
		required := f.boolean(ext, "required", path)
		params := f.object(ext, "params", path)
		if f.err != nil {
			return
		}
		if seen[uri] {
			p.Warnings = append(p.Warnings, fmt.Sprintf("%s: extension %s is listed twice; the first entry counts", path, uri))
			continue
		}
		seen[uri] = true
		p.Extensions = append(p.Extensions, Extension{URI: uri, Required: required, Params: params})
		declare(uri, true)
		if uri == SteeringURI {
			p.Steering.Interruptible = steeringMode(params, "interruptible", path, p)
			p.Steering.Steerable = steeringMode(params, "steerable", path, p)
		}
	}
	if p.Extensions == nil {
		p.Extensions = []Extension{}
	}
	if p.Steering.Interruptible {
		declare(Interruptible, true)
	}
	if p.Steering.Steerable {
		declare(Steerable, true)
	}
	for _, pr := range p.Protocols {
		if pr.Tenant != "" {
			declare(MultiTenant, false)
			break
		}
	}
}

// steeringMode reads a steering mode param. Absent means false; a value that
// is not a boolean is a warning, not an error, so one sloppy param does not
// take the whole agent out of service.
func steeringMode(params map[string]any, key, path string, p *Profile) bool {
	v, ok := params[key]
	if !ok || v == nil {
		return false
	}
	b, ok := v.(bool)
	if !ok {
		p.Warnings = append(p.Warnings, fmt.Sprintf("%s.params.%s: want boolean, got %s; steering mode treated as off", path, key, jsonKind(v)))
	}
	return b
}

// readSkills fills p.Skills.
func readSkills(f *fields, doc map[string]any, p *Profile) {
	skills := f.objects(doc, "skills", "")
	p.Skills = make([]Skill, 0, len(skills))
	for i, s := range skills {
		path := index("skills", i)
		sk := Skill{
			ID:   f.requiredStr(s, "id", path),
			Name: f.str(s, "name", path),
			Tags: f.strs(s, "tags", path),
		}
		f.str(s, "description", path)
		f.strs(s, "examples", path)
		f.strs(s, "inputModes", path)
		f.strs(s, "outputModes", path)
		if sk.Tags == nil {
			sk.Tags = []string{}
		}
		p.Skills = append(p.Skills, sk)
	}
}

// parseableCard returns the card in compact JSON that a2a-go's dual-format
// parser reads. a2a-go v2.4.0 reads security requirement scopes only as
// plain arrays, while the A2A 1.0 JSON form wraps them as {"list": [...]};
// a card in the spec's form is unwrapped first.
func parseableCard(raw []byte, doc map[string]any, protos []Protocol) ([]byte, error) {
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return nil, &CardError{Msg: "not valid JSON", Err: err}
	}
	compact := buf.Bytes()
	_, err := sdkCard(compact, protos)
	if err != nil && unwrapScopeLists(doc) {
		if fixed, mErr := json.Marshal(doc); mErr == nil {
			if _, fErr := sdkCard(fixed, protos); fErr == nil {
				return fixed, nil
			}
		}
	}
	if err != nil {
		return nil, &CardError{Msg: "a2a-go cannot read the card", Err: err}
	}
	return compact, nil
}

// sdkCard parses the card with a2a-go's dual-format parser and aligns its
// interfaces with the profile: versions in Major.Minor form (so a2a-go's
// transport selection matches "0.3.0" cards) and, for 0.2 cards that name no
// transport, the JSON-RPC interface the profile assumed.
func sdkCard(raw []byte, protos []Protocol) (*a2a.AgentCard, error) {
	card, err := a2av0.NewAgentCardParser()(raw)
	if err != nil {
		return nil, err
	}
	if len(card.SupportedInterfaces) == 0 {
		for _, pr := range protos {
			card.SupportedInterfaces = append(card.SupportedInterfaces, &a2a.AgentInterface{
				URL: pr.URL, ProtocolBinding: a2a.TransportProtocol(pr.Binding), Tenant: pr.Tenant, ProtocolVersion: a2a.ProtocolVersion(pr.Version),
			})
		}
	}
	for _, it := range card.SupportedInterfaces {
		if it == nil {
			continue
		}
		if mm, _, ok := normalizeVersion(string(it.ProtocolVersion)); ok {
			it.ProtocolVersion = a2a.ProtocolVersion(mm)
		}
	}
	return card, nil
}

// unwrapScopeLists rewrites {"schemes": {"name": {"list": [...]}}} security
// requirements, at card and skill level, to a2a-go's {"schemes": {"name":
// [...]}} in place. It reports whether it changed anything.
func unwrapScopeLists(doc map[string]any) bool {
	changed := false
	fix := func(reqs any) {
		arr, _ := reqs.([]any)
		for _, r := range arr {
			req, _ := r.(map[string]any)
			schemes, _ := req["schemes"].(map[string]any)
			for name, scopes := range schemes {
				if m, ok := scopes.(map[string]any); ok {
					list, _ := m["list"].([]any)
					if list == nil {
						list = []any{}
					}
					schemes[name] = list
					changed = true
				}
			}
		}
	}
	fix(doc["securityRequirements"])
	skills, _ := doc["skills"].([]any)
	for _, s := range skills {
		if m, ok := s.(map[string]any); ok {
			fix(m["securityRequirements"])
		}
	}
	return changed
}
