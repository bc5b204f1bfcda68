package main

import (
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// nodeList is the array form of upstream nodes: host, port, weight and
// priority, in a fixed order.
func nodeList(t testing.TB, specs ...nodeSpec) []obj {
	t.Helper()
	var out []obj
	for _, s := range specs {
		host, port, err := net.SplitHostPort(s.addr)
		if err != nil {
			t.Fatal(err)
		}
		p, _ := strconv.Atoi(port)
		out = append(out, obj{"host": host, "port": p, "weight": s.weight, "priority": s.priority})
	}
	return out
}

type nodeSpec struct {
	addr             string
	weight, priority int
}

// swrr is nginx's smooth weighted round robin, the reference the gateway's
// balancer is compared with.
func swrr(weights []int, n int) []int {
	cur := make([]int, len(weights))
	total := 0
	for _, w := range weights {
		total += w
	}
	var seq []int
	for range n {
		best := -1
		for i, w := range weights {
			cur[i] += w
			if best < 0 || cur[i] > cur[best] {
				best = i
			}
		}
		cur[best] -= total
		seq = append(seq, best)
	}
	return seq
}

// TestRoundRobinWeights checks the exact order of nodes, request by
// request, against nginx's smooth weighted round robin.
func TestRoundRobinWeights(t *testing.T) {
	t.Parallel()
	for _, weights := range [][]int{{3, 1}, {5, 1, 1}, {1, 1}} {
		t.Run(strings.Trim(strings.ReplaceAll(fmt.Sprint(weights), " ", ":"), "[]"), func(t *testing.T) {
			t.Parallel()
			var specs []nodeSpec
			for i, w := range weights {
				up := textUpstream(t, strconv.Itoa(i))
				specs = append(specs, nodeSpec{addr: up.Addr(), weight: w})
			}
			g := startGateway(t, routesYAML(obj{"id": 1, "uri": "/rr", "upstream": obj{"type": "roundrobin", "nodes": nodeList(t, specs...)}}), "")
			n := 40
			if len(weights) == 3 {
				n = 42
			}
			c := newClient(t)
			var got []int
			counts := make([]int, len(weights))
			for range n {
				r := do(t, c, "GET", g.url("/rr"), "", nil, nil)
				i, err := strconv.Atoi(r.body)
				if r.status != 200 || err != nil {
					t.Fatalf("got %d %q", r.status, r.body)
				}
				got = append(got, i)
				counts[i]++
			}
			if diff := cmp.Diff(swrr(weights, n), got); diff != "" {
				t.Errorf("node sequence (-want +got):\n%s", diff)
			}
			sum := 0
			for _, w := range weights {
				sum += w
			}
			for i, w := range weights {
				if want := n * w / sum; counts[i] != want {
					t.Errorf("node %d served %d of %d, want %d", i, counts[i], n, want)
				}
			}
		})
	}
}

// TestPriorityGroups: a lower-priority node takes traffic only when the
// higher group failed for the request.
func TestPriorityGroups(t *testing.T) {
	t.Parallel()
	low := textUpstream(t, "low")
	high := textUpstream(t, "high")
	dead := deadAddr(t)
	g := startGateway(t, routesYAML(
		obj{"id": "down", "uri": "/down", "upstream": obj{"nodes": nodeList(t,
			nodeSpec{addr: dead, weight: 1, priority: 1},
			nodeSpec{addr: low.Addr(), weight: 1, priority: 0})}},
		obj{"id": "up", "uri": "/up", "upstream": obj{"nodes": nodeList(t,
			nodeSpec{addr: high.Addr(), weight: 1, priority: 1},
			nodeSpec{addr: low.Addr(), weight: 100, priority: -1})}},
	), "")
	c := newClient(t)
	for i := range 6 {
		if r := do(t, c, "GET", g.url("/down"), "", nil, nil); r.status != 200 || r.body != "low" {
			t.Fatalf("/down %d: got %d %q, want the low-priority node", i, r.status, r.body)
		}
		if r := do(t, c, "GET", g.url("/up"), "", nil, nil); r.status != 200 || r.body != "high" {
			t.Fatalf("/up %d: got %d %q, want the high-priority node only", i, r.status, r.body)
		}
	}
}

// TestRetries: a refused connect moves to the next node; only when every
// attempt failed does the client get 502, with every attempt's status.
func TestRetries(t *testing.T) {
	t.Parallel()
	live := textUpstream(t, "live")
	failing := newHTTPUpstream(t, func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "origin failure", 500)
	})
	d1, d2, d3 := deadAddr(t), deadAddr(t), deadAddr(t)
	g := startGateway(t, routesYAML(
		obj{"id": "all-dead", "uri": "/all-dead", "upstream": upstreamOf(nodes(d1, d2, d3), nil)},
		obj{"id": "one-live", "uri": "/one-live", "upstream": upstreamOf(nodes(d1, d2, live.Addr()), nil)},
		obj{"id": "retries-1", "uri": "/retries-1", "upstream": upstreamOf(nodes(d1, d2, d3), obj{"retries": 1})},
		obj{"id": "then-500", "uri": "/then-500", "upstream": obj{"nodes": nodeList(t,
			nodeSpec{addr: d1, weight: 1, priority: 1}, nodeSpec{addr: failing.Addr(), weight: 1})}},
		obj{"id": "no-retry", "uri": "/no-retry", "upstream": obj{"nodes": nodeList(t,
			nodeSpec{addr: d1, weight: 1}, nodeSpec{addr: live.Addr(), weight: 1}), "retries": 0}},
	), "")
	c := newClient(t)
	r := do(t, c, "GET", g.url("/all-dead"), "", nil, nil)
	if diff := cmp.Diff([]string{"502", "502, 502, 502"}, []string{strconv.Itoa(r.status), r.header.Get("X-APISIX-Upstream-Status")}); diff != "" {
		t.Errorf("all dead (-want +got):\n%s", diff)
	}
	r = do(t, c, "GET", g.url("/retries-1"), "", nil, nil)
	if diff := cmp.Diff([]string{"502", "502, 502"}, []string{strconv.Itoa(r.status), r.header.Get("X-APISIX-Upstream-Status")}); diff != "" {
		t.Errorf("retries 1 (-want +got):\n%s", diff)
	}
	// An answer of the origin is passed on, 5xx included, with the
	// statuses of the attempts before it.
	r = do(t, c, "GET", g.url("/then-500"), "", nil, nil)
	if diff := cmp.Diff([]string{"500", "502, 500", "origin failure\n"}, []string{strconv.Itoa(r.status), r.header.Get("X-APISIX-Upstream-Status"), r.body}); diff != "" {
		t.Errorf("502 then 500 (-want +got):\n%s", diff)
	}
	for i := range 6 {
		r := do(t, c, "GET", g.url("/one-live"), "", nil, nil)
		if r.status != 200 || r.body != "live" || r.header.Get("X-APISIX-Upstream-Status") != "" {
			t.Fatalf("one live %d: got %d %q %q", i, r.status, r.body, r.header.Get("X-APISIX-Upstream-Status"))
		}
	}
	// retries 0: the dead node's turns fail, the live node's succeed.
	var got []string
	for range 4 {
		r := do(t, c, "GET", g.url("/no-retry"), "", nil, nil)
		got = append(got, strconv.Itoa(r.status)+" "+r.header.Get("X-APISIX-Upstream-Status"))
	}
	if diff := cmp.Diff([]string{"502 502", "200 ", "502 502", "200 "}, got); diff != "" {
		t.Errorf("retries 0 (-want +got):\n%s", diff)
	}
}

