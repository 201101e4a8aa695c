package store

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Config says where orchd keeps its state and how durably. The zero value
// means the defaults: an embedded NATS server storing under the state
// directory, namespace "orchd", one replica, a week of retention, at most
// 1 GiB on disk, and writes synced to disk every second.
//
// Durability of the embedded server (Sync): every write reaches the
// operating system before JetStream acknowledges it, so when orchd dies,
// even by kill -9, nothing acknowledged is lost. What Sync decides is when
// the operating system is made to write it to the disk: with "always",
// before the acknowledgement (each write waits for an fsync); with a
// duration (default 1s), at that interval, so a power loss or a kernel
// crash loses at most that much acknowledged work. An external cluster
// decides this on its own servers; there, a write is acknowledged once a
// majority of Replicas hold it.
type Config struct {
	// URL is empty for the embedded server, or the URL of an external
	// NATS cluster with JetStream, like nats://nats-1:4222; several may
	// be given, comma-separated.
	URL string `yaml:"url"`
	// Credentials is a NATS credentials (.creds) file to connect to URL
	// with.
	Credentials string `yaml:"credentials"`
	// NKeySeedFile is an nkey seed file to connect to URL with.
	NKeySeedFile string `yaml:"nkeySeedFile"`
	// TLS configures TLS to URL.
	TLS TLSConfig `yaml:"tls"`
	// Namespace prefixes every bucket, stream and subject orchd uses, so
	// several logical orchds can share one cluster. The processes of one
	// logical orchd, which carry on each other's delegations, share one
	// namespace. Letters, digits, - and _, at most 32. Default "orchd".
	Namespace string `yaml:"namespace"`
	// Replicas is how many servers keep each bucket and stream, 1 to 5.
	// Default 1; more needs an external cluster of at least that many
	// servers.
	Replicas int `yaml:"replicas"`
	// Retention is how long an ended delegation's record, and every
	// event, is kept; whole seconds, at least 1s. Default 7 days.
	Retention time.Duration `yaml:"retention"`
	// MaxBytes bounds the embedded server's disk use, at least 1 MiB.
	// Default 1 GiB. An external cluster's limits are its own.
	MaxBytes int64 `yaml:"maxBytes"`
	// Sync is "always" or a duration such as 1s, the default; see the
	// durability note above. The embedded server only.
	Sync string `yaml:"sync"`
	// Listen is an optional host:port where the embedded server also
	// accepts NATS clients (port 0 picks a free one), for inspecting the
	// state with NATS tools. It asks no credentials: keep it on loopback.
	// Default none: only orchd itself, in process, talks to it.
	Listen string `yaml:"listen"`
	// Timeout bounds each store operation and the connection to URL: a
	// store that does not answer in time is unavailable. Default 5s.
	Timeout time.Duration `yaml:"timeout"`
	// QuickWriteLag is how long the record of a delegation its agent
	// ended in its first answer may wait, after the caller has its
	// answer, before it is written, group-committed with others
	// (quick.go): a duration from 1ms to 1s, or "off" to write each one
	// before its answer, as every other write is. Default 100ms. A
	// kill -9 loses at most the records of that window, never work that
	// goes on nor anything a caller was told was kept.
	QuickWriteLag string `yaml:"quickWriteLag"`
	// TaskRideOut is how long an update of a running A2A task (a2a-go
	// stores each event of an execution) is tried again while the store
	// is unavailable, each try bounded by Timeout, the caller's stream
	// waiting meanwhile. Past it, the execution ends with an error and
	// orchd writes the delegation into the task once the store takes
	// writes. Default 30s (DefaultTaskRideOut).
	TaskRideOut time.Duration `yaml:"taskRideOut"`

	// seqEvery is how often the embedded store records its streams'
	// sequences (inventory.go); 0 means seqEvery(Sync). Tests shorten it.
	seqEvery time.Duration
}

// TLSConfig holds the files for TLS to an external cluster. All are
// optional; Cert and Key go together.
type TLSConfig struct {
	// CA is a PEM file of the authorities the servers' certificates must
	// chain to; empty means the system's.
	CA string `yaml:"ca"`
	// Cert and Key are the client certificate and its key, for servers
	// that verify clients.
	Cert string `yaml:"cert"`
	Key  string `yaml:"key"`
}

// Defaults of [Config].
const (
	DefaultNamespace = "orchd"
	DefaultReplicas  = 1
	DefaultRetention = 7 * 24 * time.Hour
	DefaultMaxBytes  = 1 << 30
	DefaultSync      = "1s"
	DefaultTimeout   = 5 * time.Second
	// DefaultQuickWriteLag is QuickWriteLag's default.
	DefaultQuickWriteLag = "100ms"
	// QuickWritesOff turns the quick writes off (QuickWriteLag).
	QuickWritesOff = "off"
)

// Bounds of [Config].
const (
	MaxReplicas = 5
	// MinQuickWriteLag and MaxQuickWriteLag bound QuickWriteLag.
	MinQuickWriteLag = time.Millisecond
	MaxQuickWriteLag = time.Second
	MinMaxBytes      = 1 << 20
	maxNamespaceLen  = 32
	// embeddedMaxPayload is the embedded server's largest message, the
	// most nats-server takes without warning: an A2A task nearly as large
	// as orchd's request bodies (8 MiB), or an agent near the card limit,
	// fits. An external cluster's max_payload (1 MiB unless configured) is
	// its own.
	embeddedMaxPayload = 8 << 20
	// embeddedMaxMemory bounds the embedded server's memory storage,
	// which orchd does not use: everything it keeps is on disk.
	embeddedMaxMemory = 32 << 20
)

