// Command agents runs the demo fleet of A2A agents (package fleet) on this
// machine and registers them with a running orchd:
//
//	go run ./examples/agents [--orchd http://127.0.0.1:8080] [--port 9001]
//
// The agents listen on 127.0.0.1, from --port on (report, steerable,
// asker, legacy, plain). Each is registered through orchd's HTTP API
// (POST /v1/agents, with $ORCHD_TOKEN as a bearer token when it is set);
// when no orchd answers, the command prints how to register them instead.
// It runs until Ctrl-C. `orchd demo` runs the same fleet together with an
// orchd.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/orchd/orchd/examples/agents/fleet"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		stop()
		fmt.Fprintln(os.Stderr, "agents:", err)
		os.Exit(1)
	}
}

// run runs the fleet until ctx is done.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	flags := flag.NewFlagSet("agents", flag.ContinueOnError)
	flags.SetOutput(stderr)
	orchd := flags.String("orchd", "http://127.0.0.1:8080", "the orchd to register the agents with")
	port := flags.Int("port", 9001, "the first agent's port; the others take the next ones (0: free ports)")
	if err := flags.Parse(args); err != nil {
		return err
	}
	if flags.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q; see --help", flags.Arg(0))
	}
	log := slog.New(slog.NewTextHandler(stderr, nil))
	f, err := fleet.Start(ctx, fleet.Config{BasePort: *port, Log: log})
	if err != nil {
		return err
	}
	defer f.Close()
	c := &http.Client{Timeout: 30 * time.Second}
	unreachable := false
	for _, a := range f.Agents() {
		refreshed, err := register(ctx, c, *orchd, a)
		var reach *reachError
		switch {
		case errors.As(err, &reach):
			unreachable = true
		case err != nil:
			fmt.Fprintf(stdout, "%-10s %s: not registered: %v\n", a.ID, a.URL, err)
		case refreshed:
			fmt.Fprintf(stdout, "%-10s %s  skill %-8s already registered with %s; its card refreshed\n", a.ID, a.URL, a.Skill, *orchd)
		default:
			fmt.Fprintf(stdout, "%-10s %s  skill %-8s registered with %s\n", a.ID, a.URL, a.Skill, *orchd)
		}
	}
	if unreachable {
		printHowToRegister(stdout, *orchd, f.Agents())
	}
	fmt.Fprintln(stdout, "the agents run until Ctrl-C")
	<-ctx.Done()
	return nil
}

// reachError means no orchd answered at the address.
type reachError struct{ err error }

func (e *reachError) Error() string { return e.err.Error() }

// register adds the agent to orchd, or refreshes its card when orchd
// already has it under its id (from an earlier run: orchd keeps its
// agents); refreshed says it did that.
func register(ctx context.Context, c *http.Client, orchd string, a fleet.Agent) (refreshed bool, err error) {
	base := strings.TrimRight(orchd, "/")
	status, msg, _, err := post(ctx, c, base+"/v1/agents", map[string]string{"id": a.ID, "url": a.URL})
	if err != nil {
		return false, &reachError{err}
	}
	switch status {
	case http.StatusCreated:
		return false, nil
	case http.StatusConflict:
		// The id or the URL is taken: by this agent from an earlier run,
		// or by another.
		code, _, body, err := post(ctx, c, base+"/v1/agents/"+a.ID+":refresh", nil)
		if err != nil {
			return false, &reachError{err}
		}
		var profile struct {
			URL string `json:"url"`
		}
		if code == http.StatusOK && json.Unmarshal(body, &profile) == nil && profile.URL == a.URL {
			return true, nil
		}
		return false, fmt.Errorf("%s (HTTP %d); unregister the agent holding it with 'orchd agents remove ID'", msg, status)
	}
	return false, fmt.Errorf("%s (HTTP %d)", msg, status)
}

// post sends body as JSON and returns the answer's status, its error
// message if any, and its body.
func post(ctx context.Context, c *http.Client, url string, body any) (status int, msg string, answer []byte, err error) {
	var in io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, "", nil, err
		}
		in = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, in)
	if err != nil {
		return 0, "", nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	if token := os.Getenv("ORCHD_TOKEN"); token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, "", nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return 0, "", nil, err
	}
	var e struct {
		Error struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(b, &e) != nil || e.Error.Message == "" {
		e.Error.Message = strings.TrimSpace(string(b))
	}
	return resp.StatusCode, e.Error.Message, b, nil
}

// printHowToRegister tells how to register the agents with an orchd that
// is not running yet: through the API, or in its config file.
func printHowToRegister(w io.Writer, orchd string, agents []fleet.Agent) {
	fmt.Fprintf(w, "no orchd answers at %s; start one (go run ./cmd/orchd serve) and register the agents:\n\n", orchd)
	for _, a := range agents {
		fmt.Fprintf(w, "  curl -s -X POST %s/v1/agents -H 'Content-Type: application/json' -d '{\"id\": %q, \"url\": %q}'\n", strings.TrimRight(orchd, "/"), a.ID, a.URL)
	}
	fmt.Fprintln(w, "\nor list them in its config file (orchd serve --config orchd.yaml):")
	fmt.Fprintln(w, "\n  agents:")
	for _, a := range agents {
		fmt.Fprintf(w, "    - {id: %s, url: %q}\n", a.ID, a.URL)
	}
	fmt.Fprintln(w)
}
