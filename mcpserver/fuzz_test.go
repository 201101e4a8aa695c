package mcpserver

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// FuzzRequestState: opening a request state a client sent never panics,
// and a state that opens is one the key sealed: sealing what it holds
// gives it back, byte for byte.
func FuzzRequestState(f *testing.F) {
	s := &stateSealer{keys: [][]byte{make([]byte, stateKeyBytes)}, ttl: time.Minute}
	now := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	sealed := s.seal(requestState{V: 1, Caller: "token:alice@acme", Delegation: "d-1", Args: "x", Key: "input-3", Expires: now.Add(time.Minute).Unix()})
	f.Add(sealed)
	// The same state with the signature's unused last bit set: another
	// string for the same bytes, unless decoding is strict.
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	last := strings.IndexByte(alphabet, sealed[len(sealed)-1])
	f.Add(sealed[:len(sealed)-1] + string(alphabet[last^1]))
	f.Add("")
	f.Add(".")
	f.Add("eyJ2IjoxfQ.")
	f.Fuzz(func(t *testing.T, v string) {
		st, err := s.open(v, now)
		if err != nil {
			return
		}
		if again := s.seal(st); again != v {
			t.Fatalf("%q opened to %+v, which seals to %q", v, st, again)
		}
	})
}

// FuzzStateKeyFile: whatever the key file holds, LoadStateKeys never
// panics, and the keys it returns are whole keys, newest first.
func FuzzStateKeyFile(f *testing.F) {
	f.Add("2026-12-05T09:00:00Z 000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f\n")
	f.Add("")
	f.Add("not a key\n")
	f.Add("2026-12-05T09:00:00Z 00\n")
	f.Fuzz(func(t *testing.T, content string) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, StateKeyFile), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		keys, err := LoadStateKeys(dir, time.Date(2026, 12, 6, 9, 0, 0, 0, time.UTC))
		if err != nil {
			return
		}
		if len(keys) == 0 {
			t.Fatal("no key and no error")
		}
		for _, k := range keys {
			if len(k) != stateKeyBytes {
				t.Fatalf("a key of %d bytes", len(k))
			}
		}
	})
}
