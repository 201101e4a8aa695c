package auth_test

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http/httptest"

	"github.com/orchd/orchd/auth"
)

// Example authenticates requests against a static token configured by its
// SHA-256: the token's principal, a refusal with a reason safe to show, and
// an anonymous request.
func Example() {
	sum := sha256.Sum256([]byte("alice-token"))
	cfg, err := auth.DecodeConfig([]byte(`
tokens:
  - sha256: "` + hex.EncodeToString(sum[:]) + `"
    principal: alice
    tenant: acme
    roles: [admin]
`))
	if err != nil {
		fmt.Println(err)
		return
	}
	a, err := auth.New(cfg, auth.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer a.Close()

	r := httptest.NewRequest("GET", "/v1/agents", nil)
	r.Header.Set("Authorization", "Bearer alice-token")
	p, err := a.Authenticate(r)
	fmt.Println(p, p.HasRole("admin"), err)

	// The principal travels in the request's context.
	ctx := auth.WithPrincipal(r.Context(), p)
	if p, ok := auth.PrincipalFrom(ctx); ok {
		fmt.Println("caller:", p.ID)
	}

	r.Header.Set("Authorization", "Bearer guessed")
	_, err = a.Authenticate(r)
	var ae *auth.Error
	if errors.As(err, &ae) && errors.Is(err, auth.ErrInvalidCredentials) {
		fmt.Println(ae.HTTPStatus(), ae.Reason)
	}

	r.Header.Del("Authorization")
	p, err = a.Authenticate(r)
	fmt.Println(p == nil, err)
	// Output:
	// token:alice@acme true <nil>
	// caller: alice
	// 401 unknown token
	// true <nil>
}
