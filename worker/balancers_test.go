package worker

import (
	"fmt"
	"hash/crc32"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"coregate/admin/spec"
	"coregate/httpvar"
)

// testUpstream compiles an upstream given as APISIX JSON.
func testUpstream(t testing.TB, up string) *upstream {
	t.Helper()
	u, err := spec.DecodeUpstream([]byte(up))
	if err != nil {
		t.Fatal(err)
	}
	cu, err := compileUpstream(u, upstreamEnv{})
	if err != nil {
		t.Fatal(err)
	}
	return cu
}

// testBalancer compiles an upstream given as APISIX JSON and returns its
// balancer.
func testBalancer(t testing.TB, up string) *balancer {
	t.Helper()
	return testUpstream(t, up).bal
}

// nodesJSON is n nodes 127.0.0.1:10000+i of weight 1 (priority prio),
// as an APISIX nodes array.
func nodesJSON(from, n, prio int) []string {
	var out []string
	for i := from; i < from+n; i++ {
		out = append(out, fmt.Sprintf(`{"host":"127.0.0.1","port":%d,"weight":1,"priority":%d}`, 10000+i, prio))
	}
	return out
}

func chashUpstream(nodes []string) string {
	return `{"type":"chash","hash_on":"vars","key":"arg_k","nodes":[` + strings.Join(nodes, ",") + `]}`
}

// keyOwners maps each of n keys to the address of the node the ring gives
// it.
func keyOwners(b *balancer, n int) []string {
	out := make([]string, n)
	for k := range out {
		i := b.pick(0, crc32.ChecksumIEEE([]byte(fmt.Sprint("key-", k))), 0)
		out[k] = b.nodes[i].addr
	}
	return out
}

// TestCHashConsistency: a key goes to the same node every time, the keys
// spread over the nodes, and a node added or removed moves about 1/n of
// the keys, only to or from that node.
func TestCHashConsistency(t *testing.T) {
	const keys = 20000
	b10 := testBalancer(t, chashUpstream(nodesJSON(0, 10, 0)))
	own := keyOwners(b10, keys)
	if again := keyOwners(b10, keys); strings.Join(again, ",") != strings.Join(own, ",") {
		t.Fatal("the same keys went to other nodes the second time")
	}
	share := map[string]int{}
	for _, a := range own {
		share[a]++
	}
	if len(share) != 10 {
		t.Fatalf("keys on %d nodes of 10", len(share))
	}
	for a, n := range share {
		if f := float64(n) / keys; f < 0.05 || f > 0.16 {
			t.Errorf("node %s has %.3f of the keys, want about 0.1", a, f)
		}
	}

	// A node added: about 1/11 of the keys move, all to it.
	b11 := testBalancer(t, chashUpstream(nodesJSON(0, 11, 0)))
	moved := 0
	for k, a := range keyOwners(b11, keys) {
		if a != own[k] {
			moved++
			if a != "127.0.0.1:10010" {
				t.Fatalf("key %d moved from %s to %s, not to the new node", k, own[k], a)
			}
		}
	}
	if f := float64(moved) / keys; f < 0.045 || f > 0.16 {
		t.Errorf("a node added moved %.3f of the keys, want about 1/11", f)
	}
	t.Logf("node added: %.3f of the keys moved", float64(moved)/keys)

	// A node removed: its keys move, no other.
	b9 := testBalancer(t, chashUpstream(append(nodesJSON(0, 3, 0), nodesJSON(4, 6, 0)...)))
	moved = 0
	for k, a := range keyOwners(b9, keys) {
		switch {
		case own[k] == "127.0.0.1:10003":
			moved++
		case a != own[k]:
			t.Fatalf("key %d moved from %s to %s though its node stayed", k, own[k], a)
		}
	}
	if f := float64(moved) / keys; f < 0.05 || f > 0.16 {
		t.Errorf("a node removed moved %.3f of the keys, want about 1/10", f)
	}
}

