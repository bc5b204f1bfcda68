package main

import (
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestLimitConnExactAcrossWorkers: the workers of one node share
// limit-conn's counts, so exactly conn requests are in flight at once
// however many workers serve the clients, the others rejected; once those
// end, exactly conn pass again (every one left the count in its log
// phase).
func TestLimitConnExactAcrossWorkers(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts gateways with several workers")
	}
	const workers, conn = 2, 7
	var arrived atomic.Int32
	var release atomic.Pointer[chan struct{}]
	up := newHTTPUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		arrived.Add(1)
		select {
		case <-*release.Load():
		case <-time.After(30 * time.Second):
		}
		_, _ = w.Write([]byte("ok"))
	})
	g := startSupervisor(t, routesYAML(
		obj{"id": "held", "uri": "/held", "upstream": upstreamOf(nodes(up.Addr()), nil),
			"plugins": obj{"limit-conn": obj{"conn": conn, "burst": 0, "default_conn_delay": 0.1, "key": "remote_addr",
				"rejected_code": 429, "rejected_msg": "busy"}}},
	), func(port int) string { return perCoreConfig(port, workers) }, workers)
	conns := dialSpread(t, g, workers, 8)

	for round := range 2 {
		ch := make(chan struct{})
		release.Store(&ch)
		arrived.Store(0)
		var ok, busy atomic.Int32
		var wg sync.WaitGroup
		var mu sync.Mutex
		var failure error
		for _, lc := range conns {
			wg.Go(func() {
				a, err := lc.get("/held")
				switch {
				case err != nil:
				case a.status == 200 && a.body == "ok":
					ok.Add(1)
					return
				case a.status == 429 && a.body == `{"error_msg":"busy"}`+"\n":
					busy.Add(1)
					return
				default:
					err = fmt.Errorf("unexpected answer %+v", a)
				}
				mu.Lock()
				failure = err
				mu.Unlock()
			})
		}
		// Every request but those in flight is rejected at once.
		eventually(t, 20*time.Second, func() error {
			if n := busy.Load(); int(n) != len(conns)-conn || arrived.Load() != conn {
				return fmt.Errorf("round %d: %d rejected, %d at the upstream; want %d and %d",
					round, n, arrived.Load(), len(conns)-conn, conn)
			}
			return nil
		})
		time.Sleep(100 * time.Millisecond) // none more comes
		if n := arrived.Load(); n != conn {
			t.Fatalf("round %d: %d requests in flight at the upstream, want %d", round, n, conn)
		}
		close(ch)
		wg.Wait()
		if failure != nil {
			t.Fatal(failure)
		}
		if ok.Load() != conn {
			t.Fatalf("round %d: %d passed, want %d", round, ok.Load(), conn)
		}
	}
}