// blackholeAddr returns a loopback address whose listen queue is full, so
// that a connect to it hangs until the connecting side gives up.
func blackholeAddr(t testing.TB) string {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Listen(fd, 0); err != nil {
		t.Fatal(err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	addr := "127.0.0.1:" + strconv.Itoa(sa.(*syscall.SockaddrInet4).Port)
	for i := 0; ; i++ {
		if i == 8 {
			t.Skip("cannot fill a listen queue on this kernel")
		}
		c, err := net.DialTimeout("tcp", addr, 300*time.Millisecond)
		if err != nil {
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				return addr
			}
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
	}
}

// TestUpstreamErrors: connect timeout and read timeout answer 504,
// a refused connect 502, each with APISIX's page and upstream status.
func TestUpstreamErrors(t *testing.T) {
	t.Parallel()
	hole := blackholeAddr(t)
	silent := newRawUpstream(t, func(c *rawConn) {
		_, _, _ = c.ReadRequest()
		_, _ = c.BR.ReadByte() // until the gateway gives up
	})
	timeouts := obj{"connect": 0.5, "send": 0.5, "read": 0.5}
	g := startGateway(t, routesYAML(
		obj{"id": "hole", "uri": "/connect-timeout", "upstream": upstreamOf(nodes(hole), obj{"timeout": timeouts})},
		obj{"id": "silent", "uri": "/read-timeout", "upstream": upstreamOf(nodes(silent.Addr()), obj{"timeout": timeouts})},
		obj{"id": "route-timeout", "uri": "/route-timeout", "timeout": timeouts, "upstream": upstreamOf(nodes(silent.Addr()), nil)},
		obj{"id": "refused", "uri": "/refused", "upstream": upstreamOf(nodes(deadAddr(t)), nil)},
		obj{"id": "silent-twice", "uri": "/read-timeout-retried", "upstream": obj{"nodes": nodeList(t,
			nodeSpec{addr: silent.Addr(), weight: 1}, nodeSpec{addr: silent.Addr(), weight: 1, priority: -1}),
			"timeout": timeouts}},
	), "")
	page := func(title string) string {
		return "<html>\r\n<head><title>" + title + "</title></head>\r\n<body>\r\n<center><h1>" + title +
			"</h1></center>\r\n<hr><center>openresty</center>\r\n" +
			"<p><em>Powered by <a href=\"https://apisix.apache.org/\">APISIX</a>.</em></p></body>\r\n</html>\r\n"
	}
	tests := []struct {
		path     string
		status   int
		body     string
		min, max time.Duration
	}{
		{"/connect-timeout", 504, page("504 Gateway Time-out"), 400 * time.Millisecond, 3 * time.Second},
		{"/read-timeout", 504, page("504 Gateway Time-out"), 400 * time.Millisecond, 3 * time.Second},
		{"/route-timeout", 504, page("504 Gateway Time-out"), 400 * time.Millisecond, 3 * time.Second},
		{"/refused", 502, page("502 Bad Gateway"), 0, 2 * time.Second},
		{"/read-timeout-retried", 504, page("504 Gateway Time-out"), 900 * time.Millisecond, 4 * time.Second},
	}
	for _, tc := range tests {
		t.Run(tc.path[1:], func(t *testing.T) {
			t.Parallel()
			c := newClient(t)
			start := time.Now()
			r := do(t, c, "GET", g.url(tc.path), "", nil, nil)
			took := time.Since(start)
			type answer struct {
				Status                 int
				Body, CT, Upstream, Sv string
			}
			upstream := strconv.Itoa(tc.status)
			if strings.HasSuffix(tc.path, "-retried") {
				upstream += ", " + upstream
			}
			want := answer{tc.status, tc.body, "text/html; charset=utf-8", upstream, "APISIX/3.18.0"}
			got := answer{r.status, r.body, r.header.Get("Content-Type"), r.header.Get("X-APISIX-Upstream-Status"), r.header.Get("Server")}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			if took < tc.min || took > tc.max {
				t.Errorf("answered after %v, want within [%v, %v]", took, tc.min, tc.max)
			}
		})
	}
}

// TestPassHost: the Host the origin gets under pass_host pass, node and
// rewrite.
func TestPassHost(t *testing.T) {
	t.Parallel()
	up := newHTTPUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(r.Host))
	})
	g := startGateway(t, routesYAML(
		obj{"id": "default", "uri": "/default", "upstream": upstreamOf(nodes(up.Addr()), nil)},
		obj{"id": "pass", "uri": "/pass", "upstream": upstreamOf(nodes(up.Addr()), obj{"pass_host": "pass"})},
		obj{"id": "node", "uri": "/node", "upstream": upstreamOf(nodes(up.Addr()), obj{"pass_host": "node"})},
		obj{"id": "rewrite", "uri": "/rewrite", "upstream": upstreamOf(nodes(up.Addr()), obj{"pass_host": "rewrite", "upstream_host": "rewritten.example"})},
	), "")
	c := newClient(t)
	tests := []struct{ path, host, want string }{
		{"/default", "client.example:8080", "client.example:8080"},
		{"/pass", "client.example", "client.example"},
		{"/node", "client.example", up.Addr()},
		{"/rewrite", "client.example", "rewritten.example"},
	}
	for _, tc := range tests {
		r := do(t, c, "GET", g.url(tc.path), tc.host, nil, nil)
		if diff := cmp.Diff(tc.want, r.body); r.status != 200 || diff != "" {
			t.Errorf("%s: status %d, Host (-want +got):\n%s", tc.path, r.status, diff)
		}
	}
}

