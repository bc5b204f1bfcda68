package worker

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"coregate/admin/spec"
	"coregate/internal/e2e"
	"coregate/worker/accesslog"
)

// APISIX's default access_log_format (nodeconf.DefaultAccessLogFormat).
const apisixFormat = `$remote_addr - $remote_user [$time_local] $http_host "$request" $status $body_bytes_sent $request_time "$http_referer" "$http_user_agent" $upstream_addr $upstream_status $upstream_response_time "$upstream_scheme://$upstream_host$upstream_uri" "$apisix_request_id"`

// logSpec: /hello on a service's upstream 127.0.0.1:1980; /noup has no
// upstream (503).
func logSpec(t testing.TB) *spec.Spec {
	t.Helper()
	svc, err := spec.DecodeService([]byte(`{"id":"s1","name":"svc one","upstream":{"nodes":{"127.0.0.1:1980":1}}}`))
	if err != nil {
		t.Fatal(err)
	}
	s := &spec.Spec{Services: []*spec.Service{svc}}
	for _, r := range []string{
		`{"id":"r1","name":"hello","uri":"/hello","service_id":"s1"}`,
		`{"id":"r2","uri":"/noup","plugins":{}}`,
	} {
		x, err := spec.DecodeRoute([]byte(r))
		if err != nil {
			t.Fatal(err)
		}
		s.Routes = append(s.Routes, x)
	}
	if err := s.Check(); err != nil {
		t.Fatal(err)
	}
	return s
}

// logTime is the wall clock the access-log tests' worker sees.
var logTime = time.Date(2026, 12, 1, 12, 36, 17, 250_000_000, time.UTC)

