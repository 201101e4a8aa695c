package httpgate

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/orchd/orchd/auth"
)

// auth.peers entries name a method, and a JWT peer the configured
// issuer; anything else is a config error saying what to write.
func TestAuth_PeerNames(t *testing.T) {
	t.Parallel()
	jwt := &auth.JWTConfig{Issuer: "https://idp.example.com"}
	for _, tc := range []struct {
		entry   string
		jwt     *auth.JWTConfig
		want    auth.Identity
		wantErr string
	}{
		{"token:orchd-a", nil, auth.Identity{Method: auth.MethodToken, ID: "orchd-a"}, ""},
		{"token:a:b@c", nil, auth.Identity{Method: auth.MethodToken, ID: "a:b@c"}, ""},
		{"mtls:spiffe://acme.example/orchd", nil, auth.Identity{Method: auth.MethodMTLS, ID: "spiffe://acme.example/orchd"}, ""},
		{"jwt:https://idp.example.com#orchd-a", jwt, auth.Identity{Method: auth.MethodJWT, Issuer: "https://idp.example.com", ID: "orchd-a"}, ""},
		{"jwt:https://idp.example.com#a#b", jwt, auth.Identity{Method: auth.MethodJWT, Issuer: "https://idp.example.com", ID: "a#b"}, ""},
		{"orchd-a", nil, auth.Identity{}, "token:orchd-a"},
		{"spiffe://acme.example/orchd", nil, auth.Identity{}, "name the peer with how it authenticates"},
		{"token:", nil, auth.Identity{}, "no principal"},
		{"token: ", nil, auth.Identity{}, "no principal"},
		{"jwt:https://idp.example.com#orchd-a", nil, auth.Identity{}, "auth.jwt is not configured"},
		{"jwt:https://other.example#orchd-a", jwt, auth.Identity{}, "want jwt:https://idp.example.com#<sub>"},
		{"jwt:orchd-a", jwt, auth.Identity{}, "want jwt:https://idp.example.com#<sub>"},
		{"jwt:https://idp.example.com#", jwt, auth.Identity{}, "want jwt:"},
		{"peer:orchd-a", nil, auth.Identity{}, "name the peer with how it authenticates"},
	} {
		got, err := parsePeer(tc.entry, tc.jwt)
		switch {
		case tc.wantErr != "":
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("parsePeer(%q) = %+v, %v; want an error saying %q", tc.entry, got, err, tc.wantErr)
			}
		case err != nil:
			t.Errorf("parsePeer(%q): %v", tc.entry, err)
		default:
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("parsePeer(%q) (-want +got):\n%s", tc.entry, diff)
			}
		}
	}
	if err := (AuthConfig{Peers: []string{"token:orchd-a", "gateway"}}).Validate(); err == nil || !strings.Contains(err.Error(), `config: auth.peers[1] "gateway"`) {
		t.Errorf("Validate = %v", err)
	}
}
