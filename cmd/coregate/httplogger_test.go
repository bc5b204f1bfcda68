package main

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"coregate/admin/adminapi"
)

// logSink is a real HTTP server on loopback recording the POSTs it gets.
type logSink struct {
	mu    sync.Mutex
	start time.Time
	posts []string
	at    []time.Duration
	srv   *http.Server
}

func serveLogSink(t *testing.T, ln net.Listener, s *logSink) {
	s.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		s.posts = append(s.posts, r.Header.Get("Authorization")+" "+string(b))
		s.at = append(s.at, time.Since(s.start))
		s.mu.Unlock()
	})}
	go func() { _ = s.srv.Serve(ln) }()
	t.Cleanup(func() { _ = s.srv.Close() })
}

// waitPosts waits up to 10 s for n POSTs and returns them with their
// times.
func (s *logSink) waitPosts(t *testing.T, n int) ([]string, []time.Duration) {
	t.Helper()
	var posts []string
	var at []time.Duration
	eventually(t, 10*time.Second, func() error {
		s.mu.Lock()
		defer s.mu.Unlock()
		posts, at = append([]string(nil), s.posts...), append([]time.Duration(nil), s.at...)
		if len(posts) < n {
			return fmt.Errorf("%d POSTs, want %d: %q", len(posts), n, posts)
		}
		return nil
	})
	return posts, at
}

