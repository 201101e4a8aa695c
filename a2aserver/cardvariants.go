package a2aserver

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/hashicorp/go-version"
)

// orchd serves its card in two variants:
//
//   - a strict A2A 1.0 card with only the fields of the 1.0 AgentCard
//     message, which validates against the 1.0 JSON schema (whose objects
//     allow no other properties); and
//   - the dual 0.3/1.0 card a2a-go's a2av0 producer writes (1.0
//     supportedInterfaces next to 0.3 url, preferredTransport,
//     protocolVersion and additionalInterfaces, security schemes in both
//     shapes), which 0.3 clients need.
//
// The request's A2A-Version chooses: 1.x the 1.0 card, 0.x the dual one.
// A request that names neither gets its path's default: the 1.0 card at
// the well-known path /.well-known/agent-card.json, the dual card at the
// 0.2-era path /.well-known/agent.json, where 0.3 clients that cannot
// send A2A-Version are pointed (docs/a2a.md, "Card per version"). Answers
// carry Vary: A2A-Version and an ETag per variant.

// LegacyCardPath is the well-known path of A2A 0.1 to 0.2, before 0.3
// named agent-card.json; orchd serves the dual card there, for 0.3
// clients that send no A2A-Version. It is as public as the card's own
// path.
const LegacyCardPath = "/.well-known/agent.json"

// cardVariant is one variant's served bytes and its ETag.
type cardVariant struct {
	json []byte
	etag string
}

func newCardVariant(b []byte) cardVariant {
	sum := sha256.Sum256(b)
	return cardVariant{json: b, etag: `"` + hex.EncodeToString(sum[:12]) + `"`}
}

// variant returns the variant r asks for by its A2A-Version header (or,
// failing that, its A2A-Version query parameter, which the specification
// allows for service parameters): the dual card for a 0.x version, the 1.0
// card for a 1.x one. Any other value, or none, gets the 1.0 card, or the
// dual card when legacy (r asked at LegacyCardPath).
func (c *servedCard) variant(r *http.Request, legacy bool) cardVariant {
	asked := strings.TrimSpace(r.Header.Get(a2a.SvcParamVersion))
	if asked == "" {
		asked = strings.TrimSpace(r.URL.Query().Get(a2a.SvcParamVersion))
	}
	dual := cardVariant{json: c.json, etag: c.etag}
	switch {
	case asked != "" && sameVersion(asked, "1.0"):
		return c.v1
	case asked != "" && majorZero(asked), legacy:
		return dual
	}
	return c.v1
}

// majorZero reports whether v is an A2A version before 1.0 (0.2, 0.3,
// 0.3.0).
func majorZero(v string) bool {
	parsed, err := version.NewVersion(v)
	return err == nil && parsed.Segments()[0] == 0
}

// cardDigest identifies the unsigned content of both variants, so a
// rebuild that changes nothing keeps the served bytes, ETags and
// Last-Modified (a new signature would differ even for the same card).
func cardDigest(dual, v1 []byte) [sha256.Size]byte {
	h := sha256.New()
	h.Write(dual)
	h.Write([]byte{0})
	h.Write(v1)
	var d [sha256.Size]byte
	h.Sum(d[:0])
	return d
}

// v1CardJSON writes card as the A2A 1.0 AgentCard message's ProtoJSON:
// a2a-go's encoding of the card, except that each security requirement's
// scopes become a StringList ({"list": [...]}), as the 1.0 schema and
// proto define them, where a2a-go writes a bare array. orchd's registry
// and a2a-python 1.3.0 read both; a2a-go v2.4.0's card parsers read
// only the bare array (a2a-go issue #430), so an a2a-go client of an orchd
// that declares security reads the dual card (docs/a2a.md).
func v1CardJSON(card *a2a.AgentCard) ([]byte, error) {
	b, err := json.Marshal(card)
	if err != nil {
		return nil, fmt.Errorf("1.0 card: %w", err)
	}
	var doc map[string]any
	if err := json.Unmarshal(b, &doc); err != nil {
		return nil, fmt.Errorf("1.0 card: %w", err)
	}
	changed := scopesAsStringLists(doc["securityRequirements"])
	if skills, ok := doc["skills"].([]any); ok {
		for _, sk := range skills {
			if m, ok := sk.(map[string]any); ok && scopesAsStringLists(m["securityRequirements"]) {
				changed = true
			}
		}
	}
	if !changed {
		return b, nil
	}
	if b, err = json.Marshal(doc); err != nil {
		return nil, fmt.Errorf("1.0 card: %w", err)
	}
	return b, nil
}

// scopesAsStringLists rewrites [{"schemes": {name: [scopes]}}] in place to
// [{"schemes": {name: {"list": [scopes]}}}]; it says whether it changed
// anything.
func scopesAsStringLists(reqs any) bool {
	list, _ := reqs.([]any)
	changed := false
	for _, r := range list {
		m, _ := r.(map[string]any)
		schemes, _ := m["schemes"].(map[string]any)
		for name, scopes := range schemes {
			if arr, ok := scopes.([]any); ok {
				schemes[name] = map[string]any{"list": arr}
				changed = true
			}
		}
	}
	return changed
}

// notModified says whether a conditional GET may be answered 304 (RFC 9110
// §13.2.2): If-None-Match, when sent, decides alone, by weak comparison
// against etag ("*" matches); otherwise If-Modified-Since matches when the
// card has not changed since the date it names.
func notModified(r *http.Request, etag string, modified time.Time) bool {
	if inm := r.Header.Get("If-None-Match"); inm != "" {
		for _, t := range strings.Split(inm, ",") {
			t = strings.TrimPrefix(strings.TrimSpace(t), "W/")
			if t == "*" || t == etag {
				return true
			}
		}
		return false
	}
	ims := r.Header.Get("If-Modified-Since")
	if ims == "" {
		return false
	}
	since, err := http.ParseTime(ims)
	return err == nil && !modified.After(since)
}

// cardCORS lets the card be read from any origin, as a2a-go's card
// handlers do for a public card.
func cardCORS(h http.Header, r *http.Request) {
	if origin := r.Header.Get("Origin"); origin != "" {
		h.Set("Access-Control-Allow-Origin", origin)
		h.Set("Access-Control-Allow-Credentials", "true")
		h.Add("Vary", "Origin")
		return
	}
	h.Set("Access-Control-Allow-Origin", "*")
}

// cardOptions answers a CORS preflight for the card as a2a-go's card
// handlers do, allowing A2A-Version too so a browser can ask for a
// variant.
func cardOptions(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	cardCORS(h, r)
	h.Set("Access-Control-Allow-Methods", "GET, OPTIONS")
	h.Set("Access-Control-Allow-Headers", "Content-Type, "+a2a.SvcParamVersion)
	h.Set("Access-Control-Max-Age", "86400")
	w.WriteHeader(http.StatusOK)
}
