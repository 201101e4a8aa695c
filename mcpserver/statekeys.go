package mcpserver

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/orchd/orchd/internal/atomicfile"
)

// The keys that sign request states (mrtr.go) are kept in the state
// directory, so a state signed before a restart still opens after it;
// each is used to sign for StateKeyLifetime, then only to verify for one
// lifetime more, then dropped.

// StateKeyFile is the file in the state directory holding the keys.
const StateKeyFile = "mcp-request-state.keys"

// StateKeyLifetime is how long a key signs before a new one replaces it.
const StateKeyLifetime = 24 * time.Hour

// LoadStateKeys returns the request-state keys kept in dir, newest first,
// making and keeping a new one when the newest is older than
// StateKeyLifetime, and dropping those older than twice that. An empty dir
// (a daemon that keeps no state) gives one new key, kept nowhere.
func LoadStateKeys(dir string, now time.Time) ([][]byte, error) {
	if dir == "" {
		k, err := newStateKey()
		return [][]byte{k}, err
	}
	path := filepath.Join(dir, StateKeyFile)
	type stamped struct {
		at  time.Time
		key []byte
	}
	var kept []stamped
	b, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("mcp: read request-state keys: %w", err)
	}
	for i, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if line == "" {
			continue
		}
		at, hexKey, ok := strings.Cut(line, " ")
		t, terr := time.Parse(time.RFC3339, at)
		key, kerr := hex.DecodeString(hexKey)
		if !ok || terr != nil || kerr != nil || len(key) != stateKeyBytes {
			return nil, fmt.Errorf("mcp: %s line %d: want an RFC 3339 time and a %d-byte hex key", path, i+1, stateKeyBytes)
		}
		if now.Sub(t) < 2*StateKeyLifetime {
			kept = append(kept, stamped{t, key})
		}
	}
	if len(kept) == 0 || now.Sub(kept[0].at) >= StateKeyLifetime {
		k, err := newStateKey()
		if err != nil {
			return nil, err
		}
		kept = append([]stamped{{now.UTC(), k}}, kept...)
		var out strings.Builder
		for _, s := range kept {
			fmt.Fprintf(&out, "%s %x\n", s.at.Format(time.RFC3339), s.key)
		}
		if err := atomicfile.Write(path, []byte(out.String())); err != nil {
			return nil, fmt.Errorf("mcp: keep request-state keys: %w", err)
		}
	}
	keys := make([][]byte, len(kept))
	for i, s := range kept {
		keys[i] = s.key
	}
	return keys, nil
}

// stateKeyBytes is the size of a request-state key.
const stateKeyBytes = 32

// newStateKey returns a new random key.
func newStateKey() ([]byte, error) {
	k := make([]byte, stateKeyBytes)
	if _, err := rand.Read(k); err != nil {
		return nil, fmt.Errorf("mcp: make a request-state key: %w", err)
	}
	return k, nil
}
