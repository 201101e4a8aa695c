package orchestrator

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/orchd/orchd/policies"
)

// ConfigSummary describes a configuration CheckConfig found sound.
type ConfigSummary struct {
	// Listen is the HTTP API's address.
	Listen string
	// Store is the store's mode (embedded, external or memory) and
	// StateDir the state directory, "" when the daemon keeps none.
	Store, StateDir string
	// Agents counts the agents registered at start-up.
	Agents int
	// Policies and AuthorizationPolicies count the policies loaded from
	// the policy files (the built-in authorization policy included), and
	// Rules their delegation rules.
	Policies, Rules, AuthorizationPolicies int
	// Auth is true when callers must authenticate.
	Auth bool
	// TLS is true when the API is served over HTTPS.
	TLS bool
}

// CheckOptions are what serve's flags add to the file.
type CheckOptions struct {
	// InsecureNoAuth is serve's --insecure-no-auth.
	InsecureNoAuth bool
}

// CheckConfig loads the configuration file at path, as serve does, and
// builds every part of a daemon from it without serving: the config is
// decoded and validated, the policy files compiled, the authentication
// set up (tokens and key files read), the card signing key, the HTTPS
// certificate and key and the external store's credential files read, the
// advertised address and the exposure rules checked, and the registry,
// push, delegation and A2A parts built.
//
// It writes nothing and starts nothing that outlives it: the state
// directory is neither created nor locked (a running daemon may hold it),
// no store is opened (an external store.url is not dialed, the embedded
// NATS server is not started), no agent card is fetched and no JWKS URL is
// read; those are first used when the daemon starts.
//
// The error lists every problem found, one per line, with its file, line
// and column where known: a problem with a setting the file writes is
// given that setting's place. A config file that cannot be decoded, or
// whose settings are invalid, stops the check there, with every invalid
// setting listed; the policy files, the files the config names and the
// daemon's parts are each checked and reported together (the parts up to
// the first that fails).
func CheckConfig(path string, opts CheckOptions) (ConfigSummary, error) {
	cfg, err := LoadConfig(path)
	if err != nil {
		return ConfigSummary{}, locate(path, err)
	}
	cfg.InsecureNoAuth = opts.InsecureNoAuth
	var problems []error
	s := ConfigSummary{Listen: cfg.Listen, Agents: len(cfg.Agents), TLS: cfg.HTTP.TLS != nil}

	engine, err := policies.NewEngine(cfg.Policies.Paths, cfg.PolicyOptions(), nil)
	if err != nil {
		problems = append(problems, err) // each problem names its file
	} else {
		set := engine.Set()
		s.Policies, s.Rules, s.AuthorizationPolicies = len(set.Policies()), set.Rules(), len(set.AuthorizationPolicies())
	}

	if s.StateDir, err = stateDirOf(cfg); err != nil {
		problems = append(problems, err)
	} else if info, err := os.Stat(s.StateDir); err == nil && !info.IsDir() {
		problems = append(problems, fmt.Errorf("state directory %s is not a directory", s.StateDir))
	}
	if s.Store, err = cfg.Store.mode(s.StateDir); err != nil {
		problems = append(problems, err)
	}
	if s.Store != StoreEmbedded {
		s.StateDir = ""
	}
	if s.Store == StoreExternal {
		for _, f := range []struct{ key, path string }{
			{"store.credentials", cfg.Store.Credentials}, {"store.nkeySeedFile", cfg.Store.NKeySeedFile},
			{"store.tls.ca", cfg.Store.TLS.CA}, {"store.tls.cert", cfg.Store.TLS.Cert}, {"store.tls.key", cfg.Store.TLS.Key},
		} {
			if f.path == "" {
				continue
			}
			if fh, err := os.Open(f.path); err != nil {
				problems = append(problems, fmt.Errorf("config: %s: %w", f.key, err))
			} else {
				fh.Close()
			}
		}
	}
	if t := cfg.HTTP.TLS; t != nil {
		if _, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile); err != nil {
			problems = append(problems, fmt.Errorf("config: http.tls: %w", err))
		}
	}
	if err := checkAdvertised(cfg.Listen, cfg.Agent.URL); err != nil {
		problems = append(problems, fmt.Errorf("config: %w", err))
	}

	// The daemon's own constructor builds the rest. Policies were compiled
	// above; the state is kept in memory, with no directory, so nothing is
	// written, locked or dialed.
	built := cfg
	built.Policies.Paths = nil
	built.Listen, built.StateDir, built.Store = "127.0.0.1:0", "", StoreConfig{Mode: StoreMemory}
	d, err := New(built, slog.New(slog.DiscardHandler))
	if err != nil {
		problems = append(problems, err)
	} else {
		s.Auth = d.authn != nil
		if addr, err := net.ResolveTCPAddr("tcp", cfg.Listen); err != nil {
			problems = append(problems, fmt.Errorf("config: listen %s: %w", cfg.Listen, err))
		} else if err := d.checkExposed(addr); err != nil {
			problems = append(problems, fmt.Errorf("config: %w", err))
		}
		d.Close()
	}
	return s, locate(path, errors.Join(problems...))
}