// TestCHashWeights: a node of weight 3 gets about three times the keys of
// one of weight 1.
func TestCHashWeights(t *testing.T) {
	b := testBalancer(t, `{"type":"chash","key":"remote_addr","nodes":{"127.0.0.1:1":3,"127.0.0.1:2":1,"127.0.0.1:3":0}}`)
	share := map[string]int{}
	for _, a := range keyOwners(b, 20000) {
		share[a]++
	}
	if f := float64(share["127.0.0.1:1"]) / 20000; f < 0.65 || f > 0.85 {
		t.Errorf("weight 3 of 4 got %.3f of the keys", f)
	}
	if share["127.0.0.1:3"] != 0 {
		t.Errorf("a node of weight 0 got %d keys", share["127.0.0.1:3"])
	}
}

// TestCHashRetriesAndPriorities: a retry goes to the next node along the
// ring, the same one for the same key; the lower priority group only once
// every node of the higher one failed; then none.
func TestCHashRetriesAndPriorities(t *testing.T) {
	b := testBalancer(t, chashUpstream(append(nodesJSON(0, 3, 1), nodesJSON(3, 2, 0)...)))
	for k := 0; k < 200; k++ {
		key := crc32.ChecksumIEEE([]byte(fmt.Sprint(k)))
		var tried triedSet
		var order []int
		for {
			i := b.pick(tried, key, 0)
			if i < 0 {
				break
			}
			if again := b.pick(tried, key, 0); again != i {
				t.Fatalf("key %d: retry %d went to %d, then to %d", k, len(order), i, again)
			}
			order = append(order, i)
			tried.add(i)
		}
		if len(order) != 5 {
			t.Fatalf("key %d: tried %v, want all 5 nodes", k, order)
		}
		for n, i := range order {
			if high := i < 3; high != (n < 3) {
				t.Fatalf("key %d: tried %v, want the priority 1 nodes (0-2) first", k, order)
			}
		}
		// The first retry is the next node along the ring.
		r := &b.rings[0]
		p := r.find(key)
		for int(r.node[p]) == order[0] {
			p = (p + 1) % len(r.hash)
		}
		if int(r.node[p]) != order[1] {
			t.Fatalf("key %d: retried on %d, the ring's next node is %d", k, order[1], r.node[p])
		}
	}
}

// TestCHashRingAsResty: the ring's points are resty.chash's: the first
// point of node "127.0.0.1:80" (id "127.0.0.1\x0080") is the CRC32 of the
// id and four zero bytes, the second that of the id and the first's
// little-endian bytes.
func TestCHashRingAsResty(t *testing.T) {
	b := testBalancer(t, `{"type":"chash","key":"uri","nodes":{"127.0.0.1:80":1}}`)
	id := "127.0.0.1\x0080"
	p1 := crc32.ChecksumIEEE([]byte(id + "\x00\x00\x00\x00"))
	p2 := crc32.ChecksumIEEE([]byte(id + string([]byte{byte(p1), byte(p1 >> 8), byte(p1 >> 16), byte(p1 >> 24)})))
	r := &b.rings[0]
	if len(r.hash) != 160 {
		t.Fatalf("%d points, want 160", len(r.hash))
	}
	found := 0
	for _, h := range r.hash {
		if h == p1 || h == p2 {
			found++
		}
	}
	if found != 2 {
		t.Fatalf("points %08x and %08x: %d found", p1, p2, found)
	}
}

// TestHashKeyCompile: hash_on and key as compiled: the vars keys of the
// client's connection and the machine to their variables, mqtt_client_id
// to the remote_addr fallback; a vars key coregate does not know is
// refused, naming it.
func TestHashKeyCompile(t *testing.T) {
	for key, want := range map[string]httpvar.Kind{
		"remote_port": httpvar.RemotePort, "server_addr": httpvar.ServerAddr,
		"server_name": httpvar.ServerName, "hostname": httpvar.Hostname,
	} {
		k, err := compileHashKey("vars", key)
		if err != nil || k.on != hashVars || k.v.Kind != want {
			t.Errorf("key %s: %+v, %v; want variable kind %d", key, k, err, want)
		}
	}
	if k, err := compileHashKey("vars", "mqtt_client_id"); err != nil || k.v.Kind != httpvar.Unknown {
		t.Errorf("mqtt_client_id: %+v, %v; want the remote_addr fallback", k, err)
	}
	for _, key := range []string{"server_colour", "server_port_x"} {
		// The Admin API refuses them first (spec's pattern); the worker too.
		_, err := compileHashKey("vars", key)
		if err == nil || !strings.Contains(err.Error(), `"`+key+`"`) {
			t.Errorf("key %s: err = %v", key, err)
		}
	}
	tpl := parseKeyTemplate(`a$remote_addr-${ uri }\$x${arg_q ?? none}`)
	var got []string
	for _, p := range tpl {
		if p.name == "" {
			got = append(got, "lit:"+string(p.lit))
		} else {
			got = append(got, "var:"+p.name+"="+string(p.def))
		}
	}
	want := `lit:a var:remote_addr= lit:- var:uri= lit:\$x var:arg_q=none`
	if strings.Join(got, " ") != want {
		t.Errorf("template parts %q, want %q", strings.Join(got, " "), want)
	}
}

// TestLeastConn: the node with the fewest requests in flight per unit of
// weight; equal ones take turns; a slow node, whose requests stay in
// flight longer, gets fewer; priorities hold.
func TestLeastConn(t *testing.T) {
	b := testBalancer(t, `{"type":"least_conn","nodes":[`+strings.Join(nodesJSON(0, 3, 0), ",")+`]}`)
	// Sequential requests on an idle upstream go round.
	seen := map[int]int{}
	for k := 0; k < 30; k++ {
		i := b.pick(0, 0, 0)
		seen[i]++
		b.release(i, false, 0, 0)
	}
	if seen[0] != 10 || seen[1] != 10 || seen[2] != 10 {
		t.Errorf("sequential requests: %v, want 10 each", seen)
	}
	// Concurrent requests fill the nodes evenly.
	var held []int
	for k := 0; k < 9; k++ {
		held = append(held, b.pick(0, 0, 0))
	}
	if b.conns[0] != 3 || b.conns[1] != 3 || b.conns[2] != 3 {
		t.Errorf("9 in flight: %v, want 3 each", b.conns)
	}
	for _, i := range held {
		b.release(i, true, 0, 0)
	}

	// A simulation: a request every tick; node 0 answers in 20 ticks,
	// the others in 2.
	lat := []int{20, 2, 2}
	type inflight struct{ node, done int }
	var fl []inflight
	count := make([]int, 3)
	for tick := 0; tick < 3000; tick++ {
		kept := fl[:0]
		for _, f := range fl {
			if f.done <= tick {
				b.release(f.node, false, 0, 0)
			} else {
				kept = append(kept, f)
			}
		}
		fl = kept
		i := b.pick(0, 0, 0)
		count[i]++
		fl = append(fl, inflight{i, tick + lat[i]})
	}
	if count[0]*3 > count[1] {
		t.Errorf("least_conn with node 0 ten times slower: %v", count)
	}
	t.Logf("least_conn picks with node 0 slow: %v", count)

	// Weights: 3 to 1 in flight.
	w := testBalancer(t, `{"type":"least_conn","nodes":{"127.0.0.1:1":3,"127.0.0.1:2":1}}`)
	for k := 0; k < 8; k++ {
		w.pick(0, 0, 0)
	}
	if w.conns[0] != 6 || w.conns[1] != 2 {
		t.Errorf("weights 3:1, 8 in flight: %v", w.conns)
	}

	// Priorities: the lower group only once the higher one is tried.
	p := testBalancer(t, `{"type":"least_conn","nodes":[`+strings.Join(append(nodesJSON(0, 1, 0), nodesJSON(1, 2, 5)...), ",")+`]}`)
	var tried triedSet
	for k := 0; k < 20; k++ {
		if i := p.pick(0, 0, 0); i == 0 {
			t.Fatal("the priority 0 node was picked before the priority 5 ones failed")
		}
	}
	tried.add(1)
	tried.add(2)
	if i := p.pick(tried, 0, 0); i != 0 {
		t.Fatalf("both priority 5 nodes tried: picked %d, want 0", i)
	}
	tried.add(0)
	if i := p.pick(tried, 0, 0); i != -1 {
		t.Fatalf("all tried: picked %d", i)
	}
}

