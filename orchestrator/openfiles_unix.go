//go:build unix

package orchestrator

import "syscall"

// openFilesLimit returns the process's soft and hard open-files limits.
func openFilesLimit() (soft, hard uint64, ok bool) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0, 0, false
	}
	return uint64(lim.Cur), uint64(lim.Max), true //nolint:unconvert // int64 on some systems
}
