package mcpserver

import (
	"net/http"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
)

// Protected-resource metadata (RFC 9728).
//
// An MCP client refused with 401 looks for where to get a token in the
// endpoint's protected-resource metadata. The MCP authorization spec
// (2025-06-18 and later) has it try, in order, the URL the challenge's
// resource_metadata names, the endpoint's well-known URL (RFC 9728 §3.1:
// /.well-known/oauth-protected-resource/mcp), and the well-known URL of
// the server's root (/.well-known/oauth-protected-resource). orchd serves
// the last two, and its refusals at /mcp name the first
// (Resource.Challenge, through httpgate.Gate.WrapChallenging). Each
// document's resource is the URL its well-known URL was made from, as
// clients check (RFC 9728 §3.3): the endpoint's for the first, orchd's
// base URL for the root's.

// Well-known paths of the metadata.
const (
	// MetadataRootPath is the metadata of orchd as a whole, the last
	// place MCP clients look.
	MetadataRootPath = "/.well-known/oauth-protected-resource"
	// MetadataPath is the endpoint's own metadata, RFC 9728's well-known
	// URL of the resource at Path.
	MetadataPath = MetadataRootPath + Path
)

// Resource describes the MCP endpoint as an OAuth protected resource.
type Resource struct {
	// Base is the URL callers reach orchd at (agent.url); empty means
	// the scheme and host of each request.
	Base string
	// Name is orchd's name for people (agent.name).
	Name string
	// Issuers are the authorization servers whose tokens orchd takes
	// (auth.jwt.issuer); none when it takes no JWTs.
	Issuers []string
	// Bearer is set when orchd takes bearer tokens (auth.tokens,
	// auth.tokensFile, auth.jwt) in the Authorization header.
	Bearer bool
}

// base is the URL the caller of r reaches orchd at, without a trailing
// slash.
func (res Resource) base(r *http.Request) string {
	if res.Base != "" {
		return strings.TrimSuffix(res.Base, "/")
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}

// MetadataURL is the URL of the endpoint's metadata for the caller of r:
// under the base URL, so that it reaches orchd through a proxy that
// serves it under a path too.
func (res Resource) MetadataURL(r *http.Request) string { return res.base(r) + MetadataPath }

// Challenge is the auth-param that sends the caller of r to the
// endpoint's metadata, for the Bearer challenge of a refusal at Path.
func (res Resource) Challenge(r *http.Request) string {
	return `resource_metadata="` + quotedPair.Replace(res.MetadataURL(r)) + `"`
}

// quotedPair escapes what a quoted-string cannot hold as it is (RFC 9110
// §5.6.4).
var quotedPair = strings.NewReplacer(`\`, `\\`, `"`, `\"`)

// Handler serves the metadata at MetadataPath and MetadataRootPath:
// public, to any origin (go-sdk's auth.ProtectedResourceMetadataHandler).
func (res Resource) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		resource := res.base(r)
		if r.URL.Path == MetadataPath {
			resource += Path
		}
		md := &oauthex.ProtectedResourceMetadata{Resource: resource, AuthorizationServers: res.Issuers, ResourceName: res.Name}
		if res.Bearer {
			md.BearerMethodsSupported = []string{"header"}
		}
		auth.ProtectedResourceMetadataHandler(md).ServeHTTP(w, r)
	})
}
