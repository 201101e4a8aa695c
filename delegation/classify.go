package delegation

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"syscall"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/orchd/orchd/credentials"
	"github.com/orchd/orchd/registry"
)

// What an agent's error means to orchd.
//
// A call to an agent fails for reasons orchd answers differently: the next
// candidate is tried when an agent fails before accepting work
// (retryable), a failure counts against the agent's circuit breaker only
// when it is the agent's doing (agentFault), and input an agent refused as
// its execution was still ending is sent again (executionStillEnding).
// Errors are told apart by what they wrap wherever their source wraps
// something: a2a-go's A2A errors, syscall errors, net.Error, orchd's own
// sentinels. A few reach orchd as text alone; the constants below are the
// only words matched, each with where it comes from (a2a-go v2.4.0), and
// classify_test.go makes each error the way its source does.

// Error texts orchd matches, as their sources write them.
const (
	// httpStatusText begins the error of an a2a-go JSON-RPC call the agent
	// answered with an HTTP status other than 200, followed by the status
	// ("503 Service Unavailable"): a2aclient/jsonrpc.go:125,157 (A2A 1.0)
	// and a2acompat/a2av0/jsonrpc_client.go:124,155 (0.3) write
	// fmt.Errorf("unexpected HTTP status: %s", resp.Status), and orchd's
	// own reader of JSON-RPC streams writes it so too (jsonrpcstream.go).
	// The HTTP+JSON transports turn a status into an A2A error instead.
	httpStatusText = "unexpected HTTP status: "
	// noTransportText is the error of a2aclient.NewFromCard for a card
	// offering no transport the client speaks (a2aclient/factory.go:213,
	// "no compatible transports found: available transports - […]").
	noTransportText = "no compatible transports"
	// executionEnding is what an a2a-go agent answers, as an internal
	// error, to a message for a task that has an execution still running
	// (internal/taskexec/local_manager.go:37, ErrExecutionInProgress,
	// whose text the agent's handler passes on): among others, an
	// execution that has said it waits for input but is still ending, as
	// its push notification, and a read of the task, can come before the
	// execution is gone.
	executionEnding = "task execution is already in progress"
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
		errors.Is(err, ErrContained) ||
		errors.Is(err, a2a.ErrInternalError) ||
		errors.Is(err, a2a.ErrServerError) ||
		unreachable(err) ||
		strings.Contains(err.Error(), noTransportText)
}

// agentFault reports whether a failed call counts against the agent's
// health: the agent could not be reached, the connection broke, it did not
// answer within the call's own timeout, or it answered with an HTTP 5xx
// status or an A2A internal or server error. What the caller caused does
// not count: its context ended, the chain's deadline passed (ErrDeadline),
// an HTTP 4xx status, or any other A2A error (TaskNotFound, InvalidParams,
// …), which says the agent is there and answering. Neither does a refusal
// of orchd's credentials (401, 403), a credential orchd could not get, nor
// a connection orchd could not open for want of file descriptors.
func agentFault(ctx context.Context, err error) bool {
	if ctx.Err() != nil || errors.Is(err, context.Canceled) || errors.Is(err, ErrDeadline) {
		return false // the caller gave up, or the chain's deadline passed
	}
	if outOfFiles(err) {
		return false // orchd had no file descriptor to reach the agent with
	}
	if errors.Is(err, a2a.ErrUnauthenticated) || errors.Is(err, a2a.ErrUnauthorized) || errors.Is(err, credentials.ErrUnavailable) {
		return false // the agent answered; orchd's credentials are at fault
	}
	switch {
	case errors.Is(err, a2a.ErrInternalError), errors.Is(err, a2a.ErrServerError):
		return true
	case errors.As(err, new(*a2a.Error)):
		return false // any other answer in A2A terms
	}
	return errors.Is(err, context.DeadlineExceeded) || unreachable(err)
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
		strings.Contains(err.Error(), httpStatusText+"5")
}

// executionStillEnding reports whether err is an agent refusing a message
// for a task because an execution of the task still runs (executionEnding):
// the agent did not take the message.
func executionStillEnding(err error) bool {
	return errors.Is(err, a2a.ErrInternalError) && strings.Contains(err.Error(), executionEnding)
}

// outOfFiles reports whether a call failed because this process, or the
// system, had no file descriptor left for its connection (EMFILE,
// ENFILE): no agent can be reached then, and none is at fault.
func outOfFiles(err error) bool {
	return errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE)
}
