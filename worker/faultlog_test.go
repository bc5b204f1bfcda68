package worker

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

// TestCloseFaultWords: an answer cut short by the worker's own stop (the
// drain's deadline: the engine closes what is left) is logged as that,
// not as the upstream's early close, which is what the same cut is when
// the upstream's FIN ends it.
func TestCloseFaultWords(t *testing.T) {
	for _, tc := range []struct {
		stopping bool
		want     string
	}{
		{true, "worker stopped before the upstream answered in full while reading upstream"},
		{false, "upstream prematurely closed connection while reading upstream"},
	} {
		var log bytes.Buffer
		h := newHarnessConfig(t, framingSpec(t), Config{Logger: slog.New(slog.NewTextHandler(&log, nil))})
		h.roundTrip([]byte("GET /a HTTP/1.1\r\nHost: x\r\n\r\n"), []byte("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nab"))
		if !strings.HasSuffix(string(h.cl.out), "\r\n\r\nab") {
			t.Fatalf("stopping %v: the answer did not start: %q", tc.stopping, h.cl.out)
		}
		h.w.stopping = tc.stopping
		if tc.stopping {
			_ = h.loop.Close(h.up)
		} else {
			h.loop.peerClosed(h.up)
		}
		if !h.cl.closed || !strings.Contains(log.String(), tc.want) {
			t.Fatalf("stopping %v: client closed %v, log:\n%s\nwant %q", tc.stopping, h.cl.closed, log.String(), tc.want)
		}
	}
}
