package main

import (
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestKeepAliveReuse: sequential requests, from one client connection or
// from several, travel on one upstream connection.
func TestKeepAliveReuse(t *testing.T) {
	t.Parallel()
	up := textUpstream(t, "ok")
	g := startGateway(t, routesYAML(obj{"id": 1, "uri": "/ka", "upstream": upstreamOf(nodes(up.Addr()), nil)}), "")
	c := newClient(t)
	for i := range 20 {
		if r := do(t, c, "GET", g.url("/ka"), "", nil, nil); r.status != 200 || r.body != "ok" {
			t.Fatalf("request %d: %d %q", i, r.status, r.body)
		}
	}
	// New client connections each time.
	for i := range 5 {
		c2 := newClient(t)
		if r := do(t, c2, "GET", g.url("/ka"), "", map[string]string{"Connection": "close"}, nil); r.status != 200 {
			t.Fatalf("closing client %d: %d", i, r.status)
		}
	}
	if n := up.Conns.Load(); n != 1 {
		t.Errorf("upstream accepted %d connections for 25 sequential requests, want 1", n)
	}
}

// TestUpstreamConnectionClose: an origin that answers Connection: close
// and closes is never written to again; every request succeeds on a new
// connection.
func TestUpstreamConnectionClose(t *testing.T) {
	t.Parallel()
	up := newRawUpstream(t, func(c *rawConn) {
		c.ServeKeepAlive(func(_ *http.Request, _ []byte, _ int) (string, bool) {
			return "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok", false
		})
	})
	g := startGateway(t, routesYAML(obj{"id": 1, "uri": "/c", "upstream": upstreamOf(nodes(up.Addr()), nil)}), "")
	c := newClient(t)
	for i := range 6 {
		r := do(t, c, "GET", g.url("/c"), "", nil, nil)
		if r.status != 200 || r.body != "ok" {
			t.Fatalf("request %d: %d %q", i, r.status, r.body)
		}
		if r.close {
			t.Errorf("request %d: the origin's Connection: close reached the client", i)
		}
	}
	if n := up.Accepted.Load(); n != 6 {
		t.Errorf("upstream accepted %d connections, want 6", n)
	}
}

// TestUpstreamIdleClose: an origin that closes kept-alive connections after
// 100 ms of idleness; requests spaced wider than that all succeed.
func TestUpstreamIdleClose(t *testing.T) {
	t.Parallel()
	up := newRawUpstream(t, func(c *rawConn) {
		for {
			_ = c.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
			if _, _, err := c.ReadRequest(); err != nil {
				return
			}
			if _, err := c.Write([]byte(okResponse("ok"))); err != nil {
				return
			}
		}
	})
	g := startGateway(t, routesYAML(obj{"id": 1, "uri": "/idle", "upstream": upstreamOf(nodes(up.Addr()), nil)}), "")
	c := newClient(t)
	for i := range 5 {
		if r := do(t, c, "GET", g.url("/idle"), "", nil, nil); r.status != 200 || r.body != "ok" {
			t.Fatalf("request %d: %d %q", i, r.status, r.body)
		}
		time.Sleep(250 * time.Millisecond)
	}
	if n := up.Accepted.Load(); n != 5 {
		t.Errorf("upstream accepted %d connections, want 5", n)
	}
}

// TestStaleConnectionRetried: the origin reads the second request of a
// kept-alive connection and closes it without a byte of answer (it closed
// the idle connection just as the gateway reused it). The gateway replays
// the request on a new connection, even with a single node and no retries.
func TestStaleConnectionRetried(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"close", "reset"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			up := newRawUpstream(t, func(c *rawConn) {
				c.ServeKeepAlive(func(req *http.Request, _ []byte, n int) (string, bool) {
					if c.N == 1 && n == 2 {
						if mode == "reset" {
							if tc, ok := c.Conn.(interface{ SetLinger(int) error }); ok {
								_ = tc.SetLinger(0)
							}
						}
						return "", false
					}
					return okResponse(req.URL.Path), true
				})
			})
			g := startGateway(t, routesYAML(obj{"id": 1, "uri": "/*", "upstream": upstreamOf(nodes(up.Addr()), obj{"retries": 0})}), "")
			c := newClient(t)
			for i := range 4 {
				p := "/r" + strconv.Itoa(i)
				if r := do(t, c, "GET", g.url(p), "", nil, nil); r.status != 200 || r.body != p {
					t.Fatalf("request %d: %d %q %q", i, r.status, r.body, r.header.Get("X-APISIX-Upstream-Status"))
				}
			}
			if n := up.Accepted.Load(); n != 2 {
				t.Errorf("upstream accepted %d connections, want 2", n)
			}
		})
	}
}

