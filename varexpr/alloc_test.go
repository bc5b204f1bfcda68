//go:build !race

package varexpr

import "testing"

// TestParseAllocs: reading an address for ipmatch does not allocate.
func TestParseAllocs(t *testing.T) {
	v6, v4 := []byte("2001:db8::1:2"), []byte("192.168.10.1")
	n := testing.AllocsPerRun(200, func() {
		parseIP(v6)
		parseIP(v4)
	})
	if n != 0 {
		t.Errorf("%v allocs, want 0", n)
	}
}