// locate gives a problem with a setting ("config: agents[0].url …") the
// place in the file at path that sets it: "FILE:LINE:COL: agents[0].url …",
// and so each problem of a joined error. A problem with no setting named,
// or with one the file leaves to the defaults, is returned as it is.
func locate(path string, err error) error {
	if err == nil {
		return nil
	}
	var root *yaml.Node
	var doc yaml.Node
	if b, rerr := os.ReadFile(path); rerr == nil && yaml.Unmarshal(b, &doc) == nil && len(doc.Content) > 0 {
		root = doc.Content[0]
	}
	return locateIn(path, root, err)
}

// locateIn does the work of locate in the file's top-level node root, nil
// when the file could not be read.
func locateIn(path string, root *yaml.Node, err error) error {
	if joined, ok := err.(interface{ Unwrap() []error }); ok {
		errs := joined.Unwrap()
		located := make([]error, len(errs))
		for i, e := range errs {
			located[i] = locateIn(path, root, e)
		}
		return errors.Join(located...)
	}
	rest, ok := strings.CutPrefix(err.Error(), "config: ")
	if !ok || root == nil {
		return err
	}
	key := rest
	if i := strings.IndexAny(rest, ": \n"); i >= 0 {
		key = rest[:i]
	}
	n := settingNode(root, key)
	if n == nil {
		return err
	}
	return &locatedError{place: fmt.Sprintf("%s:%d:%d", path, n.Line, n.Column), msg: rest, err: err}
}

// settingNode finds the node that sets key ("listen", "http.tls",
// "agents[0].credentials") under the mapping n: the deepest one the file
// writes, or nil when it writes none of it.
func settingNode(n *yaml.Node, key string) *yaml.Node {
	var found *yaml.Node
	for seg := range strings.SplitSeq(key, ".") {
		name, index, indexed := strings.Cut(seg, "[")
		if n == nil || n.Kind != yaml.MappingNode {
			return found
		}
		var value *yaml.Node
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == name {
				found, value = n.Content[i], n.Content[i+1]
				break
			}
		}
		if value == nil {
			return found
		}
		n = value
		if indexed {
			i, err := strconv.Atoi(strings.TrimSuffix(index, "]"))
			if err != nil || n.Kind != yaml.SequenceNode || i < 0 || i >= len(n.Content) {
				return found
			}
			n = n.Content[i]
			found = n
		}
	}
	return found
}

// locatedError is a problem with a setting, at its place in the file.
type locatedError struct {
	place, msg string
	err        error
}

func (e *locatedError) Error() string { return e.place + ": " + e.msg }
func (e *locatedError) Unwrap() error { return e.err }
