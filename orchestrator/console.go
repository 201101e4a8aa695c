package orchestrator

import (
	"context"
	"net/http"
	"net/url"
	"strings"

	"github.com/orchd/orchd/console"
	"github.com/orchd/orchd/httpapi"
	"github.com/orchd/orchd/httpgate"
)

// The console reads and acts through the API: its Source is the
// console's.
var _ console.Source = httpapi.Source{}

// routeConsole serves the web console at /ui/ and redirects / there. The
// console's pages are behind the same gate as the API (group api), and
// read and act through the API's Source, which authorizes every call as
// the API does; its login and logout pages and static files are open. A
// browser logged in through the console's form presents its bearer token
// in a cookie, which is read for the console's routes alone, as the
// Authorization header it stands for. apiHandler is the API's handler,
// whose event stream the console's live updates reuse; crossOrigin is the
// daemon's protection from other sites' posts, which knows its own
// origins (httpgate.BrowserGuard).
func (d *Daemon) routeConsole(mux *http.ServeMux, api *httpapi.API, apiHandler http.Handler, crossOrigin *http.CrossOriginProtection) error {
	g := d.gate
	cfg := console.Config{
		Source:      api.Source(),
		Classify:    httpgate.Classify,
		Name:        d.cfg.Agent.Name,
		Log:         d.log.With("component", "console"),
		CrossOrigin: crossOrigin,
		Events: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			// The API's own stream, authorized there as any API call.
			r2 := r.Clone(r.Context())
			r2.URL.Path = "/v1/delegations/" + r.PathValue("id") + "/events"
			r2.URL.RawPath = "/v1/delegations/" + url.PathEscape(r.PathValue("id")) + "/events"
			apiHandler.ServeHTTP(w, r2)
		}),
	}
	if g.Enabled() {
		cfg.Login = func(ctx context.Context, token string) error {
			r, err := http.NewRequestWithContext(ctx, http.MethodGet, "/ui/", nil)
			if err != nil {
				return err
			}
			r.Header.Set("Authorization", "Bearer "+token)
			if p, err := d.authn.Authenticate(r); err != nil || p == nil {
				return console.ErrLogin
			}
			return nil
		}
	}
	c, err := console.New(cfg)
	if err != nil {
		return err
	}
	mux.Handle("/ui/", consoleCredentials(loginOnRefusal(g.Wrap(httpgate.GroupAPI, c))))
	// Logging out only deletes the cookie, so a browser whose token was
	// refused or expired can still do it.
	for _, open := range []string{"/ui/login", "/ui/logout", "/ui/static/"} {
		mux.Handle(open, c)
	}
	mux.Handle("GET /{$}", http.RedirectHandler("/ui/", http.StatusSeeOther))
	return nil
}

// consoleCredentials presents the console's login cookie as the bearer
// token it holds, unless the request carries an Authorization header of
// its own. The token is never logged: the gate logs only why it refused.
func consoleCredentials(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if tok, ok := console.Token(r); ok && r.Header.Get("Authorization") == "" {
			r = r.Clone(r.Context())
			r.Header.Set("Authorization", "Bearer "+tok)
		}
		h.ServeHTTP(w, r)
	})
}

// loginOnRefusal sends a browser the gate refused (401) to the login
// page instead of the API's JSON error, for the page reads a person
// makes; the script's requests and the event stream keep the 401.
func loginOnRefusal(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet || !strings.Contains(r.Header.Get("Accept"), "text/html") {
			h.ServeHTTP(w, r)
			return
		}
		q := ""
		if _, ok := console.Token(r); ok {
			q = "?refused"
		}
		h.ServeHTTP(&loginRedirectWriter{ResponseWriter: w, login: "/ui/login" + q}, r)
	})
}

// loginRedirectWriter turns a 401 into a redirect to the login page and drops
// its body.
type loginRedirectWriter struct {
	http.ResponseWriter
	login   string
	refused bool
}

func (w *loginRedirectWriter) WriteHeader(status int) {
	if status == http.StatusUnauthorized {
		w.refused = true
		h := w.Header()
		h.Del("Content-Type")
		h.Set("Location", w.login)
		w.ResponseWriter.WriteHeader(http.StatusSeeOther)
		return
	}
	w.ResponseWriter.WriteHeader(status)
}

func (w *loginRedirectWriter) Write(b []byte) (int, error) {
	if w.refused {
		return len(b), nil
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (w *loginRedirectWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// Flush passes a flush on, for the event stream.
func (w *loginRedirectWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}
