package main

import (
	"net"
	"strings"
	"testing"
)

func TestHealthcheck(t *testing.T) {
	t.Parallel()
	base := daemon(t)
	// A port nothing listens on: bound, then closed.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + ln.Addr().String() + "/readyz"
	ln.Close()
	for _, tc := range []struct {
		name    string
		args    []string
		code    int
		wantErr string
	}{
		{name: "ready", args: []string{base + "/readyz"}, code: exitOK},
		{name: "not found", args: []string{base + "/nosuch"}, code: exitFailure, wantErr: "answered 404 Not Found: "},
		{name: "unreachable", args: []string{closed}, code: exitFailure, wantErr: "reach " + closed},
		{name: "bad URL", args: []string{"http://::"}, code: exitFailure, wantErr: `health URL "http://::": want an http or https URL`},
		{name: "no scheme", args: []string{"127.0.0.1:8080/readyz"}, code: exitFailure,
			wantErr: `health URL "127.0.0.1:8080/readyz": want an http or https URL such as "http://127.0.0.1:8080/readyz"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			code, _, errOut := orchd(t, t.Context(), append([]string{"healthcheck"}, tc.args...)...)
			if code != tc.code {
				t.Fatalf("exit %d, want %d: %s", code, tc.code, errOut)
			}
			if tc.wantErr == "" && errOut != "" || !strings.Contains(errOut, tc.wantErr) {
				t.Errorf("stderr %q, want it to contain %q", errOut, tc.wantErr)
			}
		})
	}
}