// TestAdminAPIHTTPLogger runs http-logger through the binary, configured
// through the Admin API, against a real HTTP server on loopback: a full
// batch is POSTed at once, the rest after inactive_timeout; with the
// server down the batch is retried and arrives once it is up; a server
// that never answers does not slow the requests; the Admin API lists the
// plugin and refuses an include_resp_body_expr that does not compile.
func TestAdminAPIHTTPLogger(t *testing.T) {
	t.Parallel()
	up := textUpstream(t, "hello")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	sink := &logSink{}
	serveLogSink(t, ln, sink)
	downPort := freePort(t) // nothing listens there until later

	adminPort := freePort(t)
	g := startSupervisor(t, "", etcdConfig(adminPort, adminapi.LegacyAdminKey), 1)
	c := newClient(t)
	admin := legacyAdmin(adminPort)
	put := func(path, body string) {
		t.Helper()
		if r := admin.do(t, c, "PUT", path, body); r.status != 201 && r.status != 200 {
			t.Fatalf("PUT %s: %d %s", path, r.status, r.body)
		}
	}
	if r := admin.do(t, c, "GET", "plugins/list", ""); !strings.Contains(r.body, `"http-logger"`) {
		t.Errorf("plugins/list: %d %s", r.status, r.body)
	}
	r := admin.do(t, c, "PUT", "routes/bad", `{"uri":"/bad","plugins":{"http-logger":{"uri":"http://127.0.0.1:1","include_resp_body":true,`+
		`"include_resp_body_expr":[["status","=","200"]]}},"upstream":{"nodes":{"`+up.Addr()+`":1}}}`)
	if want := "failed to check the configuration of plugin http-logger err: failed to validate the 'include_resp_body_expr' expression: invalid operator '='"; r.status != 400 ||
		!strings.Contains(r.body, want) {
		t.Errorf("PUT include_resp_body_expr: %d %s, want 400 %s", r.status, r.body, want)
	}

	put("routes/batch", `{"uri":"/hello","plugins":{"http-logger":{"uri":"http://`+ln.Addr().String()+`/log","auth_header":"Bearer k",`+
		`"batch_max_size":2,"inactive_timeout":1,"log_format":{"a":"$arg_a","status":"$status"}}},`+
		`"upstream":{"type":"roundrobin","nodes":{"`+up.Addr()+`":1}}}`)
	eventually(t, 10*time.Second, func() error {
		if r := do(t, c, "GET", g.url("/hello?a=warm"), "", nil, nil); r.status != 200 {
			return fmt.Errorf("GET /hello = %d %q", r.status, r.body)
		}
		return nil
	})
	// The warm-up entries go in batches of their own, the last once
	// inactive: they are let go before counting.
	sink.waitPosts(t, 1)
	time.Sleep(1500 * time.Millisecond)
	sink.mu.Lock()
	sink.posts, sink.at, sink.start = nil, nil, time.Now()
	sink.mu.Unlock()

	for _, a := range []string{"1", "2", "3"} {
		if r := do(t, c, "GET", g.url("/hello?a="+a), "", nil, nil); r.status != 200 {
			t.Fatalf("GET /hello?a=%s: %d", a, r.status)
		}
	}
	posts, at := sink.waitPosts(t, 2)
	want := []string{
		`Bearer k [{"a":"1","status":"200","route_id":"batch"},{"a":"2","status":"200","route_id":"batch"}]`,
		`Bearer k [{"a":"3","status":"200","route_id":"batch"}]`,
	}
	if strings.Join(posts, "\n") != strings.Join(want, "\n") {
		t.Errorf("POSTs\n%s\nwant\n%s", strings.Join(posts, "\n"), strings.Join(want, "\n"))
	}
	if len(at) == 2 && (at[0] > 800*time.Millisecond || at[1] < 900*time.Millisecond || at[1] > 4*time.Second) {
		t.Errorf("POSTs at %v: the full batch at once, the other about 1 s later", at)
	}

	// The server down, then up: the retries bring the entry.
	put("routes/retry", `{"uri":"/retry","plugins":{"http-logger":{"uri":"http://127.0.0.1:`+fmt.Sprint(downPort)+`/log",`+
		`"batch_max_size":1,"max_retry_count":5,"retry_delay":1,"log_format":{"a":"$arg_a"}}},`+
		`"upstream":{"type":"roundrobin","nodes":{"`+up.Addr()+`":1}}}`)
	eventually(t, 10*time.Second, func() error {
		if r := do(t, c, "GET", g.url("/retry?a=late"), "", nil, nil); r.status != 200 {
			return fmt.Errorf("GET /retry = %d %q", r.status, r.body)
		}
		return nil
	})
	time.Sleep(1500 * time.Millisecond) // a try or two fail
	ln2, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", downPort))
	if err != nil {
		t.Fatal(err)
	}
	late := &logSink{start: time.Now()}
	serveLogSink(t, ln2, late)
	got, _ := late.waitPosts(t, 1)
	if got[0] != ` {"a":"late","route_id":"retry"}` {
		t.Errorf("after the server came up: %q", got)
	}

	// A server that takes the connections and never answers holds the
	// batches, not the requests.
	mute, err := net.Listen("tcp", "127.0.0.1:0") // never accepted
	if err != nil {
		t.Fatal(err)
	}
	defer mute.Close()
	put("routes/mute", `{"uri":"/mute","plugins":{"http-logger":{"uri":"http://`+mute.Addr().String()+`/log",`+
		`"batch_max_size":1,"timeout":3,"max_retry_count":2,"log_format":{"a":"$arg_a"}}},`+
		`"upstream":{"type":"roundrobin","nodes":{"`+up.Addr()+`":1}}}`)
	eventually(t, 10*time.Second, func() error {
		if r := do(t, c, "GET", g.url("/mute"), "", nil, nil); r.status != 200 {
			return fmt.Errorf("GET /mute = %d %q", r.status, r.body)
		}
		return nil
	})
	t0 := time.Now()
	for i := range 20 {
		t1 := time.Now()
		if r := do(t, c, "GET", g.url(fmt.Sprintf("/mute?a=%d", i)), "", nil, nil); r.status != 200 || r.body != "hello" {
			t.Fatalf("GET /mute %d: %d %q", i, r.status, r.body)
		}
		if d := time.Since(t1); d > time.Second {
			t.Errorf("GET /mute %d took %v with the log server mute", i, d)
		}
	}
	if d := time.Since(t0); d > 3*time.Second {
		t.Errorf("20 requests took %v with the log server mute", d)
	}
}
