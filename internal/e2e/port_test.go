package e2e

import (
	"fmt"
	"net"
	"os"
	"testing"
)

// TestFreePortBelowEphemeral: FreePort's ports are below the kernel's
// ephemeral range, where no outgoing connection takes them, distinct, and
// free to listen on.
func TestFreePortBelowEphemeral(t *testing.T) {
	lo, hi := portRange()
	seen := map[int]bool{}
	for range 50 {
		p := FreePort(t)
		if p < lo || p >= hi || seen[p] {
			t.Fatalf("port %d: want one in [%d, %d) not handed out before", p, lo, hi)
		}
		seen[p] = true
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
		if err != nil {
			t.Fatalf("port %d: %v", p, err)
		}
		l.Close()
	}
	var first, last int
	if _, err := fmt.Sscan(readRange(t), &first, &last); err == nil && first >= 15000 && hi != first {
		t.Errorf("range [%d, %d), want it to end at the ephemeral range's start %d", lo, hi, first)
	}
}

func readRange(t *testing.T) string {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		t.Skip(err)
	}
	return string(b)
}
