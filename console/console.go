package console

import (
	"bytes"
	"context"
	"crypto/rand"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"strings"
)

//go:embed templates/*.html
var templateFiles embed.FS

//go:embed static
var staticFiles embed.FS

// CookieName is the cookie the login form keeps a bearer token in. The
// cookie only carries the credential the Authorization header would; the
// daemon reads it for the console's routes alone.
const CookieName = "orchd_console_token"

// maxForm bounds the body of every form the console takes.
const maxForm = 64 << 10

// Config is what a console is built from.
type Config struct {
	// Source reads and acts for each request's caller. Required.
	Source Source
	// Classify maps an error from Source to an HTTP status and a short
	// code, as the API answers it. Required.
	Classify func(error) (int, string)
	// Events serves the server-sent events of the delegation named by the
	// request's path value "id", resuming after Last-Event-ID or ?after.
	// Required.
	Events http.Handler
	// Login checks a bearer token typed into the login form; nil when the
	// daemon configures no authentication (the form then says none is
	// needed).
	Login func(ctx context.Context, token string) error
	// Name is the daemon's display name, shown in every page's header.
	Name string
	// Log receives the console's own failures; nil discards them.
	Log *slog.Logger
	// CrossOrigin refuses state-changing requests from other origins
	// (403). nil means http.NewCrossOriginProtection(), which takes a
	// request's Origin for the console's own when it names the request's
	// Host; a daemon that knows its own origins passes those in.
	CrossOrigin *http.CrossOriginProtection
}

// Console serves the web console's pages. Build it with New.
type Console struct {
	cfg   Config
	pages map[string]*template.Template
	log   *slog.Logger
	h     http.Handler
	// flashKey signs the outcomes the tree page shows after a form post
	// (flashSig); drawn at New, so each console knows only its own.
	flashKey []byte
}

// New parses the console's templates and returns a console serving cfg.
func New(cfg Config) (*Console, error) {
	if cfg.Source == nil || cfg.Classify == nil || cfg.Events == nil {
		return nil, errors.New("console: Source, Classify and Events are required")
	}
	c := &Console{cfg: cfg, pages: map[string]*template.Template{}, log: cfg.Log, flashKey: make([]byte, 32)}
	_, _ = rand.Read(c.flashKey) // never fails: crypto/rand crashes the program instead
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	names, err := fs.Glob(templateFiles, "templates/*.html")
	if err != nil {
		return nil, fmt.Errorf("console: %w", err)
	}
	for _, n := range names {
		page := strings.TrimSuffix(strings.TrimPrefix(n, "templates/"), ".html")
		if page == "layout" {
			continue
		}
		t, err := template.New("layout.html").Funcs(funcs).ParseFS(templateFiles, "templates/layout.html", n)
		if err != nil {
			return nil, fmt.Errorf("console: template %s: %w", page, err)
		}
		c.pages[page] = t
	}
	static, err := fs.Sub(staticFiles, "static")
	if err != nil {
		return nil, fmt.Errorf("console: %w", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /ui/{$}", c.delegations)
	mux.HandleFunc("GET /ui/agents", c.agents)
	mux.HandleFunc("GET /ui/agents/{id}", c.agent)
	mux.HandleFunc("GET /ui/delegations", c.delegations)
	mux.HandleFunc("GET /ui/delegations/{id}", c.tree)
	mux.Handle("GET /ui/delegations/{id}/events", cfg.Events)
	mux.HandleFunc("POST /ui/delegations/{id}/{action}", c.control)
	mux.HandleFunc("GET /ui/policies", c.policies)
	mux.HandleFunc("POST /ui/policies", c.evaluate)
	mux.HandleFunc("GET /ui/login", c.loginPage)
	mux.HandleFunc("POST /ui/login", c.login)
	mux.HandleFunc("POST /ui/logout", c.logout)
	mux.Handle("GET /ui/static/", http.StripPrefix("/ui/static/", staticHandler(static)))
	mux.HandleFunc("/ui/", func(w http.ResponseWriter, r *http.Request) {
		c.fail(w, r, http.StatusNotFound, "no such page: "+r.Method+" "+r.URL.Path)
	})
	// State-changing requests from another origin are refused (403)
	// before any handler runs: browsers say where a request comes from
	// (Sec-Fetch-Site, Origin), and a form posted from another site is
	// not the operator's.
	cop := cfg.CrossOrigin
	if cop == nil {
		cop = http.NewCrossOriginProtection()
	}
	c.h = cop.Handler(mux)
	return c, nil
}

// ServeHTTP serves the console's routes, all under /ui/.
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) { c.h.ServeHTTP(w, r) }

// Token returns the bearer token the login form keeps in r's cookie.
func Token(r *http.Request) (string, bool) {
	ck, err := r.Cookie(CookieName)
	if err != nil || ck.Value == "" {
		return "", false
	}
	return ck.Value, true
}

// staticHandler serves the embedded CSS and script, cached for a while:
// they change only with the binary.
func staticHandler(static fs.FS) http.Handler {
	files := http.FileServerFS(static)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "public, max-age=3600")
		files.ServeHTTP(w, r)
	})
}

// page is what every template gets: the page's own data and the layout's.
type page struct {
	Title string
	// Nav names the section the page is in, for aria-current.
	Nav  string
	Name string
	// Login is true when the daemon authenticates callers, so the layout
	// offers to log out.
	Login bool
	Data  any
}

// render writes the named page with status.
func (c *Console) render(w http.ResponseWriter, r *http.Request, status int, name, title, nav string, data any) {
	t, ok := c.pages[name]
	if !ok {
		c.log.Error("console: no such template", "page", name)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	var b bytes.Buffer
	if err := t.Execute(&b, page{Title: title, Nav: nav, Name: c.cfg.Name, Login: c.cfg.Login != nil, Data: data}); err != nil {
		c.log.Error("console: render", "page", name, "error", err)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "same-origin")
	h.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'; form-action 'self'; base-uri 'none'")
	w.WriteHeader(status)
	_, _ = w.Write(b.Bytes())
}

// fail answers with an error page.
func (c *Console) fail(w http.ResponseWriter, r *http.Request, status int, msg string) {
	c.render(w, r, status, "error", http.StatusText(status), "", errorView{Status: status, Message: msg})
}

// readForm reads the form r posts, bounded by maxForm. It answers a form
// it cannot read (413 when it is too large, else 400) and returns false.
func (c *Console) readForm(w http.ResponseWriter, r *http.Request) bool {
	r.Body = http.MaxBytesReader(w, r.Body, maxForm)
	err := r.ParseForm()
	if err == nil {
		return true
	}
	if mb := (*http.MaxBytesError)(nil); errors.As(err, &mb) {
		c.fail(w, r, http.StatusRequestEntityTooLarge, fmt.Sprintf("the form is over the console's limit of %d KiB", maxForm>>10))
	} else {
		c.fail(w, r, http.StatusBadRequest, "the form could not be read: "+err.Error())
	}
	return false
}

// failErr answers with the error page for an error from the Source.
func (c *Console) failErr(w http.ResponseWriter, r *http.Request, err error) {
	status, _ := c.cfg.Classify(err)
	if status >= 500 {
		c.log.WarnContext(r.Context(), "console: request failed", "path", r.URL.Path, "status", status, "error", err)
	}
	c.fail(w, r, status, err.Error())
}

type errorView struct {
	Status  int
	Message string
}
