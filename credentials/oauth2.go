package credentials

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"
)

// maxRefreshMargin is how long before its expiry, at most, a cached token
// is replaced; a token that lives less than four times as long is
// replaced when three quarters of its life have passed.
const maxRefreshMargin = 30 * time.Second

// tokenSource gets OAuth 2.0 client-credentials tokens for one agent and
// set of scopes, and caches the current one until shortly before it
// expires. Concurrent calls wait for one fetch. The client secret is read
// at each fetch, so a rotated secret is used from the next token on.
type tokenSource struct {
	agent    string
	clientID string
	tokenURL string
	scopes   []string
	secret   *source
	client   *http.Client // for the token endpoint; no redirects
	timeout  time.Duration
	now      func() time.Time
	log      *slog.Logger

	mu        sync.Mutex
	tok       sealed
	refreshAt time.Time // zero: the token did not say when it expires
}

// Format names the source and never shows its token: fmt prints
// unexported fields without their methods.
func (ts *tokenSource) Format(f fmt.State, _ rune) {
	_, _ = io.WriteString(f, "oauth2 token source for agent "+ts.agent)
}

// token returns a valid token, fetching one when none is cached or the
// cached one is due for renewal.
func (ts *tokenSource) token(ctx context.Context) (secret, error) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	now := ts.now()
	if tok := ts.tok.get(); tok != "" && (ts.refreshAt.IsZero() || now.Before(ts.refreshAt)) {
		return tok, nil
	}
	tok, err := ts.fetch(ctx)
	if err != nil {
		return "", err
	}
	ts.tok, ts.refreshAt = seal(tok.value), time.Time{}
	if tok.lifetime > 0 {
		ts.refreshAt = now.Add(tok.lifetime - min(maxRefreshMargin, tok.lifetime/4))
	} else if tok.expires {
		ts.refreshAt = now // already expired: used once, then fetched again
	}
	return tok.value, nil
}

// invalidate drops used, a token the agent refused, and reports whether a
// retry may carry another: a fresh fetch, or a token another call fetched
// meanwhile.
func (ts *tokenSource) invalidate(used secret) bool {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if ts.tok.get() == used {
		ts.tok = sealed{}
	}
	return true
}

// fetched is a token from the endpoint, with its lifetime as it said.
type fetched struct {
	value    secret
	lifetime time.Duration
	expires  bool
}

// fetch asks the token endpoint for a token, within the source's timeout
// and whatever the caller's context does meanwhile (other calls wait for
// the same fetch).
func (ts *tokenSource) fetch(ctx context.Context) (fetched, error) {
	clientSecret, err := ts.secret.get()
	if err != nil {
		return fetched{}, err
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ts.timeout)
	defer cancel()
	ctx = context.WithValue(ctx, oauth2.HTTPClient, ts.client)
	cc := clientcredentials.Config{
		ClientID: ts.clientID, ClientSecret: string(clientSecret), TokenURL: ts.tokenURL,
		Scopes: ts.scopes, AuthStyle: oauth2.AuthStyleInHeader,
	}
	start := time.Now()
	tok, err := cc.Token(ctx)
	if err != nil {
		return fetched{}, ts.fetchError(err, clientSecret)
	}
	v, err := checkSecret("oauth2 access token", secret(tok.AccessToken))
	if err != nil {
		return fetched{}, fmt.Errorf("token endpoint %s: %w", ts.tokenURL, err)
	}
	if len(v) > maxSecretBytes {
		return fetched{}, fmt.Errorf("token endpoint %s: access token of %d bytes, more than the limit of %d", ts.tokenURL, len(v), maxSecretBytes)
	}
	if t := tok.Type(); !strings.EqualFold(t, "bearer") {
		return fetched{}, fmt.Errorf("token endpoint %s: token type %q, want Bearer", ts.tokenURL, t)
	}
	f := fetched{value: v}
	if !tok.Expiry.IsZero() {
		// oauth2 dates the expiry by the wall clock at the answer.
		f.expires, f.lifetime = true, tok.Expiry.Sub(start)
	}
	ts.log.Debug("oauth2 token fetched", "agent", ts.agent, "tokenURL", ts.tokenURL, "scopes", ts.scopes, "expiresIn", f.lifetime)
	return f, nil
}

// fetchError says why a fetch failed without the client secret or the
// endpoint's answer body, which may echo the request.
func (ts *tokenSource) fetchError(err error, clientSecret secret) error {
	if re, ok := errors.AsType[*oauth2.RetrieveError](err); ok && re.Response != nil {
		msg := fmt.Sprintf("token endpoint %s answered %s", ts.tokenURL, re.Response.Status)
		if re.ErrorCode != "" {
			msg += " (" + scrub(re.ErrorCode, clientSecret) + ")"
		}
		return errors.New(msg)
	}
	return fmt.Errorf("token endpoint %s: %s", ts.tokenURL, scrub(err.Error(), clientSecret))
}