// TestCHashThroughBinary: a chash upstream keyed on a header, through the
// binary: each key's requests all reach one node, and the keys spread over
// the nodes.
func TestCHashThroughBinary(t *testing.T) {
	t.Parallel()
	var specs []nodeSpec
	for i := range 3 {
		specs = append(specs, nodeSpec{addr: textUpstream(t, strconv.Itoa(i)).Addr(), weight: 1})
	}
	g := startGateway(t, routesYAML(obj{"id": 1, "uri": "/ch", "upstream": obj{"type": "chash", "hash_on": "header",
		"key": "x-user", "nodes": nodeList(t, specs...)}}), "")
	c := newClient(t)
	owner := map[string]string{}
	used := map[string]bool{}
	for round := range 3 {
		for k := range 30 {
			key := "user-" + strconv.Itoa(k)
			r := do(t, c, "GET", g.url("/ch"), "", map[string]string{"X-User": key}, nil)
			if r.status != 200 {
				t.Fatalf("key %s: %d %q", key, r.status, r.body)
			}
			if round == 0 {
				owner[key] = r.body
				used[r.body] = true
			} else if owner[key] != r.body {
				t.Fatalf("key %s went to node %s, then to %s", key, owner[key], r.body)
			}
		}
	}
	if len(used) != 3 {
		t.Errorf("30 keys reached nodes %v, want all 3", used)
	}
}

