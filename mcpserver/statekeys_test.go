package mcpserver

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestLoadStateKeys_KeptRotatedAndDropped: a key is made once and kept;
// a day later a new one signs and the old one still verifies; two days
// after it was made, the old one is dropped; a damaged file is an error
// naming its line.
func TestLoadStateKeys_KeptRotatedAndDropped(t *testing.T) {
	dir := t.TempDir()
	day0 := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	first, err := LoadStateKeys(dir, day0)
	if err != nil || len(first) != 1 || len(first[0]) != stateKeyBytes {
		t.Fatalf("first: %d keys, %v", len(first), err)
	}
	again, err := LoadStateKeys(dir, day0.Add(time.Hour))
	if err != nil || len(again) != 1 || !bytes.Equal(again[0], first[0]) {
		t.Fatalf("an hour later: %d keys, %v", len(again), err)
	}
	rotated, err := LoadStateKeys(dir, day0.Add(25*time.Hour))
	if err != nil || len(rotated) != 2 || bytes.Equal(rotated[0], first[0]) || !bytes.Equal(rotated[1], first[0]) {
		t.Fatalf("a day later: %d keys, %v", len(rotated), err)
	}
	// Two days on, the first key is dropped and the second, a day old,
	// makes way for a third.
	later, err := LoadStateKeys(dir, day0.Add(49*time.Hour))
	if err != nil || len(later) != 2 || !bytes.Equal(later[1], rotated[0]) || bytes.Equal(later[0], first[0]) {
		t.Fatalf("two days later: %d keys, %v", len(later), err)
	}
	if fi, err := os.Stat(filepath.Join(dir, StateKeyFile)); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("the key file: %v, %v", fi.Mode(), err)
	}
	// A state sealed with the old key opens while it verifies.
	old := &stateSealer{keys: [][]byte{first[0]}, ttl: time.Minute}
	sealed := old.seal(requestState{V: 1, Delegation: "d", Expires: day0.Add(time.Hour).Unix()})
	if _, err := (&stateSealer{keys: rotated}).open(sealed, day0); err != nil {
		t.Errorf("after rotation: %v", err)
	}
	if _, err := (&stateSealer{keys: later}).open(sealed, day0); err == nil {
		t.Error("opened with the old key dropped")
	}
	if err := os.WriteFile(filepath.Join(dir, StateKeyFile), []byte("not a key\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadStateKeys(dir, day0); err == nil || !strings.Contains(err.Error(), "line 1") {
		t.Errorf("a damaged file: %v", err)
	}
}
