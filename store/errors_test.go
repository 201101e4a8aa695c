package store

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/orchd/orchd/delegation"
)

// TestUnavailable_WhichErrorsMeanTheStoreIsAway: the errors Open and the
// writes retry, or answer with ErrUnavailable, against those that are the
// caller's or a lost compare-and-set. The API errors are as nats-server
// v2.15 sends them (server/jetstream_errors_generated.go).
func TestUnavailable_WhichErrorsMeanTheStoreIsAway(t *testing.T) {
	t.Parallel()
	api := func(code int, errCode jetstream.ErrorCode, desc string) error {
		return fmt.Errorf("create stream: %w", &jetstream.APIError{Code: code, ErrorCode: errCode, Description: desc})
	}
	canceled, cancel := context.WithCancel(t.Context())
	cancel()
	tests := []struct {
		name string
		ctx  context.Context
		err  error
		want bool
	}{
		{"no responders", t.Context(), nats.ErrNoResponders, true},
		{"timeout", t.Context(), nats.ErrTimeout, true},
		{"no quorum (503)", t.Context(), api(503, 10008, "JetStream system temporarily unavailable"), true},
		{"no peers for the replicas", t.Context(), api(400, errCodeNoPeers, "no suitable peers for placement, peer offline"), true},
		{"server out of room", t.Context(), api(503, errCodeInsufficientResources, "insufficient resources"), true},
		{"storage limit", t.Context(), api(400, errCodeStorageExceeded, "maximum bytes exceeded"), true},
		{"lost compare-and-set", t.Context(), api(503, errCodeSequenceMismatch, "wrong last sequence: 4"), false},
		{"bad request", t.Context(), api(400, 10058, "stream name already in use with a different configuration"), false},
		{"the caller gave up", canceled, context.Canceled, false},
	}
	for _, tt := range tests {
		got := errors.Is(unavailable(tt.ctx, tt.err), delegation.ErrUnavailable)
		if got != tt.want {
			t.Errorf("%s: unavailable(%v) is ErrUnavailable: %v, want %v", tt.name, tt.err, got, tt.want)
		}
	}
}
