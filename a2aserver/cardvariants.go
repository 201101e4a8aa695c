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
)

// orchd serves its card in two variants at the well-known path:
//
//   - the dual 0.3/1.0 card a2a-go's a2av0 producer writes (1.0
//     supportedInterfaces next to 0.3 url, preferredTransport,
//     protocolVersion and additionalInterfaces, security schemes in both
//     shapes), which every client generation reads; and
//   - a strict A2A 1.0 card with only the fields of the 1.0 AgentCard
//     message, which validates against the 1.0 JSON schema (whose objects
//     allow no other properties), for callers that ask for 1.0.
//
// The A2A-Version request header chooses (docs/a2a.md, "Card per
// version"); answers carry Vary: A2A-Version and an ETag per variant.

// cardVariant is one variant's served bytes and its ETag.
type cardVariant struct {
	json []byte
	etag string
}

func newCardVariant(b []byte) cardVariant {
	sum := sha256.Sum256(b)
	return cardVariant{json: b, etag: `"` + hex.EncodeToString(sum[:12]) + `"`}
}

// variant returns the variant r asks for: the 1.0 card when its
// A2A-Version header (or, failing that, its A2A-Version query parameter,
// which the specification allows for service parameters) names a 1.x
// version, else the dual card, also to callers that name none.
func (c *servedCard) variant(r *http.Request) cardVariant {
	asked := strings.TrimSpace(r.Header.Get(a2a.SvcParamVersion))
	if asked == "" {
		asked = strings.TrimSpace(r.URL.Query().Get(a2a.SvcParamVersion))
	}
	if asked != "" && sameVersion(asked, "1.0") {
		return c.v1
	}
	return cardVariant{json: c.json, etag: c.etag}
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
// reads both; a2a-go's card parser reads only the bare array, but its
// resolver sends no A2A-Version and so gets the dual card.
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
