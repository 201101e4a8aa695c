//go:build !unix

package delegation

import "errors"

// lowerOpenFiles cannot set an open-files limit here.
func lowerOpenFiles(uint64) error { return errors.New("no RLIMIT_NOFILE on this system") }

// lowersOpenFiles says whether lowerOpenFiles can work here.
const lowersOpenFiles = false
