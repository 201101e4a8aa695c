package limitedfile

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRead(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "f")
	if err := os.WriteFile(path, []byte("12345"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		limit   int64
		want    string
		tooLong bool
	}{
		{5, "12345", false},
		{100, "12345", false},
		{4, "", true},
		{0, "", true},
	} {
		b, err := Read(path, tc.limit)
		if tc.tooLong {
			if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), path) {
				t.Errorf("limit %d: %q, %v; want ErrTooLarge naming the file", tc.limit, b, err)
			}
			continue
		}
		if err != nil || string(b) != tc.want {
			t.Errorf("limit %d: %q, %v", tc.limit, b, err)
		}
	}
	if _, err := Read(filepath.Join(dir, "missing"), 10); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
}
