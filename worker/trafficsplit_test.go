package worker

import (
	"fmt"
	"io"
	"net/http"
	"slices"
	"testing"
	"time"

	"coregate/admin/spec"
	"coregate/plugins"
	"coregate/worker/router"
)

// splitGet gets url: its status and body (an error is the test's).
func splitGet(t *testing.T, c *http.Client, url string, hdr ...string) (int, string) {
	t.Helper()
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestTrafficSplit proxies through a worker on real sockets with
// traffic-split: weights 1:2:3 over the route's own upstream, an
// upstream object and an inline upstream give exactly that share of 60
// requests; a match rule on a header sends only the requests it holds
// for to its upstream; a route with no upstream of its own goes to the
// one the plugin chooses; an upstream_id that is not there answers 500;
// and a change of the upstream object reaches the routes that name it.
func TestTrafficSplit(t *testing.T) {
	addrs, hits := idServers(t, 3, nil)
	up := func(id string, i int) string {
		return fmt.Sprintf(`{"id":"%s","type":"roundrobin","nodes":{"%s":1}}`, id, addrs[i])
	}
	inline := fmt.Sprintf(`{"type":"roundrobin","nodes":{"%s":1},"timeout":{"connect":2,"send":2,"read":2}}`, addrs[2])
	routes := []string{
		fmt.Sprintf(`{"id":"w","uri":"/w","upstream":{"nodes":{"%s":1}},"plugins":{"traffic-split":{"rules":[{"weighted_upstreams":[`+
			`{"weight":1},{"upstream_id":"u1","weight":2},{"upstream":%s,"weight":3}]}]}}}`, addrs[0], inline),
		fmt.Sprintf(`{"id":"m","uri":"/m","upstream":{"nodes":{"%s":1}},"plugins":{"traffic-split":{"rules":[{`+
			`"match":[{"vars":[["http_x-release","==","new"]]}],"weighted_upstreams":[{"upstream":%s}]}]}}}`, addrs[0], inline),
		`{"id":"n","uri":"/n","plugins":{"traffic-split":{"rules":[{"weighted_upstreams":[{"upstream_id":"u1"}]}]}}}`,
		`{"id":"x","uri":"/x","plugins":{"traffic-split":{"rules":[{"weighted_upstreams":[{"upstream_id":"nope"}]}]}}}`,
	}
	w, _ := runWorker(t, Config{}, testSpec(t, []string{up("u1", 1)}, routes...))
	base := "http://" + w.Addr().String()
	c := &http.Client{Timeout: 10 * time.Second}

	for range 60 {
		if st, _ := splitGet(t, c, base+"/w"); st != 200 {
			t.Fatalf("/w: %d", st)
		}
	}
	if got := [3]int{hits(0), hits(1), hits(2)}; got != [3]int{10, 20, 30} {
		t.Fatalf("weights 1:2:3 gave %v of 60 requests", got)
	}

	for i, tc := range []struct {
		hdr  []string
		want string
	}{{nil, "0"}, {[]string{"X-Release", "new"}, "2"}, {[]string{"X-Release", "old"}, "0"}} {
		if st, body := splitGet(t, c, base+"/m", tc.hdr...); st != 200 || body != tc.want {
			t.Errorf("/m %d %v: %d %q, want origin %s", i, tc.hdr, st, body, tc.want)
		}
	}
	if st, body := splitGet(t, c, base+"/n"); st != 200 || body != "1" {
		t.Errorf("/n, no upstream of its own: %d %q", st, body)
	}
	if st, body := splitGet(t, c, base+"/x"); st != 500 || body != "failed to fetch upstream info by upstream id: nope" {
		t.Errorf("/x, a missing upstream_id: %d %q", st, body)
	}

	// The upstream object changes: the routes naming it follow.
	if err := w.SetSpec(testSpec(t, []string{up("u1", 0)}, routes...), nil); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, body := splitGet(t, c, base+"/n")
		if body == "0" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/n after the upstream changed: origin %s", body)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestSplitCompile: a route whose traffic-split takes upstreams gets a
// variant per upstream, sharing one table; a build over the previous
// snapshot keeps an inline upstream of the same JSON (its balancer and
// pools) but builds the route again, so that its variants follow the
// upstream objects: a changed one gives a new variant, and a route without
// the plugin is still taken over.
func TestSplitCompile(t *testing.T) {
	routes := []string{
		`{"id":"s","uri":"/s","upstream":{"nodes":{"127.0.0.1:1980":1}},"plugins":{"traffic-split":{"rules":[{"weighted_upstreams":[` +
			`{"weight":1},{"upstream_id":"u1","weight":1},{"upstream":{"nodes":{"127.0.0.1:1982":1}},"weight":1}]}]}}}`,
		`{"id":"p","uri":"/p","upstream":{"nodes":{"127.0.0.1:1980":1}}}`,
	}
	// The same route objects in both Specs, as the store keeps them.
	rts := testSpec(t, nil, routes...).Routes
	env := plugins.NewLocalEnv()
	build := func(prev *Snapshot, u1 string) *Snapshot {
		t.Helper()
		sp := testSpec(t, []string{`{"id":"u1","nodes":{"` + u1 + `":1}}`})
		sp.Routes = rts
		s, err := compile(sp, router.HostURI, upstreamEnv{}, pluginSet{reg: plugins.Default, env: env}, prev, nil)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	s1 := build(nil, "127.0.0.1:1981")
	rs, rp := s1.routes.at(0), s1.routes.at(1)
	if len(rs.about.splits) != 2 || rp.about.splits != nil {
		t.Fatalf("variants: %d on the split route, %v on the plain one", len(rs.about.splits), rp.about.splits)
	}
	var inline *upstream
	for cu, v := range rs.about.splits {
		if v.up != cu || v.id() != "s" || len(v.about.splits) != 2 {
			t.Fatalf("a variant: up %p for %p, id %q, %d splits", v.up, cu, v.id(), len(v.about.splits))
		}
		if cu.nodes[0].addr == "127.0.0.1:1982" {
			inline = cu
		}
	}
	if inline == nil || !s1.hasNode("127.0.0.1:1982") || !s1.hasNode("127.0.0.1:1981") {
		t.Fatalf("the inline upstream or the nodes: %v", s1.nodes)
	}

	s2 := build(s1, "127.0.0.1:1983")
	if s2.routes.at(0) == rs || s2.routes.at(1) != rp {
		t.Fatalf("taken over: split route %v, plain route %v", s2.routes.at(0) == rs, s2.routes.at(1) == rp)
	}
	var addrs []string
	for cu := range s2.routes.at(0).about.splits {
		addrs = append(addrs, cu.nodes[0].addr)
		if cu.nodes[0].addr == "127.0.0.1:1982" && cu != inline {
			t.Fatal("the inline upstream was compiled again")
		}
	}
	if !slices.Contains(addrs, "127.0.0.1:1983") || slices.Contains(addrs, "127.0.0.1:1981") {
		t.Fatalf("variants after the upstream object changed: %v", addrs)
	}
}

// TestTrafficSplitCHash: the upstream traffic-split chooses is the
// balancer's too: an inline chash upstream on a header keeps each key on
// one of its origins and spreads the keys over both, where the route's
// own upstream is a third origin, never reached.
func TestTrafficSplitCHash(t *testing.T) {
	addrs, hits := idServers(t, 3, nil)
	w, _ := runWorker(t, Config{}, testSpec(t, nil, fmt.Sprintf(
		`{"id":"c","uri":"/c","upstream":{"nodes":{"%s":1}},"plugins":{"traffic-split":{"rules":[{"weighted_upstreams":[`+
			`{"upstream":{"type":"chash","hash_on":"header","key":"X-User","nodes":{"%s":1,"%s":1}}}]}]}}}`, addrs[2], addrs[0], addrs[1])))
	base := "http://" + w.Addr().String()
	c := &http.Client{Timeout: 10 * time.Second}
	owner := map[string]string{}
	for round := range 3 {
		for k := range 20 {
			user := fmt.Sprint("u", k)
			st, body := splitGet(t, c, base+"/c", "X-User", user)
			if st != 200 {
				t.Fatalf("/c: %d", st)
			}
			if round == 0 {
				owner[user] = body
			} else if owner[user] != body {
				t.Fatalf("%s went to origin %s, then %s", user, owner[user], body)
			}
		}
	}
	if hits(0) == 0 || hits(1) == 0 || hits(2) != 0 {
		t.Fatalf("origins hit %d, %d and the route's own %d", hits(0), hits(1), hits(2))
	}
}

// TestTrafficSplitGlobalRule: a global rule's traffic-split sends every
// route's requests to its upstream (each route has the variant), and a
// build over that snapshot builds the global rules and the routes again,
// so that the variants follow the upstream object.
func TestTrafficSplitGlobalRule(t *testing.T) {
	addrs, _ := idServers(t, 3, nil)
	mk := func(u1 int) *spec.Spec {
		s := testSpec(t, []string{fmt.Sprintf(`{"id":"u1","nodes":{"%s":1}}`, addrs[u1])},
			fmt.Sprintf(`{"id":"a","uri":"/a","upstream":{"nodes":{"%s":1}}}`, addrs[0]),
			`{"id":"b","uri":"/b","plugins":{}}`)
		s.GlobalRules = append(s.GlobalRules, mustDecode(t, spec.DecodeGlobalRule,
			`{"id":"g","plugins":{"traffic-split":{"rules":[{"match":[{"vars":[["http_x-split","==","1"]]}],"weighted_upstreams":[{"upstream_id":"u1"}]}]}}}`))
		if err := s.Check(); err != nil {
			t.Fatal(err)
		}
		return s
	}
	w, _ := runWorker(t, Config{}, mk(1))
	base := "http://" + w.Addr().String()
	c := &http.Client{Timeout: 10 * time.Second}
	for _, tc := range []struct {
		path, split string
		st          int
		body        string
	}{{"/a", "", 200, "0"}, {"/a", "1", 200, "1"}, {"/b", "1", 200, "1"}, {"/b", "", 503, ""}} {
		st, body := splitGet(t, c, base+tc.path, "X-Split", tc.split)
		if st != tc.st || (tc.body != "" && body != tc.body) {
			t.Errorf("%s split %q: %d %q, want %d %q", tc.path, tc.split, st, body, tc.st, tc.body)
		}
	}
	if err := w.SetSpec(mk(2), nil); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, body := splitGet(t, c, base+"/a", "X-Split", "1")
		if body == "2" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/a after the upstream changed: origin %s", body)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
