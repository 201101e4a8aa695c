package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/orchd/orchd/httpapi"
)

// apiClient calls a running daemon's HTTP API.
type apiClient struct {
	base string
	hc   *http.Client
	// token is sent as a bearer token when the daemon authenticates its
	// callers: ORCHD_TOKEN, read from the environment rather than a flag
	// so it does not show in the process list.
	token string
	// timeout bounds each call (do); callTimeout unless a test sets it.
	timeout time.Duration
}

// tokenEnv names the environment variable holding the bearer token the
// client commands send.
const tokenEnv = "ORCHD_TOKEN"

// callTimeout bounds one call to the daemon, answer read included, so a
// daemon that takes the connection and never answers does not hang the
// command. It is well above the daemon's own bounds on what it does for a
// call (delegation.callTimeout, 30 s by default, for an agent to accept).
// Following a delegation's events is not a call: it lasts as the work
// does.
const callTimeout = 2 * time.Minute

// newAPIClient returns a client of the daemon at base, authenticating
// with $ORCHD_TOKEN when it is set.
func newAPIClient(base string) *apiClient {
	return &apiClient{base: base, hc: &http.Client{}, token: os.Getenv(tokenEnv), timeout: callTimeout}
}

// authorize adds the client's credentials to req.
func (c *apiClient) authorize(req *http.Request) {
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
}

// apiError is an error answer from the daemon.
type apiError struct {
	status int
	body   httpapi.ErrorBody
}

// newAPIError reads an error answer: the API's error body, or, from
// something else in front of the daemon (a proxy), the body's text.
func newAPIError(status int, body []byte) *apiError {
	e := &apiError{status: status}
	if json.Unmarshal(body, &e.body) != nil || e.body.Error.Message == "" {
		e.body.Error.Message = strings.TrimSpace(string(body))
	}
	return e
}

func (e *apiError) Error() string {
	msg := fmt.Sprintf("%s (HTTP %d)", e.body.Error.Message, e.status)
	if e.status == http.StatusUnauthorized {
		msg += "; set " + tokenEnv + " to a token the daemon accepts"
	}
	return msg
}

// do sends a JSON request and decodes a JSON answer into out.
func (c *apiClient) do(ctx context.Context, method, path string, in, out any) error {
	ctx, cancel := context.WithTimeoutCause(ctx, c.timeout, fmt.Errorf("orchd at %s did not answer within %s", c.base, c.timeout))
	defer cancel()
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimRight(c.base, "/")+path, body)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	c.authorize(req)
	resp, err := c.hc.Do(req)
	if err != nil {
		if cause := context.Cause(ctx); cause != nil && ctx.Err() == context.DeadlineExceeded {
			return cause
		}
		return fmt.Errorf("reach orchd at %s: %w", c.base, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode >= 300 {
		return newAPIError(resp.StatusCode, b)
	}
	if out != nil {
		return json.Unmarshal(b, out)
	}
	return nil
}
