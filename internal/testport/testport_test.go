package testport

import (
	"net"
	"strconv"
	"testing"
)

// TestFree: the ports are distinct, free to bind, and below the
// ephemeral range when the kernel reports one with room below it.
func TestFree(t *testing.T) {
	ports := Free(t, 5)
	seen := map[int]bool{}
	lo, hi := candidates()
	for _, p := range ports {
		if seen[p] {
			t.Fatalf("port %d twice: %v", p, ports)
		}
		seen[p] = true
		if hi > lo && (p < lo || p >= hi) {
			t.Errorf("port %d is outside [%d, %d)", p, lo, hi)
		}
		ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err != nil {
			t.Fatalf("bind %d: %v", p, err)
		}
		_ = ln.Close()
	}
}
