// Command orchd is the orchd daemon and its command-line client.
//
//	orchd serve [--config FILE] [--listen ADDR]
//	orchd config validate FILE
//	orchd agents add|list|get|refresh|remove … [--server URL]
//	orchd agents inspect URL [-o text|json]
//	orchd policy check|test FILE|DIR...
//	orchd delegate "text"; orchd tasks …; orchd steer|interrupt ID …
//	orchd mcp [--server URL]
//	orchd version
//
// docs/cli.md describes every command and the exit codes.
package main

import "os"

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }
