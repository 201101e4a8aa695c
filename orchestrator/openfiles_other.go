//go:build !unix

package orchestrator

// openFilesLimit reports no limit where there is no RLIMIT_NOFILE.
func openFilesLimit() (soft, hard uint64, ok bool) { return 0, 0, false }
