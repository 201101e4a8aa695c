package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	a2agrpc "github.com/a2aproject/a2a-go/v2/a2agrpc/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// hostileBench names the hostile-clients run's results.
const hostileBench = "BenchmarkProcessHostile"

// hostileConfig is the shape of the hostile-clients run.
type hostileConfig struct {
	clients   int   // at once, in each phase
	httpBytes int64 // each HTTP body
	grpcBytes int   // each gRPC message's text
}

// fullHostile is the report's run: 300 clients, each body just under
// http.maxBodyBytes (8 MiB), each gRPC message half of that.
var fullHostile = hostileConfig{clients: 300, httpBytes: 8<<20 - 1<<10, grpcBytes: 4 << 20}

// hostileToken is the one caller's token of the run's orchd.
const hostileToken = "bench-caller-0123456789"

// runHostile is the report's hostile-clients run.
func runHostile(ctx context.Context, w io.Writer, log *slog.Logger) error {
	return hostileRun(ctx, w, log, fullHostile)
}

// hostileRun runs an orchd with authentication (one static token) serving
// gRPC too, and sends it cfg.clients requests at once, each body as large
// as the limits let through, in three phases:
//
//   - unauthenticated-http: without credentials, to the A2A JSON-RPC
//     endpoint, each body streamed as it is sent;
//   - unauthenticated-grpc: without credentials, SendMessage over gRPC;
//   - authenticated-http: with the token, each a SendMessage whose text
//     fills the body, for a skill no agent has, so orchd reads and decodes
//     every body, within http.maxBufferedBodyBytes, and refuses it: the
//     message, too large for a task, or the work.
//
// It writes one line per phase:
//
//	BenchmarkProcessHostile/<phase> <clients> <MiB> peak-rss-MiB <MiB> rss-before-MiB <ms> wall-ms <n> refused <n> busy <n> errors <MiB> body-MiB <clients> clients
//
// Peak RSS is orchd's VmHWM, reset before the phase; refused counts the
// A2A errors answered (unauthenticated, or, for the authenticated, the
// refusal of the work), busy those refused for want of body budget,
// errors the requests that got no answer.
func hostileRun(ctx context.Context, w io.Writer, log *slog.Logger, cfg hostileConfig) error {
	h, err := newHarness(ctx, log)
	if err != nil {
		return err
	}
	defer h.close()
	grpcAddr, err := freeAddr()
	if err != nil {
		return err
	}
	extra := fmt.Sprintf("auth:\n  tokens:\n    - {token: %s, principal: bench}\n", hostileToken)
	d, base, err := h.daemon(ctx, orchdSpec{name: "orchd", extra: extra, token: hostileToken, grpc: grpcAddr})
	if err != nil {
		return err
	}
	tr := &http.Transport{MaxIdleConnsPerHost: cfg.clients, DisableCompression: true}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr, Timeout: 2 * time.Minute}
	phases := []struct {
		name string
		call func(ctx context.Context) hostileOutcome
	}{
		{"unauthenticated-http", func(ctx context.Context) hostileOutcome {
			return hostilePost(ctx, hc, base+"/a2a/jsonrpc", "", cfg.httpBytes)
		}},
		{"unauthenticated-grpc", func(ctx context.Context) hostileOutcome {
			return hostileGRPC(ctx, grpcAddr, cfg.grpcBytes)
		}},
		{"authenticated-http", func(ctx context.Context) hostileOutcome {
			return hostilePost(ctx, hc, base+"/a2a/jsonrpc", hostileToken, cfg.httpBytes)
		}},
	}
	for _, p := range phases {
		tr.CloseIdleConnections()
		before, err := readStatus(d.pid())
		if err != nil {
			return err
		}
		if err := resetPeak(d.pid()); err != nil {
			return err
		}
		start := time.Now()
		var mu sync.Mutex
		var total hostileOutcome
		var wg sync.WaitGroup
		for range cfg.clients {
			wg.Go(func() {
				o := p.call(ctx)
				mu.Lock()
				total.refused += o.refused
				total.busy += o.busy
				total.errors += o.errors
				if total.first == "" {
					total.first = o.first
				}
				if total.why == "" {
					total.why = o.why
				}
				mu.Unlock()
			})
		}
		wg.Wait()
		wall := time.Since(start)
		st, err := readStatus(d.pid())
		if err != nil {
			return err
		}
		if total.first != "" {
			log.Warn("hostile run: answers other than a refusal", "phase", p.name, "first", total.first)
		}
		if total.why != "" {
			log.Info("hostile run: refused after reading the body", "phase", p.name, "first", total.why)
		}
		size := float64(cfg.httpBytes)
		if strings.HasSuffix(p.name, "grpc") {
			size = float64(cfg.grpcBytes)
		}
		fmt.Fprintf(w, "%s/%s\t%d\t%.1f peak-rss-MiB\t%.1f rss-before-MiB\t%.0f wall-ms\t%d refused\t%d busy\t%d errors\t%.1f body-MiB\t%d clients\n",
			hostileBench, p.name, cfg.clients, mib(st.hwmKiB), mib(before.rssKiB), ms(wall), total.refused, total.busy, total.errors, size/(1<<20), cfg.clients)
	}
	warns, errs, _ := d.logCounts()
	fmt.Fprintf(w, "%s/logs/orchd\t1\t%d warn-lines\t%d error-lines\n", hostileBench, warns, errs)
	return nil
}

