package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/spf13/cobra"
)

// defaultHealthURL is what healthcheck asks when given no URL: the
// readiness of a daemon on the default listen address.
const defaultHealthURL = defaultServer + "/readyz"

// maxHealthBody bounds the part of an answer healthcheck reads and shows.
const maxHealthBody = 4 << 10

// newHealthcheckCmd is a probe for container health checks and service
// managers, where no curl is at hand (the container image has nothing but
// orchd): it asks a daemon's /readyz (or another URL) and exits 0 when the
// answer is 2xx, 1 otherwise. It is hidden: people read /readyz directly.
func newHealthcheckCmd() *cobra.Command {
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "healthcheck [URL]",
		Short: "Exit 0 when the daemon at URL answers ready",
		Long: `Ask a running daemon whether it is ready (GET URL, default ` + defaultHealthURL + `)
and exit 0 when it answers 2xx, 1 when it answers anything else or cannot be
reached. The answer's body is printed when it is not 2xx. For container health
checks, where the image holds no other program.`,
		Example: `  orchd healthcheck
  orchd healthcheck http://127.0.0.1:9090/readyz --timeout 2s`,
		Hidden: true,
		Args:   cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			url := defaultHealthURL
			if len(args) == 1 {
				url = args[0]
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			return probe(ctx, url)
		},
	}
	cmd.Flags().DurationVar(&timeout, "timeout", 5*time.Second, "how long to wait for the answer")
	return cmd
}

// probe returns nil when url answers 2xx, else an error saying what it
// answered, or why it could not be asked.
func probe(ctx context.Context, url string) error {
	// Checked as --server is; an exit 1, not a usage error's 2, which
	// container health checks reserve.
	var u serverURL
	if err := u.Set(url); err != nil {
		return fmt.Errorf("health URL %q: want %w", url, err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return fmt.Errorf("health URL %q: %w", url, err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("%s did not answer in time", url)
		}
		return fmt.Errorf("reach %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 == 2 {
		return nil
	}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, maxHealthBody))
	return fmt.Errorf("%s answered %s: %s", url, resp.Status, strings.TrimSpace(string(b)))
}