// TestStaleConnectionNotReplayedForPost: a non-idempotent request that
// reached the origin is neither replayed on a new connection nor sent to
// another node when the connection fails before any answer.
func TestStaleConnectionNotReplayedForPost(t *testing.T) {
	t.Parallel()
	var posts atomic.Int32
	serve := func(c *rawConn) {
		c.ServeKeepAlive(func(req *http.Request, _ []byte, n int) (string, bool) {
			if req.Method == "POST" {
				posts.Add(1)
				return "", false
			}
			return okResponse("ok"), true
		})
	}
	first := newRawUpstream(t, serve)
	second := newRawUpstream(t, serve)
	g := startGateway(t, routesYAML(obj{"id": 1, "uri": "/*", "upstream": obj{"nodes": nodeList(t,
		nodeSpec{addr: first.Addr(), weight: 1, priority: 1}, nodeSpec{addr: second.Addr(), weight: 1})}}), "")
	c := newClient(t)
	if r := do(t, c, "GET", g.url("/warm"), "", nil, nil); r.status != 200 {
		t.Fatalf("warm-up: %d", r.status)
	}
	// No body: nothing but the head tells that the request left.
	r := do(t, c, "POST", g.url("/p"), "", nil, nil)
	if r.status != 502 {
		t.Errorf("POST answered %d, want 502", r.status)
	}
	if n := posts.Load(); n != 1 {
		t.Errorf("the origins got the POST %d times, want 1", n)
	}
}

// TestKeepalivePoolSettings: keepalive_pool.requests caps the requests of
// one upstream connection; idle_timeout closes idle ones; size bounds the
// idle connections kept.
func TestKeepalivePoolSettings(t *testing.T) {
	t.Parallel()
	t.Run("requests", func(t *testing.T) {
		t.Parallel()
		up := textUpstream(t, "ok")
		g := startGateway(t, routesYAML(obj{"id": 1, "uri": "/k", "upstream": upstreamOf(nodes(up.Addr()),
			obj{"keepalive_pool": obj{"size": 10, "idle_timeout": 60, "requests": 3}})}), "")
		c := newClient(t)
		var got []int32
		for i := range 9 {
			if r := do(t, c, "GET", g.url("/k"), "", nil, nil); r.status != 200 {
				t.Fatalf("request %d: %d", i, r.status)
			}
			got = append(got, up.Conns.Load())
		}
		if diff := cmp.Diff([]int32{1, 1, 1, 2, 2, 2, 3, 3, 3}, got); diff != "" {
			t.Errorf("upstream connections after each request (-want +got):\n%s", diff)
		}
	})
	t.Run("idle_timeout", func(t *testing.T) {
		t.Parallel()
		up := newHTTPUpstream(t, func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
		g := startGateway(t, routesYAML(obj{"id": 1, "uri": "/k", "upstream": upstreamOf(nodes(up.Addr()),
			obj{"keepalive_pool": obj{"size": 10, "idle_timeout": 0.3, "requests": 100}})}), "")
		c := newClient(t)
		do(t, c, "GET", g.url("/k"), "", nil, nil)
		start := time.Now()
		eventually(t, 3*time.Second, func() error {
			if up.Closed.Load() != 1 {
				return fmt.Errorf("idle upstream connection not closed")
			}
			return nil
		})
		if took := time.Since(start); took < 200*time.Millisecond {
			t.Errorf("idle connection closed after %v, before idle_timeout 0.3s", took)
		}
		do(t, c, "GET", g.url("/k"), "", nil, nil)
		if n := up.Conns.Load(); n != 2 {
			t.Errorf("upstream connections %d, want 2", n)
		}
	})
	t.Run("size", func(t *testing.T) {
		t.Parallel()
		release := make(chan struct{})
		var inflight atomic.Int32
		up := newHTTPUpstream(t, func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/slow" {
				inflight.Add(1)
				select {
				case <-release:
				case <-time.After(5 * time.Second):
				}
			}
			_, _ = w.Write([]byte("ok"))
		})
		g := startGateway(t, routesYAML(obj{"id": 1, "uri": "/*", "upstream": upstreamOf(nodes(up.Addr()),
			obj{"keepalive_pool": obj{"size": 1, "idle_timeout": 60, "requests": 100}})}), "")
		var wg sync.WaitGroup
		for range 3 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				c := newClient(t)
				if r, err := tryDo(c, "GET", g.url("/slow"), "", nil, nil); err != nil || r.status != 200 {
					t.Errorf("slow request: %v %d", err, r.status)
				}
			}()
		}
		eventually(t, 3*time.Second, func() error {
			if n := inflight.Load(); n != 3 {
				return fmt.Errorf("%d requests at the origin", n)
			}
			return nil
		})
		close(release)
		wg.Wait()
		// Three connections finished; the pool keeps one.
		eventually(t, 3*time.Second, func() error {
			if n := up.Closed.Load(); n != 2 {
				return fmt.Errorf("%d upstream connections closed, want 2", n)
			}
			return nil
		})
		c := newClient(t)
		for range 3 {
			do(t, c, "GET", g.url("/fast"), "", nil, nil)
		}
		if n := up.Conns.Load(); n != 3 {
			t.Errorf("upstream connections %d, want 3 (the kept one reused)", n)
		}
	})
}