// TestCHashDeadNodeThroughBinary: a chash upstream with a dead node,
// through the binary: the dead node's keys are retried on a live node,
// the same one for each key every time (the next along the ring), so
// that every request is answered; with retries 0 those keys fail, which
// shows that the dead node owns some of them.
func TestCHashDeadNodeThroughBinary(t *testing.T) {
	t.Parallel()
	specs := []nodeSpec{
		{addr: textUpstream(t, "0").Addr(), weight: 1},
		{addr: textUpstream(t, "1").Addr(), weight: 1},
		{addr: deadAddr(t), weight: 1},
	}
	up := func(retries int) obj {
		return obj{"type": "chash", "hash_on": "header", "key": "x-user", "retries": retries, "nodes": nodeList(t, specs...)}
	}
	g := startGateway(t, routesYAML(
		obj{"id": 1, "uri": "/ch", "upstream": up(2)},
		obj{"id": 2, "uri": "/once", "upstream": up(0)},
	), "")
	c := newClient(t)
	owner := map[string]string{}
	for round := range 3 {
		for k := range 30 {
			key := "user-" + strconv.Itoa(k)
			r := do(t, c, "GET", g.url("/ch"), "", map[string]string{"X-User": key}, nil)
			if r.status != 200 {
				t.Fatalf("key %s: %d %q (a dead node's key is retried)", key, r.status, r.body)
			}
			if round == 0 {
				owner[key] = r.body
			} else if owner[key] != r.body {
				t.Fatalf("key %s went to node %s, then to %s", key, owner[key], r.body)
			}
		}
	}
	dead := 0
	for k := range 30 {
		key := "user-" + strconv.Itoa(k)
		r := do(t, c, "GET", g.url("/once"), "", map[string]string{"X-User": key}, nil)
		switch {
		case r.status == 502:
			dead++
		case r.status != 200 || r.body != owner[key]:
			t.Fatalf("retries 0, key %s: %d %q, want 502 or node %s", key, r.status, r.body, owner[key])
		}
	}
	if dead == 0 || dead == 30 {
		t.Fatalf("retries 0: %d of 30 keys failed, want the dead node's share", dead)
	}
	t.Logf("the dead node owns %d of 30 keys", dead)
}
