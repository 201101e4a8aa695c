package delegation

import (
	"errors"
	"io"
	"net"
	"strings"
	"syscall"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/orchd/orchd/credentials"
	"github.com/orchd/orchd/registry"
)

// retryable reports whether an agent's failure to accept work warrants
// trying the next candidate: it could not be reached, failed on the server
// side, its breaker is open, it does not speak the version the client
// chose, it refused orchd's credentials, or orchd could not get them.
func retryable(err error) bool {
	if errors.Is(err, ErrAnswerTooLarge) {
		return false // the agent answered: too much, and the next would too
	}
	return errors.Is(err, a2a.ErrVersionNotSupported) ||
		errors.Is(err, a2a.ErrUnauthenticated) || errors.Is(err, a2a.ErrUnauthorized) ||
		errors.Is(err, credentials.ErrUnavailable) ||
		errors.Is(err, registry.ErrBreakerOpen) ||
		errors.Is(err, a2a.ErrInternalError) ||
		errors.Is(err, a2a.ErrServerError) ||
		unreachable(err) ||
		strings.Contains(err.Error(), "no compatible transports")
}

// unreachable reports whether err says the agent could not be reached or
// did not answer: the connection was refused or broke, the network or a
// timeout failed the call, or it answered with an HTTP 5xx status.
func unreachable(err error) bool {
	if errors.Is(err, ErrAnswerTooLarge) {
		return false // it answered, too much (a *url.Error wraps it)
	}
	var netErr net.Error
	return errors.Is(err, syscall.ECONNREFUSED) ||
		errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.As(err, &netErr) || // a context.DeadlineExceeded is one
		strings.Contains(err.Error(), "unexpected HTTP status: 5")
}
