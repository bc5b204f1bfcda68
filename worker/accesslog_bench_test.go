package worker

import (
	"bytes"
	"syscall"
	"testing"
	"time"

	"coregate/worker/accesslog"
)

// BenchmarkAccessLog is BenchmarkRequestPath's proxied request (1 route)
// without the access log, and with it in APISIX's default format written
// to /dev/null: the difference is the line's cost (its rendering, the
// head kept for it, and the writer's writes). ns/op is the loop's time;
// cpu-ns/op is the process's CPU time (every thread, the writer's
// included) per request, from getrusage.
func BenchmarkAccessLog(b *testing.B) {
	req := []byte("GET /hello HTTP/1.1\r\nHost: 127.0.0.1:9080\r\nUser-Agent: wrk\r\nAccept: */*\r\n\r\n")
	resp := append([]byte("HTTP/1.1 200 OK\r\nServer: nginx\r\nDate: Sun, 29 Nov 2026 20:00:00 GMT\r\nContent-Type: text/plain\r\nContent-Length: 1024\r\nConnection: keep-alive\r\n\r\n"), bytes.Repeat([]byte("1234567890"), 103)[:1024]...)
	run := func(b *testing.B, h *harness) {
		for _, rt := range h.w.snap.Load().routes.flat() {
			rt.up.kaRequests = 0
		}
		b.ReportAllocs()
		cpu0 := cpuTime()
		for i := 0; i < b.N; i++ {
			h.roundTrip(req, resp)
			if i%64 == 0 {
				h.w.tick() // the loop's tick: the Log's flush
			}
		}
		b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N), "cpu-ns/op")
	}
	b.Run("off", func(b *testing.B) { run(b, newHarness(b, helloSpec(b, 1))) })
	b.Run("on", func(b *testing.B) {
		f, err := accesslog.Compile(apisixFormat, accesslog.EscapeDefault)
		if err != nil {
			b.Fatal(err)
		}
		l, err := accesslog.Open(accesslog.Options{Path: "/dev/null", Flush: time.Second})
		if err != nil {
			b.Fatal(err)
		}
		defer func() {
			l.Close()
			if d := l.Dropped(); d > 0 {
				b.Logf("%d of %d lines dropped", d, b.N)
			}
		}()
		run(b, newHarnessConfig(b, helloSpec(b, 1), Config{AccessLog: l, AccessLogFormat: f}))
	})
}

// cpuTime is the process's user and system CPU time in nanoseconds.
func cpuTime() int64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
