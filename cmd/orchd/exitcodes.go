package main

// The exit codes of orchd's commands. Scripts tell a refusal (the work
// could not go anywhere, by policy or capability) from a failure (it went
// and did not succeed, or orchd could not do what was asked) and from a
// mistake in the command line itself.
const (
	// exitOK: the command did what was asked.
	exitOK = 0
	// exitFailure: the command or the work it followed failed.
	exitFailure = 1
	// exitUsage: the command line is wrong (unknown command or flag, wrong
	// number of arguments, a bad flag value); nothing was done.
	exitUsage = 2
	// exitRefused: orchd refused the work before anything was sent to an
	// agent (no allowed, able agent; a refused steer or interrupt).
	exitRefused = 3
)
