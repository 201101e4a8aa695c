package delegation

import "net/http"

// Transports wrapped around an agent's HTTP client (Engine.client): each
// changes one thing of the requests or answers, and passes the rest on.

// withTransport returns a copy of hc whose transport is wrap applied to
// hc's, or to http.DefaultTransport when hc sets none.
func withTransport(hc *http.Client, wrap func(http.RoundTripper) http.RoundTripper) *http.Client {
	c := *hc
	rt := hc.Transport
	if rt == nil {
		rt = http.DefaultTransport
	}
	c.Transport = wrap(rt)
	return &c
}

// closeIdle closes the idle connections of rt, a transport under a
// wrapping one, as http.Client.CloseIdleConnections expects of the
// wrapping one.
func closeIdle(rt http.RoundTripper) {
	if c, ok := rt.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}