// TestEWMA: a node made slower gets less traffic, the latencies decaying
// as APISIX's do; a node not heard of for a while is tried again;
// retries skip the nodes tried, priorities hold.
func TestEWMA(t *testing.T) {
	b := testBalancer(t, `{"type":"ewma","nodes":[`+strings.Join(nodesJSON(0, 3, 0), ",")+`]}`)
	lat := []int64{int64(50 * time.Millisecond), int64(5 * time.Millisecond), int64(5 * time.Millisecond)}
	now := int64(time.Hour)
	count := make([]int, 3)
	for k := 0; k < 6000; k++ {
		now += int64(time.Millisecond)
		i := b.pick(0, 0, now)
		count[i]++
		b.release(i, false, lat[i], now)
	}
	if count[0]*5 > count[1] || count[0]*5 > count[2] {
		t.Errorf("ewma with node 0 ten times slower: %v", count)
	}
	t.Logf("ewma picks with node 0 slow: %v", count)

	// The decay: 10 s on, a latency weighs 1/e of what it did.
	s := ewmaStat{}
	s.observe(1, 0)
	if got := s.score(int64(10 * time.Second)); got < 0.36 || got > 0.37 {
		t.Errorf("score 10 s on: %v, want 1/e", got)
	}
	s.observe(0, int64(10*time.Second))
	if got := s.v; got < 0.36 || got > 0.37 {
		t.Errorf("a 0 s latency 10 s on: %v, want 1/e", got)
	}

	var tried triedSet
	tried.add(1)
	tried.add(2)
	for k := 0; k < 10; k++ {
		if i := b.pick(tried, 0, now); i != 0 {
			t.Fatalf("nodes 1 and 2 tried: picked %d", i)
		}
	}
	tried.add(0)
	if i := b.pick(tried, 0, now); i != -1 {
		t.Fatalf("all tried: picked %d", i)
	}
	p := testBalancer(t, `{"type":"ewma","nodes":[`+strings.Join(append(nodesJSON(0, 1, 0), nodesJSON(1, 2, 5)...), ",")+`]}`)
	for k := 0; k < 50; k++ {
		if i := p.pick(0, 0, now); i == 0 {
			t.Fatal("the priority 0 node was picked before the priority 5 ones failed")
		}
	}
}

// idServers starts n HTTP servers on loopback that answer their number,
// each after delay[i] (if given); hits counts their requests.
func idServers(t *testing.T, n int, delay []time.Duration) (addrs []string, hits func(i int) int) {
	t.Helper()
	var mu sync.Mutex
	count := make([]int, n)
	for i := 0; i < n; i++ {
		i := i
		s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			count[i]++
			mu.Unlock()
			if i < len(delay) {
				time.Sleep(delay[i])
			}
			fmt.Fprint(w, i)
		}))
		t.Cleanup(s.Close)
		addrs = append(addrs, hostPort(s.URL))
	}
	return addrs, func(i int) int {
		mu.Lock()
		defer mu.Unlock()
		return count[i]
	}
}

