package auth

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"

	"go.yaml.in/yaml/v3"
)

// tokenEntry is one configured static token, by hash.
type tokenEntry struct {
	sum       [sha256.Size]byte
	principal string
	tenant    string
	roles     []string
	plain     bool   // configured as plain text
	where     string // "tokens[2]" or "tokens.yaml: tokens[2]", for messages
}

// tokenSet is the static tokens in force: inline and file entries together.
// It is replaced whole, never changed.
type tokenSet struct {
	entries []tokenEntry
}

// match returns the entry whose hash equals sum, or nil. It compares sum
// with every entry, in constant time for each, and does not stop at the
// first match, so the time taken says nothing about which hash, or how much
// of one, matched. compare is
// subtle.ConstantTimeCompare outside tests.
func (s *tokenSet) match(sum *[sha256.Size]byte, compare func(x, y []byte) int) *tokenEntry {
	var found *tokenEntry
	for i := range s.entries {
		if compare(s.entries[i].sum[:], sum[:]) == 1 && found == nil {
			found = &s.entries[i]
		}
	}
	return found
}

// tokenEntries checks tokens and returns their entries. where names the
// list in messages ("tokens", "tokens.yaml: tokens").
func tokenEntries(where string, tokens []TokenConfig) ([]tokenEntry, error) {
	var errs []error
	out := make([]tokenEntry, 0, len(tokens))
	for i, t := range tokens {
		w := fmt.Sprintf("%s[%d]", where, i)
		e, err := tokenEntryOf(w, t)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, e)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if len(out) > maxTokens {
		return nil, fmt.Errorf("%s: %d tokens, more than %d", where, len(out), maxTokens)
	}
	return out, checkDuplicates(out)
}

// tokenEntryOf checks one token.
func tokenEntryOf(where string, t TokenConfig) (tokenEntry, error) {
	e := tokenEntry{principal: t.Principal, tenant: t.Tenant, roles: slices.Clone(t.Roles), where: where}
	switch {
	case t.SHA256 != "" && t.Token != "":
		return e, fmt.Errorf("%s: set sha256 or token, not both", where)
	case t.SHA256 != "":
		b, err := hex.DecodeString(t.SHA256)
		if err != nil || len(b) != sha256.Size {
			return e, fmt.Errorf("%s: sha256 is not 64 hex digits", where)
		}
		copy(e.sum[:], b)
	case t.Token != "":
		if r := checkTokenSyntax(t.Token); r != "" {
			return e, fmt.Errorf("%s: token %s", where, r)
		}
		e.sum = sha256.Sum256([]byte(t.Token))
		e.plain = true
	default:
		return e, fmt.Errorf("%s: sha256 (or, for development, token) is required", where)
	}
	if t.Principal == "" || len(t.Principal) > maxNameLen {
		return e, fmt.Errorf("%s: principal is required, at most %d bytes", where, maxNameLen)
	}
	if len(t.Tenant) > maxNameLen {
		return e, fmt.Errorf("%s: tenant is longer than %d bytes", where, maxNameLen)
	}
	if err := checkNames(where, t.Roles); err != nil {
		return e, err
	}
	return e, nil
}

// checkDuplicates refuses one token listed twice: it would be ambiguous
// which principal it names.
func checkDuplicates(entries []tokenEntry) error {
	seen := make(map[[sha256.Size]byte]*tokenEntry, len(entries))
	var errs []error
	for i := range entries {
		e := &entries[i]
		if prev, ok := seen[e.sum]; ok {
			errs = append(errs, fmt.Errorf("%s (principal %s) is the same token as %s (principal %s)", e.where, e.principal, prev.where, prev.principal))
			continue
		}
		seen[e.sum] = e
	}
	return errors.Join(errs...)
}

// tokensFile is the document a tokens file holds.
type tokensFile struct {
	// Tokens are in the shape of Config.Tokens.
	Tokens []TokenConfig `yaml:"tokens"`
}

// parseTokensFile decodes and checks a tokens file's content. An empty file
// holds no tokens.
func parseTokensFile(name string, data []byte) ([]tokenEntry, error) {
	if len(data) > maxTokensFileSize {
		return nil, fmt.Errorf("%s: larger than %d bytes", name, maxTokensFileSize)
	}
	var doc tokensFile
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&doc); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%s: %s", name, yamlError(err))
	}
	return tokenEntries(name+": tokens", doc.Tokens)
}

// yamlValue matches the values yaml.v3 quotes in its type errors.
var yamlValue = regexp.MustCompile("`[^`]*`")

// yamlError is err's message with the values YAML quotes in it left out: in
// a file of tokens, a misplaced token would otherwise reach the log.
func yamlError(err error) string {
	return yamlValue.ReplaceAllString(err.Error(), "a value")
}

// checkTokenSyntax returns why tok cannot be a bearer token, or "": it must
// be 1 to MaxTokenLen visible ASCII characters.
func checkTokenSyntax(tok string) string {
	if tok == "" {
		return "is empty"
	}
	if len(tok) > MaxTokenLen {
		return fmt.Sprintf("is longer than %d bytes", MaxTokenLen)
	}
	for i := 0; i < len(tok); i++ {
		if c := tok[i]; c <= 0x20 || c >= 0x7f {
			return "contains a character other than visible ASCII"
		}
	}
	return ""
}
