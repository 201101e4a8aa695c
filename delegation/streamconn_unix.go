//go:build unix

package delegation

import (
	"errors"
	"net"
	"syscall"
)

// unusable reports whether conn cannot carry another request: its peer
// closed it, or sent something nobody asked for, or it cannot be looked
// at. It reads the socket once without waiting, as net/http's idle
// connections have a reader of their own to see so.
func unusable(conn net.Conn) bool {
	sc, ok := conn.(syscall.Conn)
	if !ok {
		return true
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return true
	}
	bad := true
	var b [1]byte
	err = rc.Read(func(fd uintptr) bool {
		// Nothing to read yet is the one good answer: a byte is unasked
		// for, and 0 bytes without an error is the peer's close.
		_, rerr := syscall.Read(int(fd), b[:])
		bad = !errors.Is(rerr, syscall.EAGAIN)
		return true // one look, no wait
	})
	return err != nil || bad
}
