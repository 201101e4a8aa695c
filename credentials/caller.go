package credentials

import "context"

// callerKey carries the caller's token in a context.
type callerKey struct{}

// WithCallerToken returns ctx carrying token, the bearer token orchd's own
// caller authenticated with, so calls made for that caller can forward it
// to agents whose Config sets ForwardCaller (and to no other). The server
// side that authenticated the caller sets it; an empty token sets nothing.
func WithCallerToken(ctx context.Context, token string) context.Context {
	if token == "" {
		return ctx
	}
	return context.WithValue(ctx, callerKey{}, secret(token))
}

// callerToken returns the caller's token ctx carries.
func callerToken(ctx context.Context) (secret, bool) {
	s, ok := ctx.Value(callerKey{}).(secret)
	return s, ok && s != ""
}
