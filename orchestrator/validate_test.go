package orchestrator

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A problem with a setting is given the place in the file that sets it;
// one the file leaves to the defaults, or that names no setting, is not.
func TestLocate(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "orchd.yaml")
	if err := os.WriteFile(path, []byte("listen: 0.0.0.0:8080\nstore: memory\nagents:\n  - url: a\n  - url: b\n    credentials: {}\nhttp:\n  tls:\n    certFile: c\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cause := errors.New("cause")
	tests := []struct{ problem, want string }{
		{"config: listen 0.0.0.0:8080 binds every interface", path + ":1:1: listen 0.0.0.0:8080 binds every interface"},
		{"config: agents[1]: bad", path + ":5:5: agents[1]: bad"},
		{"config: agents[1].credentials: bad", path + ":6:5: agents[1].credentials: bad"},
		{"config: agents[7]: bad", path + ":3:1: agents[7]: bad"},
		{"config: http.tls: open c: no such file", path + ":8:3: http.tls: open c: no such file"},
		{"config: store.url is set", path + ":2:1: store.url is set"},
		{"config: delegation.follow \"x\": want auto", "config: delegation.follow \"x\": want auto"},
		{"read policies: open p: no such file", "read policies: open p: no such file"},
	}
	for _, tt := range tests {
		got := locate(path, fmt.Errorf("%s%w", tt.problem, noTextError{cause}))
		if got.Error() != tt.want || !errors.Is(got, cause) {
			t.Errorf("locate(%q) = %q, want %q", tt.problem, got, tt.want)
		}
	}
}

// noTextError wraps an error without adding to the message.
type noTextError struct{ err error }

func (e noTextError) Error() string { return "" }
func (e noTextError) Unwrap() error { return e.err }

func ExampleCheckConfig() {
	dir, _ := os.MkdirTemp("", "orchd")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "orchd.yaml")
	_ = os.WriteFile(path, []byte("listen: 127.0.0.1:0\nstore: memory\nagents:\n  - url: 127.0.0.1:9001\n"), 0o600)
	_, err := CheckConfig(path, CheckOptions{})
	fmt.Println(strings.TrimPrefix(err.Error(), path))

	_ = os.WriteFile(path, []byte("listen: 127.0.0.1:0\nstore: memory\nagents:\n  - url: http://127.0.0.1:9001\n"), 0o600)
	s, err := CheckConfig(path, CheckOptions{})
	fmt.Println(err, s.Store, s.Agents, s.Auth)
	// Output:
	// :4:5: agents[0]: invalid agent URL "127.0.0.1:9001" has no scheme; did you mean "http://127.0.0.1:9001"?
	// <nil> memory 1 false
}
