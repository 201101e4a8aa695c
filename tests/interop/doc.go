// Package interop checks orchd against agents and clients built with the
// official A2A SDKs: the Python a2a-sdk and the JavaScript @a2a-js/sdk (a
// release speaking A2A 1.0 and one speaking A2A 0.3); and its MCP endpoint
// against the client of the official MCP Python SDK (mcp), alone and with
// the Tasks extension's client of fastmcp-tasks.
//
// The package holds tests only. Each test starts small SDK agents on
// 127.0.0.1 (see peers/), runs a real orchd in front of them and checks card
// discovery, version decisions, delegation, input-required round trips,
// cancel propagation and steering; the client tests run the SDKs' clients
// against orchd's own A2A endpoints, and the MCP client drives orchd's
// tools at /mcp and, declaring the Tasks extension, its tasks. The peers' pinned packages are installed by
// peers/*/install.sh. A test skips with a message when python3 or node is
// missing, unless ORCHD_INTEROP=require is set, when it fails.
// See docs/interop.md for the incompatibilities found.
package interop
