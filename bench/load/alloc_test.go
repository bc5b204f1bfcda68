//go:build !race

package load

import (
	"runtime"
	"testing"
	"time"
)

func TestParserAllocs(t *testing.T) {
	resp := []byte("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nConnection: keep-alive\r\n\r\n5\r\n12345\r\n0\r\n\r\n")
	var p parser
	if n := testing.AllocsPerRun(1000, func() { _, _, _ = p.feed(resp, maxHead) }); n != 0 {
		t.Fatalf("feed allocates %v times per response", n)
	}
}

// TestRunAllocs checks that the request loop does not allocate: a run of
// 20000 requests may allocate no more than its fixed setup, with every
// response kept as slow (Config.SlowOver) as well, up to MaxSlow.
func TestRunAllocs(t *testing.T) {
	addr := startUpstream(t)
	mallocs := func(n uint64) uint64 {
		var a, b runtime.MemStats
		runtime.ReadMemStats(&a)
		if _, err := Run(Config{Addr: addr, Conns: 16, Duration: 10 * time.Second, MaxRequests: n, SlowOver: time.Nanosecond}); err != nil {
			t.Fatal(err)
		}
		runtime.ReadMemStats(&b)
		return b.Mallocs - a.Mallocs
	}
	mallocs(1000) // warm up
	small, large := mallocs(1000), mallocs(20000)
	// The upstream runs in this process too and allocates nothing per
	// request either; allow a little slack for the runtime.
	if large > small+200 {
		t.Fatalf("20000 requests: %d mallocs, 1000 requests: %d", large, small)
	}
}
