// Package console is orchd's web console: server-rendered pages of the
// agents, the delegations, a delegation's tree and the policies, with
// live updates by server-sent events and controls to steer, interrupt,
// cancel and answer a delegation.
//
// It is served by the daemon at /ui/ from the same binary: html/template
// pages and embedded static files, no build step and no JavaScript
// framework. Every page reads without JavaScript; a small script appends
// events as they arrive and sends the controls without reloading.
//
// The console does not decide who may see what. It reads and acts
// through a [Source], which the daemon implements with the API's own
// authentication and authorization, so each caller sees exactly what the
// API would show it.
package console
