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
			for _, rt := range h.w.snap.Load().routes {
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
