package store

import (
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

func TestConfig_Validate(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		cfg  Config
		want string // in the error; "" means valid
	}{
		{"zero value", Config{}, ""},
		{"every embedded knob", Config{Namespace: "orchd-prod_2", Retention: 48 * time.Hour, MaxBytes: 2 << 30,
			Sync: "always", Listen: "127.0.0.1:0", Timeout: 2 * time.Second}, ""},
		{"sync interval", Config{Sync: "250ms"}, ""},
		{"external cluster", Config{URL: "nats://a:4222, nats://b:4222,tls://c:4222", Replicas: 3, Credentials: "/etc/orchd/nats.creds",
			TLS: TLSConfig{CA: "ca.pem", Cert: "c.pem", Key: "k.pem"}}, ""},
		{"sync word", Config{Sync: "soon"}, `store.sync "soon" is neither "always" nor a positive duration`},
		{"sync zero", Config{Sync: "0s"}, `store.sync "0s"`},
		{"namespace with a dot", Config{Namespace: "a.b"}, `store.namespace "a.b"`},
		{"namespace too long", Config{Namespace: strings.Repeat("n", 33)}, "store.namespace"},
		{"replicas over 5", Config{URL: "nats://a:4222", Replicas: 7}, "store.replicas 7 is not between 1 and 5"},
		{"replicas embedded", Config{Replicas: 3}, "store.replicas 3 needs an external cluster"},
		{"retention under a second", Config{Retention: 500 * time.Millisecond}, "store.retention 500ms"},
		{"retention not whole seconds", Config{Retention: 1500 * time.Millisecond}, "store.retention 1.5s"},
		{"max bytes tiny", Config{MaxBytes: 1000}, "store.maxBytes 1000"},
		{"listen without port", Config{Listen: "localhost"}, "store.listen"},
		{"listen bad port", Config{Listen: "127.0.0.1:http"}, "store.listen"},
		{"listen with url", Config{URL: "nats://a:4222", Listen: "127.0.0.1:4222"}, "store.listen is for the embedded server"},
		{"credentials without url", Config{Credentials: "x.creds"}, "store.credentials is for an external cluster"},
		{"tls without url", Config{TLS: TLSConfig{CA: "ca.pem"}}, "store.tls.ca is for an external cluster"},
		{"cert without key", Config{URL: "nats://a:4222", TLS: TLSConfig{Cert: "c.pem"}}, "store.tls.cert and store.tls.key go together"},
		{"two ways to authenticate", Config{URL: "nats://a:4222", Credentials: "x.creds", NKeySeedFile: "x.nk"}, "give one"},
		{"url of another scheme", Config{URL: "http://a:4222"}, "not a nats:// or tls:// URL"},
		{"url without host", Config{URL: "nats://"}, "names no host"},
		{"timeout tiny", Config{Timeout: time.Millisecond}, "store.timeout 1ms"},
		{"quick write lag", Config{QuickWriteLag: "20ms"}, ""},
		{"quick writes off", Config{QuickWriteLag: "off"}, ""},
		{"quick write lag at most", Config{QuickWriteLag: "1s"}, ""},
		{"quick write lag word", Config{QuickWriteLag: "never"}, `store.quickWriteLag "never" is neither "off" nor a duration from 1ms to 1s`},
		{"quick write lag zero", Config{QuickWriteLag: "0s"}, `store.quickWriteLag "0s"`},
		{"quick write lag tiny", Config{QuickWriteLag: "500us"}, `store.quickWriteLag "500us"`},
		{"quick write lag long", Config{QuickWriteLag: "2s"}, `store.quickWriteLag "2s"`},
		{"quick write lag negative", Config{QuickWriteLag: "-5ms"}, `store.quickWriteLag "-5ms"`},
	} {
		err := tc.cfg.Validate()
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: Validate = %v, want nil", tc.name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: Validate = %v, want an error with %q", tc.name, err, tc.want)
		}
	}
}

func TestConfig_Defaults(t *testing.T) {
	t.Parallel()
	got := Config{}.withDefaults()
	want := Config{Namespace: "orchd", Replicas: 1, Retention: 7 * 24 * time.Hour, MaxBytes: 1 << 30, Sync: "1s", Timeout: 5 * time.Second,
		QuickWriteLag: "100ms", TaskRideOut: 30 * time.Second}
	if got != want {
		t.Errorf("defaults = %+v, want %+v", got, want)
	}
	for _, tc := range []struct {
		sync     string
		always   bool
		interval time.Duration
	}{
		{"", false, time.Second},
		{"always", true, 0},
		{"100ms", false, 100 * time.Millisecond},
	} {
		always, interval, err := parseSync(tc.sync)
		if err != nil || always != tc.always || interval != tc.interval {
			t.Errorf("parseSync(%q) = %v, %s, %v", tc.sync, always, interval, err)
		}
	}
	for _, tc := range []struct {
		lag  string
		want time.Duration // 0: off
	}{
		{"", 100 * time.Millisecond},
		{"off", 0},
		{"1ms", time.Millisecond},
		{"250ms", 250 * time.Millisecond},
	} {
		if got, err := parseQuickWriteLag(tc.lag); err != nil || got != tc.want {
			t.Errorf("parseQuickWriteLag(%q) = %s, %v, want %s", tc.lag, got, err, tc.want)
		}
	}
}

// TestOpen_Listen checks the embedded server listens where Listen says,
// for NATS tools.
func TestOpen_Listen(t *testing.T) {
	t.Parallel()
	s := openTest(t, "", Config{Listen: "127.0.0.1:0"})
	addr := s.srv.Addr()
	if addr == nil || !strings.HasPrefix(addr.String(), "127.0.0.1:") {
		t.Fatalf("listening on %v, want 127.0.0.1", addr)
	}
	other, err := Open(t.Context(), "", Config{URL: "nats://" + addr.String(), Namespace: "other"}, testLogger(t))
	if err != nil {
		t.Fatalf("connect to the embedded server's port: %v", err)
	}
	defer other.Close()
	if err := other.Ping(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// TestConfig_YAML decodes every key as a config file writes it.
func TestConfig_YAML(t *testing.T) {
	t.Parallel()
	const doc = `
url: nats://a:4222,nats://b:4222
credentials: /etc/orchd/nats.creds
tls: {ca: ca.pem, cert: c.pem, key: k.pem}
namespace: orchd-prod
replicas: 3
retention: 72h
maxBytes: 2147483648
sync: always
timeout: 2s
quickWriteLag: 20ms
`
	var got Config
	dec := yaml.NewDecoder(strings.NewReader(doc))
	dec.KnownFields(true)
	if err := dec.Decode(&got); err != nil {
		t.Fatal(err)
	}
	want := Config{URL: "nats://a:4222,nats://b:4222", Credentials: "/etc/orchd/nats.creds",
		TLS: TLSConfig{CA: "ca.pem", Cert: "c.pem", Key: "k.pem"}, Namespace: "orchd-prod", Replicas: 3,
		Retention: 72 * time.Hour, MaxBytes: 2 << 30, Sync: "always", Timeout: 2 * time.Second,
		QuickWriteLag: "20ms"}
	if got != want {
		t.Errorf("decoded %+v, want %+v", got, want)
	}
	if err := got.Validate(); err != nil {
		t.Errorf("Validate: %v", err)
	}
}
