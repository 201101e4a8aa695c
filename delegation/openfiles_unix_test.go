//go:build unix

package delegation

import "syscall"

// lowerOpenFiles sets this process's soft open-files limit to n.
func lowerOpenFiles(n uint64) error {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return err
	}
	lim.Cur = n
	return syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim)
}

// lowersOpenFiles says whether lowerOpenFiles can work here.
const lowersOpenFiles = true