// logHarness is a harness whose worker writes its access log, in format
// with escape esc, to path; its clock stands at logTime and its request
// ids come from PCG(1, 2).
func logHarness(t testing.TB, path, format string, esc accesslog.Escape) (*harness, *accesslog.Log) {
	t.Helper()
	f, err := accesslog.Compile(format, esc)
	if err != nil {
		t.Fatal(err)
	}
	l, err := accesslog.Open(accesslog.Options{Path: path, Flush: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	h := newHarnessConfig(t, logSpec(t), Config{AccessLog: l, AccessLogFormat: f})
	h.w.epochUnix = logTime.UnixNano() - h.w.now
	h.w.alog.rng.Seed(1, 2)
	h.w.alog.clock.Loc = time.UTC
	return h, l
}

// msec is $msec at logTime.
var msec = strconv.FormatInt(logTime.Unix(), 10) + ".250"

// requestID is the n-th (from 0) request id of a logHarness's worker.
func requestID(n int) string {
	r := rand.NewPCG(1, 2)
	var b []byte
	for range n + 1 {
		b = appendHex64(appendHex64(b[:0], r.Uint64()), r.Uint64())
	}
	return string(b)
}

// TestAccessLogLines renders requests through a worker in memory and
// checks the exact lines of the file.
func TestAccessLogLines(t *testing.T) {
	body := bytes.Repeat([]byte("x"), 1024)
	ok := append([]byte("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 1024\r\n\r\n"), body...)
	vars := "$request_method|$uri|$request_uri|$args|$server_port|$server_protocol|$scheme|$host|$http_x_a|$arg_b|$cookie_c|" +
		"$route_id|$route_name|$service_id|$service_name|$consumer_name|$status|$bytes_sent|$body_bytes_sent|$request_length|" +
		"$time_iso8601|$msec|$upstream_connect_time|$sent_http_x_none|$remote_user"
	for _, tc := range []struct {
		name, format string
		esc          accesslog.Escape
		req          string
		resp         []byte
		want         func(toClient []byte) string
	}{
		{"apisix default, proxied", apisixFormat, accesslog.EscapeDefault,
			"GET /hello?a=1 HTTP/1.1\r\nHost: Example.com:9080\r\nUser-Agent: bench\r\nReferer: http://r/\r\n\r\n", ok,
			func([]byte) string {
				return `127.0.0.2 - - [01/Dec/2026:12:36:17 +0000] Example.com:9080 "GET /hello?a=1 HTTP/1.1" 200 1024 0.000 "http://r/" "bench" 127.0.0.1:1980 200 0.000 "http://Example.com:9080/hello?a=1" "` + requestID(0) + `"`
			}},
		{"apisix default, no route", apisixFormat, accesslog.EscapeDefault,
			"GET /nope HTTP/1.0\r\n\r\n", nil,
			func([]byte) string {
				return `127.0.0.2 - - [01/Dec/2026:12:36:17 +0000] - "GET /nope HTTP/1.0" 404 ` + strconv.Itoa(len(notFoundBody)) + ` 0.000 "-" "-" - - - "http://-" "` + requestID(0) + `"`
			}},
		{"escaped values, basic user", `$remote_user "$http_user_agent" "$request"`, accesslog.EscapeDefault,
			"GET /hello HTTP/1.1\r\nHost: h\r\nAuthorization: Basic " + "am9objpzZWNyZXQ=" + "\r\nUser-Agent: a\"b\\c\xe9\r\n\r\n", ok,
			func([]byte) string { return `john "a\x22b\x5Cc\xE9" "GET /hello HTTP/1.1"` }},
		{"json escape", `{"ua":"$http_user_agent","ref":"$http_referer","s":$status}`, accesslog.EscapeJSON,
			"GET /hello HTTP/1.1\r\nHost: h\r\nUser-Agent: a\"b\\c\té\r\n\r\n", ok,
			func([]byte) string { return `{"ua":"a\"b\\c\té","ref":"","s":200}` }},
		{"variables, proxied", vars, accesslog.EscapeDefault,
			"POST /hello/../hello?b=2&c=3 HTTP/1.1\r\nHost: Example.com\r\nX-A: 1\r\nCookie: d=4; c=5\r\nContent-Length: 3\r\n\r\nabc", ok,
			func(out []byte) string {
				return "POST|/hello|/hello/../hello?b=2&c=3|b=2&c=3|9080|HTTP/1.1|http|example.com|1|2|5|" +
					"r1|hello|s1|svc one|-|200|" + strconv.Itoa(len(out)) + "|1024|" + strconv.Itoa(len("POST /hello/../hello?b=2&c=3 HTTP/1.1\r\nHost: Example.com\r\nX-A: 1\r\nCookie: d=4; c=5\r\nContent-Length: 3\r\n\r\nabc")) + "|" +
					"2026-12-01T12:36:17+00:00|" + msec + "|0.000|-|-"
			}},
		{"variables, no upstream", vars, accesslog.EscapeDefault,
			"GET /noup HTTP/1.1\r\nHost: h\r\n\r\n", nil,
			func(out []byte) string {
				return "GET|/noup|/noup|-|9080|HTTP/1.1|http|h|-|-|-|r2|-|-|-|-|503|" + strconv.Itoa(len(out)) + "|" +
					strconv.Itoa(len(errorPages[503])) + "|" + strconv.Itoa(len("GET /noup HTTP/1.1\r\nHost: h\r\n\r\n")) + "|" +
					"2026-12-01T12:36:17+00:00|" + msec + "|-|-|-"
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "access.log")
			h, l := logHarness(t, path, tc.format, tc.esc)
			_, out := h.roundTrip([]byte(tc.req), tc.resp)
			want := tc.want(bytes.Clone(out)) + "\n"
			l.Close()
			got, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != want {
				t.Errorf("line:\n%s\nwant:\n%s\nanswer:\n%s", got, want, out)
			}
		})
	}
}

// TestAccessLogClosedEarly: a client that leaves before any answer gets
// a 499 line, once, and an idle connection's close writes none.
func TestAccessLogClosedEarly(t *testing.T) {
	path := filepath.Join(t.TempDir(), "access.log")
	h, l := logHarness(t, path, `$status "$request" $upstream_addr`, accesslog.EscapeDefault)
	h.cl.in = append(h.cl.in, "GET /hello HTTP/1.1\r\nHost: h\r\n\r\n"...)
	h.w.OnTraffic(h.cl) // with the upstream now
	h.w.OnClose(h.cl, nil)
	h.w.OnClose(h.cl, nil) // nothing in progress: no line
	l.Close()
	got, _ := os.ReadFile(path)
	if want := "499 \"GET /hello HTTP/1.1\" 127.0.0.1:1980\n"; string(got) != want {
		t.Errorf("lines:\n%s\nwant:\n%s", got, want)
	}
}

// TestAccessLogOff: a worker without an access log keeps no head for it.
func TestAccessLogOff(t *testing.T) {
	h := newHarnessConfig(t, logSpec(t), Config{})
	h.roundTrip([]byte("GET /hello HTTP/1.1\r\nHost: h\r\n\r\n"), []byte("HTTP/1.1 204 No Content\r\n\r\n"))
	if h.w.alog != nil || len(h.cl.ctx.(*clientConn).headCopy) != 0 {
		t.Error("the head was kept with no access log")
	}
}

// TestAccessLogManyLines: lines from many requests, across buffer
// hand-offs, all in the file in order once it is closed.
func TestAccessLogManyLines(t *testing.T) {
	path := filepath.Join(t.TempDir(), "access.log")
	h, l := logHarness(t, path, `$request_uri $status`, accesslog.EscapeDefault)
	// The in-memory upstream connection serves every request.
	for _, rt := range h.w.snap.Load().routes.flat() {
		if rt.up != nil {
			rt.up.kaRequests = 0
		}
	}
	resp := []byte("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
	var want strings.Builder
	for i := range 2000 {
		h.roundTrip([]byte("GET /hello?i="+strconv.Itoa(i)+" HTTP/1.1\r\nHost: h\r\n\r\n"), resp)
		want.WriteString("/hello?i=" + strconv.Itoa(i) + " 200\n")
		if i%100 == 99 {
			// A writer far behind the loop may drop lines; this test is
			// about order and wholeness, so it lets the writer catch up.
			deadline := time.Now().Add(10 * time.Second)
			for st, _ := os.Stat(path); (st == nil || st.Size() < int64(want.Len())-16384) && time.Now().Before(deadline); st, _ = os.Stat(path) {
				time.Sleep(time.Millisecond)
			}
		}
	}
	l.Close()
	got, _ := os.ReadFile(path)
	if d := l.Dropped(); d != 0 {
		t.Fatalf("%d lines dropped", d)
	}
	if string(got) != want.String() {
		t.Errorf("%d bytes written, want %d", len(got), want.Len())
	}
}

// TestAccessLogEveryAttempt checks that $upstream_addr and
// $upstream_status list every attempt of a request, comma-separated, as
// nginx's do: a refused connect (502) then the node that answered, two
// refused connects, one attempt alone, and a kept-alive connection the
// origin closed as it was reused (502) then its replay; $balancer_ip is
// the last attempt's. Real sockets: a port nothing listens on, origins.
func TestAccessLogEveryAttempt(t *testing.T) {
	port := e2e.IPOrigins(t, true, "127.0.0.2")
	live := fmt.Sprintf("127.0.0.2:%d", port)
	dead1, dead2 := e2e.DeadAddr(t), e2e.DeadAddr(t)
	// stale answers the first request of its first connection and closes
	// it on the second.
	stale, _ := scriptedOrigin(t, func(n int, c net.Conn, br *bufio.Reader) {
		for i := 1; ; i++ {
			if _, err := http.ReadRequest(br); err != nil || n == 1 && i == 2 {
				return
			}
			if _, err := io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"); err != nil {
				return
			}
		}
	})
	node := func(addr string, priority int) string {
		host, p, _ := net.SplitHostPort(addr)
		return fmt.Sprintf(`{"host":%q,"port":%s,"weight":1,"priority":%d}`, host, p, priority)
	}
	f, err := accesslog.Compile(`$uri|$status|$upstream_addr|$upstream_status|$balancer_ip`, accesslog.EscapeDefault)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "access.log")
	l, err := accesslog.Open(accesslog.Options{Path: path, Flush: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	w, done := runWorker(t, Config{AccessLog: l, AccessLogFormat: f}, testSpec(t, nil,
		`{"id":"1","uri":"/retried","upstream":{"retries":1,"nodes":[`+node(dead1, 2)+`,`+node(live, 1)+`]}}`,
		`{"id":"2","uri":"/failed","upstream":{"retries":1,"nodes":[`+node(dead1, 2)+`,`+node(dead2, 1)+`]}}`,
		`{"id":"3","uri":"/once","upstream":{"nodes":[`+node(live, 1)+`]}}`,
		`{"id":"4","uri":"/stale","upstream":{"retries":0,"nodes":[`+node(stale, 1)+`]}}`))
	c, br := dialWorker(t, w)
	for _, tc := range []struct {
		path   string
		status int
	}{{"/retried", 200}, {"/failed", 502}, {"/once", 200}, {"/retried", 200}, {"/stale", 200}, {"/stale", 200}} {
		_, _ = io.WriteString(c, "GET "+tc.path+" HTTP/1.1\r\nHost: x\r\n\r\n")
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		if resp.StatusCode != tc.status {
			t.Fatalf("GET %s: %d, want %d", tc.path, resp.StatusCode, tc.status)
		}
	}
	if err := w.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	<-done
	l.Close()
	got, _ := os.ReadFile(path)
	retried := "/retried|200|" + dead1 + ", " + live + "|502, 200|127.0.0.2\n"
	want := retried +
		"/failed|502|" + dead1 + ", " + dead2 + "|502, 502|127.0.0.1\n" +
		"/once|200|" + live + "|200|127.0.0.2\n" +
		retried +
		"/stale|200|" + stale + "|200|127.0.0.1\n" +
		"/stale|200|" + stale + ", " + stale + "|502, 200|127.0.0.1\n"
	if string(got) != want {
		t.Errorf("access log:\n%s\nwant:\n%s", got, want)
	}
}
