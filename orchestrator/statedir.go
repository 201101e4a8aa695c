package orchestrator

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// identityFile holds an orchd's generated identity in its state directory;
// lockFile is held locked by the orchd using the directory.
const (
	identityFile = "identity"
	lockFile     = "lock"
)

// identityPattern is what an identity may look like: it travels in chain
// paths and on cards, so it is short and plain.
var identityPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$`)

// DefaultStateDir returns the state directory an orchd listening on listen
// uses when none is configured: one per listen address under the user's
// state directory ($XDG_STATE_HOME, else ~/.local/state), so two daemons
// on one machine keep apart and a restarted one finds its own. It returns
// "" for an ephemeral port (":0"), whose daemon keeps no state.
func DefaultStateDir(listen string) (string, error) {
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return "", fmt.Errorf("listen %q: %w", listen, err)
	}
	if port == "0" {
		return "", nil
	}
	base := os.Getenv("XDG_STATE_HOME")
	if base == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("no state directory: set stateDir in the config or --state-dir: %w", err)
		}
		base = filepath.Join(home, ".local", "state")
	}
	if host == "" {
		host = "any"
	}
	name := strings.NewReplacer(":", "_", "[", "", "]", "", "%", "_").Replace(host) + "-" + port
	return filepath.Join(base, "orchd", name), nil
}

// loadIdentity returns the identity kept in dir, generating and keeping
// one on first use. Two processes starting at once agree on one identity:
// it is written to a temporary file and linked into place, which fails for
// the second.
func loadIdentity(dir string) (string, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("state directory: %w", err)
	}
	path := filepath.Join(dir, identityFile)
	if id, err := readIdentity(path); !errors.Is(err, fs.ErrNotExist) {
		return id, err
	}
	tmp, err := os.CreateTemp(dir, identityFile+".*")
	if err != nil {
		return "", fmt.Errorf("state directory: %w", err)
	}
	defer os.Remove(tmp.Name())
	_, werr := tmp.WriteString(newIdentity() + "\n")
	if err := errors.Join(werr, tmp.Sync(), tmp.Close()); err != nil {
		return "", fmt.Errorf("write identity: %w", err)
	}
	if err := os.Link(tmp.Name(), path); err != nil && !errors.Is(err, fs.ErrExist) {
		return "", fmt.Errorf("write identity: %w", err)
	}
	return readIdentity(path)
}

// readIdentity reads and checks an identity file.
func readIdentity(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	id := strings.TrimSpace(string(b))
	if err := checkIdentity(id); err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	return id, nil
}

// checkIdentity refuses an identity that cannot travel in a chain.
func checkIdentity(id string) error {
	if !identityPattern.MatchString(id) {
		return fmt.Errorf("identity %q: want 1 to 128 letters, digits, '.', '_', ':' or '-', starting with a letter or digit", id)
	}
	return nil
}

// newIdentity returns a fresh identity: "orchd-" and 64 random bits, so
// orchds that never met do not collide.
func newIdentity() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b) // crypto/rand.Read never fails on supported platforms
	return "orchd-" + hex.EncodeToString(b)
}
