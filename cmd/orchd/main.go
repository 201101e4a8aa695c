// Command orchd is the orchd daemon and its command-line client.
//
//	orchd serve [--config FILE] [--listen ADDR]
//	orchd agents inspect URL [-o text|json]
package main

import "os"

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }
