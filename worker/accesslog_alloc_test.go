//go:build !race

package worker

import (
	"bytes"
	"testing"

	"coregate/worker/accesslog"
)

// TestAllocAccessLog guards the request path with the access log on, in
// APISIX's default format and in one with every kind of variable: the
// line is rendered into the Log's buffers without allocating.
func TestAllocAccessLog(t *testing.T) {
	all := apisixFormat + ` $time_iso8601 $msec $request_method $uri $request_uri $args $server_port $http_x_a $arg_a` +
		` $cookie_c $route_id $route_name $service_id $service_name $consumer_name $bytes_sent $request_length` +
		` $upstream_connect_time $server_protocol $scheme $host $sent_http_x $pid`
	for _, format := range []string{apisixFormat, all} {
		for _, esc := range []accesslog.Escape{accesslog.EscapeDefault, accesslog.EscapeJSON} {
			h, l := logHarness(t, "/dev/null", format, esc)
			for _, rt := range h.w.snap.Load().routes.flat() {
				if rt.up != nil {
					rt.up.kaRequests = 0
				}
			}
			req := []byte("GET /hello?a=1 HTTP/1.1\r\nHost: example.com\r\nUser-Agent: bench \"x\"\r\nAuthorization: Basic am9objpzZWNyZXQ=\r\nCookie: c=1\r\n\r\n")
			resp := append([]byte("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 1024\r\n\r\n"), bytes.Repeat([]byte("x"), 1024)...)
			nf := []byte("GET /nope HTTP/1.1\r\nHost: example.com\r\n\r\n")
			for i := 0; i < 10; i++ {
				h.roundTrip(req, resp)
				h.roundTrip(nf, nil)
			}
			if allocs := testing.AllocsPerRun(500, func() { h.roundTrip(req, resp) }); allocs != 0 {
				t.Errorf("proxied request with the access log allocates %.1f times, want 0", allocs)
			}
			if allocs := testing.AllocsPerRun(500, func() { h.roundTrip(nf, nil) }); allocs != 0 {
				t.Errorf("404 with the access log allocates %.1f times, want 0", allocs)
			}
			l.Close()
		}
	}
}

// TestAllocAttemptLists guards $upstream_addr and $upstream_status of a
// request tried three times, two attempts failed: the lists are rendered
// from the connection's buffers, reused from one exchange to the next,
// without allocating, with the last attempt answered and in flight.
func TestAllocAttemptLists(t *testing.T) {
	h, l := logHarness(t, "/dev/null", `$upstream_addr $upstream_status $balancer_ip`, accesslog.EscapeDefault)
	defer l.Close()
	var rt *route
	for _, r := range h.w.snap.Load().routes.flat() {
		if r.up != nil {
			rt = r
		}
	}
	cc := h.cl.ctx.(*clientConn)
	a := h.w.alog
	// tried records attempts as dispatch and upstreamFailed do.
	tried := func(status int) {
		cc.rt, cc.node = rt, 0
		cc.tries = 0
		for range 2 {
			cc.tries++
			cc.statuses = append(cc.statuses, 502)
			if len(cc.upAddrs) > 0 {
				cc.upAddrs = append(cc.upAddrs, ", "...)
			}
			cc.upAddrs = cc.appendAttemptAddr(cc.upAddrs)
		}
		cc.tries++
		cc.upStatus = status
	}
	line := make([]byte, 0, 256)
	render := func() []byte {
		line = line[:0]
		for i := range a.parts {
			line = cc.appendPart(a, line, &a.parts[i])
		}
		return line
	}
	for _, tc := range []struct {
		status int
		want   string
	}{
		{200, "127.0.0.1:1980, 127.0.0.1:1980, 127.0.0.1:1980 502, 502, 200 127.0.0.1"},
		{0, "127.0.0.1:1980, 127.0.0.1:1980, 127.0.0.1:1980 502, 502, - 127.0.0.1"},
	} {
		tried(tc.status)
		if got := string(render()); got != tc.want {
			t.Errorf("rendered %q, want %q", got, tc.want)
		}
		cc.resetExchange()
		if allocs := testing.AllocsPerRun(500, func() {
			tried(tc.status)
			render()
			cc.resetExchange()
		}); allocs != 0 {
			t.Errorf("the attempt lists allocate %.1f times, want 0", allocs)
		}
	}
}
