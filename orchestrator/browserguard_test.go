package orchestrator

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/orchd/orchd/auth"
	"github.com/orchd/orchd/console"
	"github.com/orchd/orchd/delegation"
	"github.com/orchd/orchd/httpapi"
	"github.com/orchd/orchd/internal/testagent"
	"github.com/orchd/orchd/internal/testca"
	"github.com/orchd/orchd/registry"
)

// browserRequest is a request as a browser sends it for some page: the
// Host it names, and where it says the request comes from.
type browserRequest struct {
	name, method, path string
	// host replaces the Host header ("" keeps the URL's).
	host string
	// origin and site are the Origin and Sec-Fetch-Site headers ("" for
	// none).
	origin, site string
	// contentType and body: a JSON-RPC body is posted with no type, as a
	// script's Blob or ArrayBuffer is.
	contentType, body string
	// header is one more header, "Name: value".
	header string
	cookie *http.Cookie
}

// send sends r to base with c and returns the status and body.
func (r browserRequest) send(t *testing.T, c *http.Client, base string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), r.method, base+r.path, strings.NewReader(r.body))
	if err != nil {
		t.Fatal(err)
	}
	if r.host != "" {
		req.Host = r.host
	}
	for k, v := range map[string]string{"Origin": r.origin, "Sec-Fetch-Site": r.site, "Content-Type": r.contentType} {
		if v != "" {
			req.Header.Set(k, v)
		}
	}
	if k, v, ok := strings.Cut(r.header, ": "); ok {
		req.Header.Set(k, v)
	}
	if r.cookie != nil {
		req.AddCookie(r.cookie)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s: %v", r.name, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// noRedirects is a client that reports redirects instead of following
// them, as the console's form posts answer 303.
var noRedirects = &http.Client{Timeout: 30 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

// sendMessage is an A2A 1.0 JSON-RPC SendMessage that starts a task.
const sendMessage = `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m-browser","role":"ROLE_USER","parts":[{"text":"survey"}]},"configuration":{"returnImmediately":true}}}`

// sendMessage03 is an A2A 0.3 JSON-RPC message/send that starts a task:
// no header is needed, so a page of any site can have a browser send it
// without asking first.
const sendMessage03 = `{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":{"kind":"message","messageId":"m3","role":"user","parts":[{"kind":"text","text":"survey"}]},"configuration":{"blocking":false}}}`

// countDelegations returns how many delegations base lists.
func countDelegations(t *testing.T, base, token string) int {
	t.Helper()
	var l httpapi.DelegationList
	if code, _ := callAs(t, token, "GET", base+"/v1/delegations", "", &l); code != 200 {
		t.Fatalf("list delegations = %d", code)
	}
	return len(l.Delegations)
}

// TestBrowserGuard_DevelopmentDaemon: on a daemon without authentication,
// where every caller may do everything, a page of another site gets
// nothing done through the operator's browser: not by DNS rebinding (a
// Host naming the attacker's site, on the API, the console and A2A), and
// not by posting across sites (Sec-Fetch-Site, or Origin from browsers
// without it), also where the JSON check lets a post through (no body, or
// A2A's JSON-RPC with no type). orchd's own names, its pages and clients
// that are not browsers are served as before.
func TestBrowserGuard_DevelopmentDaemon(t *testing.T) {
	t.Parallel()
	worker := testagent.Start(t, testagent.Options{Name: "Worker", Skill: "research", Streaming: true}, testagent.Hang())
	card, _ := agentServer(t, testCard(t, "v1-minimal.json"))
	cfg := loadDefaults(t)
	cfg.Agents = []registry.Spec{{ID: "worker", URL: worker.URL}}
	cfg.Agent.URL = "https://orchd.example.com" // behind a proxy that keeps the Host it was sent to
	cfg.HTTP.AllowedHosts = []string{"Orchd.Internal"}
	d := runDaemon(t, cfg)
	base := "http://" + d.Addr().String()
	port := base[strings.LastIndex(base, ":"):]
	rebound := "rebind.attacker.example" + port

	var rec delegation.Record
	if code := call(t, "POST", base+"/v1/delegations", `{"text": "survey", "skill": "research"}`, &rec); code != 201 {
		t.Fatalf("delegate = %d", code)
	}
	waitFor(t, base, rec.ID, a2a.TaskStateWorking)
	cancel := "/v1/delegations/" + rec.ID + ":cancel"
	register := `{"url": "` + card.URL + `"}`

	refused := []browserRequest{
		{name: "rebinding: register an agent", method: "POST", path: "/v1/agents", host: rebound, origin: "http://" + rebound, site: "same-origin",
			contentType: "application/json", body: register},
		{name: "rebinding: read the delegations", method: "GET", path: "/v1/delegations", host: rebound, site: "same-origin"},
		{name: "rebinding: cancel", method: "POST", path: cancel, host: rebound, origin: "http://" + rebound, site: "same-origin"},
		{name: "rebinding, an old browser: cancel", method: "POST", path: cancel, host: rebound, origin: "http://" + rebound},
		{name: "rebinding: the console's cancel", method: "POST", path: "/ui/delegations/" + rec.ID + "/cancel", host: rebound,
			origin: "http://" + rebound, site: "same-origin", contentType: "application/x-www-form-urlencoded"},
		{name: "rebinding: the console's pages", method: "GET", path: "/ui/delegations/" + rec.ID, host: rebound, site: "same-origin"},
		{name: "rebinding: an A2A task", method: "POST", path: pathJSONRPC, host: rebound, origin: "http://" + rebound, site: "same-origin",
			contentType: "application/json", body: sendMessage, header: "A2A-Version: 1.0"}, // a page's own origin may send any header
		{name: "another site: an A2A 0.3 task", method: "POST", path: pathJSONRPC03, origin: "https://attacker.example", site: "cross-site",
			contentType: "text/plain", body: sendMessage03},
		{name: "rebinding, a trailing dot", method: "GET", path: "/v1/delegations", host: "rebind.attacker.example." + port},
		{name: "another site: cancel", method: "POST", path: cancel, origin: "https://attacker.example", site: "cross-site"},
		{name: "another port of this host: cancel", method: "POST", path: cancel, origin: "http://127.0.0.1:1", site: "same-site"},
		{name: "another site, an old browser: cancel", method: "POST", path: cancel, origin: "https://attacker.example"},
		{name: "another site: an A2A task with no type", method: "POST", path: pathJSONRPC, origin: "https://attacker.example", site: "cross-site",
			body: sendMessage},
		{name: "another site: A2A over HTTP+JSON", method: "POST", path: pathREST + "/message:send", origin: "https://attacker.example",
			site: "cross-site", body: `{"message":{"messageId":"m2","role":"ROLE_USER","parts":[{"text":"survey"}]},"configuration":{"returnImmediately":true}}`},
		{name: "another site: an A2A 0.3 task with no type", method: "POST", path: pathJSONRPC03, origin: "https://attacker.example", site: "cross-site",
			body: sendMessage03},
		{name: "a credential is no exemption without authentication", method: "POST", path: cancel, host: rebound, header: "Authorization: Bearer anything"},
	}
	for _, r := range refused {
		code, body := r.send(t, noRedirects, base)
		if code != http.StatusForbidden {
			t.Errorf("%s: %d %s, want 403", r.name, code, body)
			continue
		}
		jsonRPC := strings.HasPrefix(r.path, pathJSONRPC) || strings.HasPrefix(r.path, pathJSONRPC03)
		switch {
		case strings.HasPrefix(r.path, pathA2A) && jsonRPC:
			var e struct {
				Error struct{ Code int } `json:"error"`
			}
			if json.Unmarshal([]byte(body), &e) != nil || e.Error.Code != -31403 {
				t.Errorf("%s: %s, want a JSON-RPC error -31403", r.name, body)
			}
		case strings.HasPrefix(r.path, pathA2A):
			if !strings.Contains(body, `"PERMISSION_DENIED"`) || !strings.Contains(body, `"UNAUTHORIZED"`) {
				t.Errorf("%s: %s, want a google.rpc.Status PERMISSION_DENIED", r.name, body)
			}
		default:
			var e httpapi.ErrorBody
			if json.Unmarshal([]byte(body), &e) != nil || e.Error.Code != "permission_denied" {
				t.Errorf("%s: %s, want the API's permission_denied", r.name, body)
			}
		}
		if r.host != "" && !strings.Contains(body, "http.allowedHosts") {
			t.Errorf("%s: %s does not say how to allow a name", r.name, body)
		}
	}
	if got := waitFor(t, base, rec.ID, a2a.TaskStateWorking); got.State != a2a.TaskStateWorking {
		t.Errorf("a refused request canceled the delegation: %s", got.State)
	}
	if n := countDelegations(t, base, ""); n != 1 {
		t.Errorf("%d delegations, want the test's one: a refused request started work", n)
	}
	var agents httpapi.AgentList
	if call(t, "GET", base+"/v1/agents", "", &agents); len(agents.Agents) != 1 {
		t.Errorf("%d agents, want the worker alone: a refused request registered one", len(agents.Agents))
	}

	served := []struct {
		browserRequest
		status int
	}{
		{browserRequest{name: "localhost", method: "GET", path: "/v1/agents", host: "localhost" + port}, 200},
		{browserRequest{name: "an IP address", method: "GET", path: "/v1/agents", host: "[::1]" + port}, 200},
		{browserRequest{name: "agent.url's host", method: "GET", path: "/v1/agents", host: "orchd.example.com"}, 200},
		{browserRequest{name: "http.allowedHosts, any case", method: "GET", path: "/v1/agents", host: "orchd.internal" + port}, 200},
		{browserRequest{name: "the card, whatever the Host", method: "GET", path: "/.well-known/agent-card.json", host: rebound}, 200},
		{browserRequest{name: "the card at the 0.2-era path, whatever the Host", method: "GET", path: "/.well-known/agent.json", host: rebound}, 200},
		{browserRequest{name: "the push webhook, whatever the Host (its token decides)", method: "POST", path: pathPush + "/" + rec.ID,
			host: rebound, contentType: "application/json", body: `{}`}, 404},
		{browserRequest{name: "the console's own page", method: "POST", path: "/ui/policies", origin: base, site: "same-origin",
			contentType: "application/x-www-form-urlencoded", body: url.Values{"request": {`{}`}}.Encode()}, 200},
		{browserRequest{name: "an old browser on the console's own page", method: "POST", path: "/ui/policies", origin: base,
			contentType: "application/x-www-form-urlencoded", body: url.Values{"request": {`{}`}}.Encode()}, 200},
		{browserRequest{name: "an old browser, agent.url's origin through a proxy", method: "POST", path: "/ui/policies",
			origin: "https://orchd.example.com", contentType: "application/x-www-form-urlencoded", body: url.Values{"request": {`{}`}}.Encode()}, 200},
		{browserRequest{name: "a client that is not a browser", method: "POST", path: "/v1/policy:evaluate", contentType: "application/json", body: `{}`}, 200},
		{browserRequest{name: "the console's cancel from its page", method: "POST", path: "/ui/delegations/" + rec.ID + "/cancel",
			origin: base, site: "same-origin", contentType: "application/x-www-form-urlencoded"}, http.StatusSeeOther},
	}
	for _, s := range served {
		if code, body := s.send(t, noRedirects, base); code != s.status {
			t.Errorf("%s: %d %s, want %d", s.name, code, body, s.status)
		}
	}
	waitFor(t, base, rec.ID, a2a.TaskStateCanceled)
}

// TestBrowserGuard_AuthenticatedDaemon: where orchd authenticates its
// callers, what a browser adds to a request by itself, the console's
// cookie and a client certificate, is not taken from a page of another
// site or a rebound host name; a request with a header credential, which
// no page can add without knowing it, is served whatever Host it names.
func TestBrowserGuard_AuthenticatedDaemon(t *testing.T) {
	t.Parallel()
	worker := testagent.Start(t, testagent.Options{Name: "Worker", Skill: "research", Streaming: true}, testagent.Hang())
	dir := t.TempDir()
	serverCA, clientCA := testca.New(t, "server CA"), testca.New(t, "client CA")
	srv := serverCA.Server(t, "orchd")
	writeFile(t, dir+"/server.pem", string(srv.CertPEM))
	writeFile(t, dir+"/server.key", string(srv.KeyPEM))
	writeFile(t, dir+"/client-ca.pem", string(clientCA.PEM()))
	const spiffe = "spiffe://acme.example/ops/console"
	cfg := loadDefaults(t)
	cfg.Agents = []registry.Spec{{ID: "worker", URL: worker.URL}}
	cfg.HTTP.TLS = &TLSConfig{CertFile: dir + "/server.pem", KeyFile: dir + "/server.key"}
	cfg.Auth = authTokens()
	cfg.Auth.APIKeyHeader = "X-API-Key"
	cfg.Auth.MTLS = &auth.MTLSConfig{ClientCAFile: dir + "/client-ca.pem", Roles: map[string][]string{spiffe: {"admin"}}}
	base := startTLSDaemon(t, cfg)
	port := base[strings.LastIndex(base, ":"):]
	rebound := "rebind.attacker.example" + port

	roots := x509.NewCertPool()
	roots.AddCert(serverCA.Cert)
	tlsClient := func(cert bool) *http.Client {
		tc := &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
		if cert {
			tc.Certificates = []tls.Certificate{clientCA.Client(t, "console", spiffe).TLS}
		}
		c := &http.Client{Transport: &http.Transport{TLSClientConfig: tc}, Timeout: 10 * time.Second,
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		t.Cleanup(c.CloseIdleConnections)
		return c
	}
	withCert, noCert := tlsClient(true), tlsClient(false)

	delegate := browserRequest{name: "delegate", method: "POST", path: "/v1/delegations", contentType: "application/json",
		body: `{"text": "survey", "skill": "research"}`, header: "Authorization: Bearer " + aliceToken}
	code, body := delegate.send(t, noCert, base)
	var rec delegation.Record
	if code != 201 || json.Unmarshal([]byte(body), &rec) != nil {
		t.Fatalf("delegate = %d %s", code, body)
	}
	cancel := "/v1/delegations/" + rec.ID + ":cancel"
	aliceCookie := &http.Cookie{Name: console.CookieName, Value: aliceToken}

	refused := []struct {
		browserRequest
		c *http.Client
	}{
		{browserRequest{name: "a client certificate, another site: cancel", method: "POST", path: cancel,
			origin: "https://attacker.example", site: "cross-site"}, withCert},
		{browserRequest{name: "a client certificate, an old browser on another site: reload the policies", method: "POST",
			path: "/v1/policies:reload", origin: "https://attacker.example"}, withCert},
		{browserRequest{name: "a client certificate, a rebound name", method: "GET", path: "/v1/delegations", host: rebound}, withCert},
		{browserRequest{name: "the console's cookie, another site", method: "POST", path: "/ui/delegations/" + rec.ID + "/cancel",
			origin: "https://attacker.example", site: "cross-site", contentType: "application/x-www-form-urlencoded", cookie: aliceCookie}, noCert},
		{browserRequest{name: "the console's cookie, a rebound name", method: "POST", path: "/ui/delegations/" + rec.ID + "/cancel",
			host: rebound, origin: "https://" + rebound, site: "same-origin", contentType: "application/x-www-form-urlencoded", cookie: aliceCookie}, noCert},
		{browserRequest{name: "no credentials, a rebound name", method: "GET", path: "/readyz", host: rebound}, noCert},
	}
	for _, r := range refused {
		if code, body := r.send(t, r.c, base); code != http.StatusForbidden || !strings.Contains(body, `"permission_denied"`) {
			t.Errorf("%s: %d %s, want 403 permission_denied", r.name, code, body)
		}
	}
	if got := delegationState(t, noCert, base, aliceToken, rec.ID); got != a2a.TaskStateWorking {
		t.Errorf("a refused request canceled the delegation: %s", got)
	}

	served := []struct {
		browserRequest
		c      *http.Client
		status int
	}{
		{browserRequest{name: "a bearer token, any Host", method: "GET", path: "/v1/delegations", host: rebound,
			header: "Authorization: Bearer " + aliceToken}, noCert, 200},
		{browserRequest{name: "an API key, any Host", method: "GET", path: "/v1/delegations", host: rebound,
			header: "X-API-Key: " + aliceToken}, noCert, 200},
		{browserRequest{name: "a client certificate, orchd's own name", method: "POST", path: "/v1/policies:reload", host: "localhost" + port}, withCert, 200},
		{browserRequest{name: "no credentials, an IP address", method: "GET", path: "/readyz"}, noCert, 200},
		{browserRequest{name: "the console's cookie, its own page", method: "POST", path: "/ui/delegations/" + rec.ID + "/cancel",
			origin: base, site: "same-origin", contentType: "application/x-www-form-urlencoded", cookie: aliceCookie}, noCert, http.StatusSeeOther},
	}
	for _, s := range served {
		if code, body := s.send(t, s.c, base); code != s.status {
			t.Errorf("%s: %d %s, want %d", s.name, code, body, s.status)
		}
	}
	if got := delegationState(t, noCert, base, aliceToken, rec.ID); got != a2a.TaskStateCanceled {
		t.Errorf("the console's own cancel left the delegation %s", got)
	}
}

// delegationState reads delegation id's state with c as token's caller.
func delegationState(t *testing.T, c *http.Client, base, token, id string) a2a.TaskState {
	t.Helper()
	code, body := browserRequest{name: "read", method: "GET", path: "/v1/delegations/" + id, header: "Authorization: Bearer " + token}.send(t, c, base)
	var rec delegation.Record
	if code != 200 || json.Unmarshal([]byte(body), &rec) != nil {
		t.Fatalf("read %s = %d %s", id, code, body)
	}
	return rec.State
}

// TestHTTPConfig_AllowedHosts: http.allowedHosts takes host names only.
func TestHTTPConfig_AllowedHosts(t *testing.T) {
	t.Parallel()
	for _, h := range []string{"", "orchd.example.com:8080", "https://orchd.example.com", "*.example.com", "orchd example"} {
		if err := (HTTPConfig{AllowedHosts: []string{h}}).validate(); err == nil || !strings.Contains(err.Error(), "http.allowedHosts[0]") {
			t.Errorf("allowedHosts %q: %v, want refused", h, err)
		}
	}
	if err := (HTTPConfig{AllowedHosts: []string{"orchd.example.com", "orchd"}}).validate(); err != nil {
		t.Errorf("host names: %v", err)
	}
}