// hostileOutcome counts how hostile requests were answered.
type hostileOutcome struct {
	refused, busy, errors int
	first                 string // the first answer that was none of these
	why                   string // the first refusal after the body was read
}

// hostileBody is a JSON-RPC SendMessage request of exactly n bytes, its
// text all x: streamed, never held whole.
func hostileBody(n int64) io.Reader {
	head := `{"jsonrpc":"2.0","id":"h1","method":"SendMessage","params":{"message":{"messageId":"m1","role":"ROLE_USER","parts":[{"text":"`
	tail := `"}],"metadata":{"skill":"nobody-has-this"}}}}`
	fill := n - int64(len(head)+len(tail))
	return io.MultiReader(strings.NewReader(head), io.LimitReader(xs{}, fill), strings.NewReader(tail))
}

// xs reads as x forever.
type xs struct{}

func (xs) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = 'x'
	}
	return len(p), nil
}

// hostilePost POSTs a body of n bytes to url, with token as the bearer
// token when it is set, and reads the answer.
func hostilePost(ctx context.Context, hc *http.Client, url, token string, n int64) hostileOutcome {
	req, err := http.NewRequestWithContext(ctx, "POST", url, hostileBody(n))
	if err != nil {
		return hostileOutcome{errors: 1, first: err.Error()}
	}
	req.ContentLength = n
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("A2A-Version", "1.0")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return hostileOutcome{errors: 1, first: err.Error()}
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 16<<20)) // a task answered holds the message
	switch {
	case bytes.Contains(b, []byte(`"code":-32000`)):
		return hostileOutcome{busy: 1}
	case bytes.Contains(b, []byte(`"code":-31401`)):
		return hostileOutcome{refused: 1}
	case bytes.Contains(b, []byte(`"error":`)) || bytes.Contains(b, []byte("TASK_STATE_REJECTED")):
		// Read and refused: the message, or the work (no agent has its
		// skill).
		return hostileOutcome{refused: 1, why: fmt.Sprintf("%.300s", b)}
	}
	return hostileOutcome{errors: 1, first: fmt.Sprintf("HTTP %d: %.200s", resp.StatusCode, b)}
}

// hostileGRPC sends, without credentials, a SendMessage of n bytes of
// text over gRPC 1.0 to orchd at addr.
func hostileGRPC(ctx context.Context, addr string, n int) hostileOutcome {
	c, err := a2aclient.NewFromEndpoints(ctx, []*a2a.AgentInterface{a2a.NewAgentInterface(addr, a2a.TransportProtocolGRPC)},
		a2aclient.WithDefaultsDisabled(), a2agrpc.WithGRPCTransport(grpc.WithTransportCredentials(insecure.NewCredentials())))
	if err != nil {
		return hostileOutcome{errors: 1, first: err.Error()}
	}
	defer func() { _ = c.Destroy() }()
	msg := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart(strings.Repeat("x", n)))
	_, err = c.SendMessage(ctx, &a2a.SendMessageRequest{Message: msg})
	if errors.Is(err, a2a.ErrUnauthenticated) {
		return hostileOutcome{refused: 1}
	}
	return hostileOutcome{errors: 1, first: fmt.Sprint(err)}
}