// getOK gets url and reports whether it answered 200 (an error is the
// test's).
func getOK(t *testing.T, c *http.Client, url string) bool {
	resp, err := c.Get(url)
	if err != nil {
		t.Error(err)
		return false
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Errorf("GET %s: %d %s", url, resp.StatusCode, b)
		return false
	}
	return true
}

// TestBalancersProxy proxies through a worker on real sockets: chash on
// an argument, a header and a combination keeps each key on one origin,
// spreads the keys, and retries a dead node's keys on the next node;
// least_conn sends fewer of concurrent requests to a slow origin.
func TestBalancersProxy(t *testing.T) {
	addrs, hits := idServers(t, 3, []time.Duration{0, 0, 50 * time.Millisecond})
	dead := unusedAddr(t)
	nodes := fmt.Sprintf(`{"%s":1,"%s":1,"%s":1}`, addrs[0], addrs[1], dead)
	w := startWorker(t, nil,
		`{"id":"1","uri":"/arg","upstream":{"type":"chash","key":"arg_k","nodes":`+nodes+`}}`,
		`{"id":"2","uri":"/hdr","upstream":{"type":"chash","hash_on":"header","key":"X-User","nodes":`+nodes+`}}`,
		`{"id":"3","uri":"/combo","upstream":{"type":"chash","hash_on":"vars_combinations","key":"$arg_a-$arg_b","nodes":`+nodes+`}}`,
		fmt.Sprintf(`{"id":"4","uri":"/lc","upstream":{"type":"least_conn","nodes":{"%s":1,"%s":1}}}`, addrs[0], addrs[2]),
	)
	base := "http://" + w.Addr().String()
	c := &http.Client{Timeout: 10 * time.Second}
	for _, tc := range []struct {
		path string
		req  func(k int) *http.Request
	}{
		{"/arg", func(k int) *http.Request {
			r, _ := http.NewRequest("GET", fmt.Sprintf("%s/arg?k=%d", base, k), nil)
			return r
		}},
		{"/hdr", func(k int) *http.Request {
			r, _ := http.NewRequest("GET", base+"/hdr", nil)
			r.Header.Set("X-User", fmt.Sprint("u", k))
			return r
		}},
		{"/combo", func(k int) *http.Request {
			r, _ := http.NewRequest("GET", fmt.Sprintf("%s/combo?a=%d&b=x", base, k), nil)
			return r
		}},
	} {
		owner := map[int]string{}
		spread := map[string]int{}
		for round := 0; round < 3; round++ {
			for k := 0; k < 40; k++ {
				resp, err := c.Do(tc.req(k))
				if err != nil {
					t.Fatal(err)
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					t.Fatalf("%s key %d: %d (the dead node's keys are retried)", tc.path, k, resp.StatusCode)
				}
				if o, ok := owner[k]; ok && o != string(b) {
					t.Fatalf("%s key %d: answered by %s, then by %s", tc.path, k, o, b)
				}
				owner[k] = string(b)
				if round == 0 {
					spread[string(b)]++
				}
			}
		}
		if spread["0"] < 5 || spread["1"] < 5 {
			t.Errorf("%s: 40 keys spread %v", tc.path, spread)
		}
	}

	// least_conn: 8 clients at once for 1 s; origin 2 takes 50 ms.
	before0, before2 := hits(0), hits(2)
	var wg sync.WaitGroup
	deadline := time.Now().Add(time.Second)
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cl := &http.Client{Timeout: 10 * time.Second}
			for n := 0; n < 2000 && time.Now().Before(deadline); n++ {
				if !getOK(t, cl, base+"/lc") {
					return
				}
			}
		}()
	}
	wg.Wait()
	fast, slow := hits(0)-before0, hits(2)-before2
	t.Logf("least_conn: fast origin %d, slow origin %d", fast, slow)
	if slow*3 > fast {
		t.Errorf("least_conn: the slow origin got %d requests, the fast one %d", slow, fast)
	}
}