// Validate checks the configuration, naming the offending key (under
// store.) in each error. Zero values are valid: they mean the defaults.
func (c Config) Validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf("store."+format, args...)) }
	external := c.URL != ""
	if external {
		for u := range strings.SplitSeq(c.URL, ",") {
			if err := checkURL(strings.TrimSpace(u)); err != nil {
				bad("url %q: %v", c.URL, err)
				break
			}
		}
		if c.Listen != "" {
			bad("listen is for the embedded server; with store.url orchd runs none")
		}
	} else {
		for _, k := range []struct{ key, v string }{
			{"credentials", c.Credentials}, {"nkeySeedFile", c.NKeySeedFile},
			{"tls.ca", c.TLS.CA}, {"tls.cert", c.TLS.Cert}, {"tls.key", c.TLS.Key},
		} {
			if k.v != "" {
				bad("%s is for an external cluster and needs store.url", k.key)
			}
		}
		if c.Replicas > 1 {
			bad("replicas %d needs an external cluster (store.url): the embedded server is a single node", c.Replicas)
		}
	}
	if c.Credentials != "" && c.NKeySeedFile != "" {
		bad("credentials and store.nkeySeedFile are two ways to authenticate; give one")
	}
	if (c.TLS.Cert == "") != (c.TLS.Key == "") {
		bad("tls.cert and store.tls.key go together")
	}
	if c.Namespace != "" && (len(c.Namespace) > maxNamespaceLen || !plainToken(c.Namespace)) {
		bad("namespace %q is not 1 to %d letters, digits, - or _", c.Namespace, maxNamespaceLen)
	}
	if c.Replicas < 0 || c.Replicas > MaxReplicas {
		bad("replicas %d is not between 1 and %d", c.Replicas, MaxReplicas)
	}
	if c.Retention != 0 && (c.Retention < time.Second || c.Retention%time.Second != 0) {
		bad("retention %s is not a whole number of seconds of at least 1s", c.Retention)
	}
	if c.MaxBytes != 0 && c.MaxBytes < MinMaxBytes {
		bad("maxBytes %d is below the minimum of %d (1 MiB)", c.MaxBytes, MinMaxBytes)
	}
	if _, _, err := parseSync(c.Sync); err != nil {
		bad("sync %q is neither \"always\" nor a positive duration like 1s", c.Sync)
	}
	if c.Listen != "" {
		if _, _, err := parseListen(c.Listen); err != nil {
			bad("listen %q: %v", c.Listen, err)
		}
	}
	if c.Timeout < 0 || (c.Timeout > 0 && c.Timeout < 10*time.Millisecond) {
		bad("timeout %s is below 10ms", c.Timeout)
	}
	if c.TaskRideOut < 0 {
		bad("taskRideOut %s is negative", c.TaskRideOut)
	}
	if _, err := parseQuickWriteLag(c.QuickWriteLag); err != nil {
		bad("quickWriteLag %q is neither \"off\" nor a duration from %s to %s", c.QuickWriteLag, MinQuickWriteLag, MaxQuickWriteLag)
	}
	return errors.Join(errs...)
}

// withDefaults fills in the zero values.
func (c Config) withDefaults() Config {
	if c.Namespace == "" {
		c.Namespace = DefaultNamespace
	}
	if c.Replicas == 0 {
		c.Replicas = DefaultReplicas
	}
	if c.Retention == 0 {
		c.Retention = DefaultRetention
	}
	if c.MaxBytes == 0 {
		c.MaxBytes = DefaultMaxBytes
	}
	if c.Sync == "" {
		c.Sync = DefaultSync
	}
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
	if c.QuickWriteLag == "" {
		c.QuickWriteLag = DefaultQuickWriteLag
	}
	if c.TaskRideOut == 0 {
		c.TaskRideOut = DefaultTaskRideOut
	}
	return c
}

// parseQuickWriteLag reads QuickWriteLag: 0 for "off", else the lag.
// Empty means the default.
func parseQuickWriteLag(s string) (time.Duration, error) {
	switch s {
	case "":
		s = DefaultQuickWriteLag
	case QuickWritesOff:
		return 0, nil
	}
	d, err := time.ParseDuration(s)
	if err == nil && (d < MinQuickWriteLag || d > MaxQuickWriteLag) {
		err = fmt.Errorf("%s is not from %s to %s", d, MinQuickWriteLag, MaxQuickWriteLag)
	}
	return d, err
}

// parseSync reads Sync: "always", or the interval between syncs. Empty
// means the default.
func parseSync(s string) (always bool, interval time.Duration, err error) {
	switch s {
	case "":
		s = DefaultSync
	case "always":
		return true, 0, nil
	}
	d, err := time.ParseDuration(s)
	if err == nil && d <= 0 {
		err = errors.New("not positive")
	}
	return false, d, err
}

// parseListen reads Listen as a host and a port for the server options,
// where port 0 (any free port) is -1.
func parseListen(s string) (string, int, error) {
	host, p, err := net.SplitHostPort(s)
	if err != nil {
		return "", 0, err
	}
	port, err := strconv.Atoi(p)
	if err != nil || port < 0 || port > 65535 {
		return "", 0, fmt.Errorf("port %q is not a number from 0 to 65535", p)
	}
	if port == 0 {
		port = -1
	}
	return host, port, nil
}

// checkURL checks one server URL of URL.
func checkURL(s string) error {
	u, err := url.Parse(s)
	switch {
	case err != nil:
		return err
	case u.Scheme != "nats" && u.Scheme != "tls":
		return fmt.Errorf("%q is not a nats:// or tls:// URL", s)
	case u.Host == "":
		return fmt.Errorf("%q names no host", s)
	}
	return nil
}
