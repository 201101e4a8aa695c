// Package mcpserver is orchd's MCP front: MCP clients (IDE and desktop
// assistants, agent frameworks) delegate work to A2A agents, follow it,
// answer the agents' questions and steer it, at /mcp over Streamable
// HTTP (github.com/modelcontextprotocol/go-sdk).
//
// A request goes
//
//	httpgate.Gate (who is calling)
//	  → Server.Handler: body limits, the caller handed to the SDK (caller.go)
//	  → go-sdk's Streamable HTTP handler (sessions for older clients, none for 2026-07-28;
//	    a session serves only the caller that opened it, session.go)
//	  → the receiving middleware: the caller back into the context (callerMiddleware)
//	  → a tool (tools.go) or a method of an extension
//	  → delegation.Engine, authorized by httpgate.Authorizer
//
// The front keeps no state of its own: a delegation is the MCP handle
// (SEP-2567) of every tool, its record and event log are in the store, and
// any replica answers any request. It only caches what it read of the
// delegations that ended, which no longer change (ended.go). Tools serve every client; the state
// mapping from A2A to what the tools answer is in status.go. The package
// imports no other front.
package mcpserver
