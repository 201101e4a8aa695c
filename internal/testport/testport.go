// Package testport finds loopback ports for tests to bind later: a
// daemon in a process of its own, or one that must come back on the same
// address after a restart. A port the kernel hands out for ":0" can be
// taken, between the check and the bind, by another test's listener or by
// any outgoing connection, which take their ports from the same ephemeral
// range; so Free picks ports below that range, where only tests that pick
// ports this way look.
package testport

import (
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
)

// Free returns n distinct loopback ports that were free a moment ago,
// outside the kernel's ephemeral range where it can tell it, else from it.
func Free(t testing.TB, n int) []int {
	t.Helper()
	lo, hi := candidates()
	var ports []int
	var lns []net.Listener
	defer func() {
		for _, ln := range lns {
			_ = ln.Close()
		}
	}()
	for tries := 0; len(ports) < n; tries++ {
		addr := "127.0.0.1:0"
		if hi > lo && tries < 1000 {
			addr = "127.0.0.1:" + strconv.Itoa(lo+rand.IntN(hi-lo))
		}
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			if addr == "127.0.0.1:0" {
				t.Fatalf("reserve a port: %v", err)
			}
			continue
		}
		lns = append(lns, ln)
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
	}
	return ports
}

// candidates is the range [lo, hi) Free picks from: below the ephemeral
// range Linux reports, from 10000; empty when it reports none or leaves
// no room.
func candidates() (lo, hi int) {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 0, 0
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return 0, 0
	}
	first, err := strconv.Atoi(f[0])
	if err != nil || first <= 11000 {
		return 0, 0
	}
	return 10000, first
}
