package auth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

func TestPrincipal_NeverShowsToken(t *testing.T) {
	t.Parallel()
	const secret = "s3cret-bearer-token"
	p := &Principal{ID: "alice", Tenant: "acme", Roles: []string{"admin"}, Claims: map[string]any{"sub": "alice"}, Method: MethodJWT, secret: &bearer{token: secret}}
	if p.Token() != secret {
		t.Fatalf("Token() = %q", p.Token())
	}
	j, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	y, err := yaml.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	log, logs := testLog()
	log.Info("caller", "principal", p)
	slog.New(slog.NewJSONHandler(logs, nil)).Info("caller", "principal", p)
	forms := map[string]string{
		"json":  string(j),
		"yaml":  string(y),
		"%v":    fmt.Sprintf("%v", p),
		"%+v":   fmt.Sprintf("%+v", p),
		"%#v":   fmt.Sprintf("%#v", p),
		"*%+v":  fmt.Sprintf("%+v", *p),
		"*%#v":  fmt.Sprintf("%#v", *p),
		"slog":  logs.String(),
		"error": refuse(MethodJWT, "x").Error(),
	}
	for name, s := range forms {
		if strings.Contains(s, secret) {
			t.Errorf("%s shows the token: %s", name, s)
		}
	}
	if !strings.Contains(forms["json"], `"id":"alice"`) || !strings.Contains(forms["slog"], "id=alice") {
		t.Errorf("json %s / slog %s lack the id", forms["json"], forms["slog"])
	}
	if got := p.String(); got != "jwt:alice@acme" {
		t.Errorf("String() = %q", got)
	}
}

func TestPrincipal_HasRole(t *testing.T) {
	t.Parallel()
	p := &Principal{Roles: []string{"reader", "admin"}}
	for _, tc := range []struct {
		p    *Principal
		role string
		want bool
	}{
		{p, "admin", true},
		{p, "reader", true},
		{p, "Admin", false},
		{p, "", false},
		{&Principal{}, "admin", false},
		{nil, "admin", false},
	} {
		if got := tc.p.HasRole(tc.role); got != tc.want {
			t.Errorf("%v.HasRole(%q) = %v, want %v", tc.p, tc.role, got, tc.want)
		}
	}
	var nilP *Principal
	if nilP.Token() != "" || nilP.String() != "anonymous" {
		t.Error("nil principal")
	}
}

func TestWithPrincipal(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	if _, ok := PrincipalFrom(ctx); ok {
		t.Error("principal in an empty context")
	}
	p := &Principal{ID: "alice", Method: MethodToken}
	got, ok := PrincipalFrom(WithPrincipal(ctx, p))
	if !ok || got != p {
		t.Errorf("PrincipalFrom = %v, %v", got, ok)
	}
	if _, ok := PrincipalFrom(WithPrincipal(ctx, nil)); ok {
		t.Error("a nil principal reported as present")
	}
}

func TestError(t *testing.T) {
	t.Parallel()
	e := expired("token expired at %s", "2026-12-01T12:00:00Z")
	if e.HTTPStatus() != 401 || e.Error() != "authentication refused: token expired at 2026-12-01T12:00:00Z" {
		t.Errorf("%d %q", e.HTTPStatus(), e.Error())
	}
	if !errors.Is(e, ErrExpired) || !errors.Is(e, ErrInvalidCredentials) || errors.Is(e, ErrUnavailable) {
		t.Error("expired: wrong sentinels")
	}
	u := unavailable(MethodJWT, "keys")
	if !errors.Is(u, ErrUnavailable) || errors.Is(u, ErrInvalidCredentials) {
		t.Error("unavailable: wrong sentinels")
	}
	if m := malformed("", "x"); !errors.Is(m, ErrMalformed) || !errors.Is(m, ErrInvalidCredentials) {
		t.Error("malformed: wrong sentinels")
	}
	if u.HTTPStatus() != 503 || !strings.Contains(u.Challenge(), "temporarily_unavailable") {
		t.Errorf("%d %q", u.HTTPStatus(), u.Challenge())
	}
	if got := refuse("", `a "quoted" value`).Challenge(); got != `Bearer error="invalid_token", error_description="a 'quoted' value"` {
		t.Errorf("Challenge() = %s", got)
	}
	if got := quote(strings.Repeat("é", 100)); len(got) > maxQuoted+8 || !strings.HasSuffix(got, `"...`) {
		t.Errorf("quote of a long value = %s", got)
	}
}
