package worker

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"coregate/plugins"
	"coregate/worker/router"
)

// teer is a test plugin that copies the request body (a plugins.BodyTee):
// its rewrite records what RequestBody gives before the body went, its
// log phase the copy and whether it is whole.
type teer struct{ rec *recorder }

type teerConf struct {
	Limit int64 `json:"limit"`
}

func (teer) Schema() []byte { return []byte(`{"type":"object"}`) }

func (teer) Check(raw json.RawMessage) error {
	var c teerConf
	return json.Unmarshal(raw, &c)
}

func (r teer) Build(raw json.RawMessage, _ plugins.Env) (plugins.Instance, error) {
	c := teerConf{Limit: 16}
	if err := json.Unmarshal(raw, &c); err != nil {
		return nil, err
	}
	return &teerInst{rec: r.rec, limit: c.Limit}, nil
}

type teerInst struct {
	rec   *recorder
	limit int64
}

func (in *teerInst) TeeLimit() int64 { return in.limit }

func (in *teerInst) Rewrite(c plugins.Ctx) {
	s := append(in.rec.seen, "pre="...)
	if b := c.RequestBody(); b == nil {
		s = append(s, "nil"...)
	} else {
		s = append(s, b...)
	}
	in.rec.seen = append(s, ';')
}

func (in *teerInst) Log(c plugins.Ctx) {
	s := append(in.rec.seen, "tee="...)
	if b := c.RequestBody(); b == nil {
		s = append(s, "nil"...)
	} else {
		s = append(s, b...)
	}
	s = append(s, ",whole="...)
	s = strconv.AppendBool(s, c.RequestBodyWhole())
	in.rec.seen = append(s, ';')
}

// teeHarness is a harness whose worker compiled routes and global rules
// with the probes, p-read (priority 2800, the body reader) and p-tee
// (priority 2000, the body copier).
func teeHarness(t testing.TB, routes, globals []string, cfg Config) (*harness, *recorder) {
	t.Helper()
	rec := &recorder{events: make([]string, 0, 256), seen: make([]byte, 0, 4096)}
	table := []plugins.Entry{{Name: "p-hi", Priority: 3000}, {Name: "p-read", Priority: 2800}, {Name: "p-tee", Priority: 2000}, {Name: "p-lo", Priority: 1000}}
	reg := plugins.NewRegistry(table)
	reg.Register("p-hi", probe{"p-hi", rec})
	reg.Register("p-read", reader{rec})
	reg.Register("p-tee", teer{rec})
	reg.Register("p-lo", probe{"p-lo", rec})
	cfg.Listen = []string{"127.0.0.1:0"}
	w := New(cfg)
	snap, err := compile(pluginSpec(t, routes, globals, nil, nil), router.HostURI, upstreamEnv{}, pluginSet{reg: reg, env: w.cfg.Plugins}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	h := newHarnessSnap(t, w, snap)
	h.loop = h.cl.loop
	return h, rec
}

var teeRoutes = []string{
	`{"id":"r1","uri":"/tee","plugins":{"p-tee":{"limit":16}},"upstream":{"nodes":{"127.0.0.1:1980":1}}}`,
	`{"id":"r2","uri":"/plain","plugins":{"p-lo":{}},"upstream":{"nodes":{"127.0.0.1:1980":1}}}`,
	`{"id":"r3","uri":"/both","plugins":{"p-read":{"limit":64},"p-tee":{"limit":4}},"upstream":{"nodes":{"127.0.0.1:1980":1}}}`,
}

// TestTeeBody: a route with a BodyTee streams its request bodies to the
// upstream as a route without one does, each read forwarded as it comes,
// a body over the copy's limit included (no 413, no wait); the log phase
// gets the first limit bytes of the body, de-chunked, and whether that
// is the whole body. The request phases see none of it.
func TestTeeBody(t *testing.T) {
	h, rec := teeHarness(t, teeRoutes, nil, Config{})
	long := strings.Repeat("0123456789", 10)
	for _, tc := range []struct {
		name  string
		reads []string
		ups   []string // what the upstream got after each read, the head cut off the first
		seen  string
	}{
		{"length, one read", []string{"POST /tee HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello"}, []string{"hello"},
			"pre=nil;tee=hello,whole=true;"},
		{"length, three reads", []string{"POST /tee HTTP/1.1\r\nHost: x\r\nContent-Length: 11\r\n\r\nhel", "lo wo", "rld"},
			[]string{"hel", "lo wo", "rld"}, "pre=nil;tee=hello world,whole=true;"},
		{"length, exactly the limit", []string{"POST /tee HTTP/1.1\r\nHost: x\r\nContent-Length: 16\r\n\r\n0123456789", "abcdef"},
			[]string{"0123456789", "abcdef"}, "pre=nil;tee=0123456789abcdef,whole=true;"},
		{"length, over the limit", []string{"POST /tee HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n" + long[:50], long[50:]},
			[]string{long[:50], long[50:]}, "pre=nil;tee=" + long[:16] + ",whole=false;"},
		{"chunked, cut everywhere", []string{"POST /tee HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5", "\r\nhel", "lo\r", "\n3;x=y\r\nabc\r\n", "0\r\n", "\r\n"},
			[]string{"", "3\r\nhel\r\n", "2\r\nlo\r\n", "3\r\nabc\r\n", "", "0\r\n\r\n"}, "pre=nil;tee=helloabc,whole=true;"},
		{"chunked, over the limit", []string{"POST /tee HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n14\r\n" + long[:20] + "\r\n", "14\r\n" + long[20:40] + "\r\n0\r\n\r\n"},
			[]string{"14\r\n" + long[:20] + "\r\n", "14\r\n" + long[20:40] + "\r\n0\r\n\r\n"}, "pre=nil;tee=" + long[:16] + ",whole=false;"},
		{"chunked, empty", []string{"POST /tee HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"}, []string{"0\r\n\r\n"},
			"pre=nil;tee=nil,whole=true;"},
		{"no body", []string{"GET /tee HTTP/1.1\r\nHost: x\r\n\r\n"}, []string{""}, "pre=nil;tee=nil,whole=true;"},
	} {
		rec.reset()
		for i, r := range tc.reads {
			h.send(r)
			up := string(h.up.out)
			if i == 0 {
				var ok bool
				if _, up, ok = strings.Cut(up, "\r\n\r\n"); !ok {
					t.Fatalf("%s: read 0: the upstream got %q", tc.name, h.up.out)
				}
			}
			if up != tc.ups[i] {
				t.Fatalf("%s: read %d: the upstream got %q, want %q", tc.name, i, up, tc.ups[i])
			}
		}
		if string(rec.seen) != "pre=nil;" {
			t.Fatalf("%s: before the answer the plugin saw %q", tc.name, rec.seen)
		}
		h.up.in = append(h.up.in, upOK...)
		h.traffic(h.up)
		if !bytes.HasPrefix(h.cl.out, []byte("HTTP/1.1 200 OK\r\n")) || h.cl.closed {
			t.Fatalf("%s: answer\n%q", tc.name, h.cl.out)
		}
		if string(rec.seen) != tc.seen {
			t.Errorf("%s: the plugin saw %q, want %q", tc.name, rec.seen, tc.seen)
		}
		cc := h.cl.ctx.(*clientConn)
		if cc.reqBodyBuf != nil || cc.teeMax != 0 {
			t.Fatalf("%s: after the exchange: buffer %q, limit %d", tc.name, cc.reqBodyBuf, cc.teeMax)
		}
	}
	if n := len(h.w.bodyBufs); n != 1 {
		t.Fatalf("%d buffers pooled, want the one the exchanges took in turn", n)
	}

	// A route without a BodyTee copies nothing, and takes no buffer.
	rec.reset()
	h.send("POST /plain HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\n\r\nab")
	if cc := h.cl.ctx.(*clientConn); cc.teeMax != 0 || cc.reqBodyBuf != nil || len(h.w.bodyBufs) != 1 {
		t.Fatalf("plain route: limit %d, buffer %q, pool %d", cc.teeMax, cc.reqBodyBuf, len(h.w.bodyBufs))
	}
	h.send("cd")
	h.up.in = append(h.up.in, upOK...)
	h.traffic(h.up)
	if string(h.up.out) != "cd" || !bytes.HasPrefix(h.cl.out, []byte("HTTP/1.1 200 OK\r\n")) {
		t.Fatalf("plain route: %q, answer %q", h.up.out, h.cl.out)
	}
}

// TestTeeBodyWithReader: a route with a BodyReader and a BodyTee reads
// the body whole before the phases, under the reader's limit, and copies
// nothing: the log phase gets the body read, whole, past the tee's
// limit.
func TestTeeBodyWithReader(t *testing.T) {
	h, rec := teeHarness(t, teeRoutes, nil, Config{})
	h.send("POST /both HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n0123456789")
	if !strings.HasSuffix(string(h.up.out), "\r\n\r\n0123456789") {
		t.Fatalf("upstream %q", h.up.out)
	}
	if cc := h.cl.ctx.(*clientConn); cc.teeMax != 0 {
		t.Fatalf("copied too, limit %d", cc.teeMax)
	}
	h.up.in = append(h.up.in, upOK...)
	h.traffic(h.up)
	if want := "body=0123456789;pre=0123456789;tee=0123456789,whole=true;"; string(rec.seen) != want {
		t.Fatalf("seen %q, want %q", rec.seen, want)
	}
}

// TestTeeBodyCutShort: an exchange that ends before its body did (the
// client went away halfway, the upstream answered early) gives the log
// phase what was copied, not whole; a request a plugin answered before it
// went upstream, none.
func TestTeeBodyCutShort(t *testing.T) {
	h, rec := teeHarness(t, teeRoutes, nil, Config{})
	h.send("POST /tee HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nabc")
	_ = h.loop.Close(h.cl)
	if string(rec.seen) != "pre=nil;tee=abc,whole=false;" {
		t.Fatalf("client gone: seen %q", rec.seen)
	}

	h, rec = teeHarness(t, teeRoutes, nil, Config{})
	h.send("POST /tee HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nabc")
	h.up.in = append(h.up.in, upOK...)
	h.traffic(h.up)
	if !bytes.HasPrefix(h.cl.out, []byte("HTTP/1.1 200 OK\r\n")) || string(rec.seen) != "pre=nil;tee=abc,whole=false;" {
		t.Fatalf("early answer %q: seen %q", h.cl.out, rec.seen)
	}

	h, rec = teeHarness(t, []string{
		`{"id":"r1","uri":"/deny","plugins":{"p-hi":{"exit_at":"rewrite","exit":403},"p-tee":{}},"upstream":{"nodes":{"127.0.0.1:1980":1}}}`,
	}, nil, Config{})
	h.send("POST /deny HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc")
	if !bytes.HasPrefix(h.cl.out, []byte("HTTP/1.1 403 ")) || len(h.up.out) != 0 || string(rec.seen) != "tee=nil,whole=false;" {
		t.Fatalf("answered by a plugin %q: upstream %q, seen %q", h.cl.out, h.up.out, rec.seen)
	}
}

// TestTeeBodyGlobal: a global rule's BodyTee copies the bodies of every
// route's requests, up to the larger of its limit and the route's.
func TestTeeBodyGlobal(t *testing.T) {
	h, rec := teeHarness(t, teeRoutes, []string{`{"id":"g","plugins":{"p-tee":{"limit":3}}}`}, Config{})
	h.send("POST /plain HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello")
	h.up.in = append(h.up.in, upOK...)
	h.traffic(h.up)
	if string(rec.seen) != "pre=nil;tee=hel,whole=false;" {
		t.Fatalf("plain route: seen %q", rec.seen)
	}
	rec.reset()
	h.send("POST /tee HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello")
	h.up.in = append(h.up.in, upOK...)
	h.traffic(h.up)
	if string(rec.seen) != "pre=nil;pre=nil;tee=hello,whole=true;tee=hello,whole=true;" {
		t.Fatalf("tee route: seen %q", rec.seen)
	}
}

// TestTeeBodyReplayed: an attempt whose write failed before any of the
// body left the client buffer is replayed on the next node from the
// body's start, and the copy with it: the log phase gets the body once.
func TestTeeBodyReplayed(t *testing.T) {
	h, rec := teeHarness(t, []string{
		`{"id":"r1","uri":"/tee","plugins":{"p-tee":{}},"upstream":{"nodes":{"127.0.0.1:1980":100,"127.0.0.1:1981":1}}}`,
	}, nil, Config{})
	rt := h.w.snap.Load().routes.at(0)
	conns := map[string]*fakeConn{}
	for _, nd := range rt.up.nodes {
		p := h.w.poolFor(rt.up, nd, nil)
		conns[nd.addr] = p.idle[0].c.(*fakeConn)
	}
	first, second := conns["127.0.0.1:1980"], conns["127.0.0.1:1981"]
	if first == nil || second == nil {
		t.Fatalf("pooled: %v", conns)
	}
	first.failWrites = true
	rec.reset()
	h.cl.in = append(h.cl.in, "PUT /tee HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello"...)
	h.traffic(h.cl)
	if !first.closed || !strings.HasSuffix(string(second.out), "\r\n\r\nhello") {
		t.Fatalf("first closed %v; second got %q", first.closed, second.out)
	}
	second.in = append(second.in, upOK...)
	h.traffic(second)
	if !bytes.HasPrefix(h.cl.out, []byte("HTTP/1.1 200 OK\r\n")) || string(rec.seen) != "pre=nil;tee=hello,whole=true;" {
		t.Fatalf("answer %q, seen %q", h.cl.out, rec.seen)
	}
}

// TestTeeBodyConsumer: a BodyTee that only the consumer's configuration
// adds (file-logger's include_req_body) gets its copy: the limit is the
// phases' the request runs once the consumer is attached.
func TestTeeBodyConsumer(t *testing.T) {
	path := filepath.Join(t.TempDir(), "consumer.log")
	h := realHarness(t, []string{
		`{"id":"r1","uri":"/a","plugins":{"key-auth":{}},"upstream":{"nodes":{"127.0.0.1:1980":1}}}`,
	}, []string{`{"username":"jack","plugins":{"key-auth":{"key":"k1"},"file-logger":{"path":"` + path + `","include_req_body":true,"max_req_body_bytes":4}}}`}, nil)
	up, got := h.roundTrip([]byte("POST /a HTTP/1.1\r\nHost: h\r\napikey: k1\r\nContent-Length: 6\r\n\r\nabcdef"), []byte(upOK))
	if !bytes.HasPrefix(got, []byte("HTTP/1.1 200 ")) || !bytes.HasSuffix(up, []byte("\r\n\r\nabcdef")) {
		t.Fatalf("answer %q, upstream %q", got, up)
	}
	deadline := time.Now().Add(5 * time.Second)
	var b []byte
	for time.Now().Before(deadline) {
		if b, _ = os.ReadFile(path); bytes.HasSuffix(b, []byte("\n")) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	var e struct {
		Request struct {
			Body *string `json:"body"`
		} `json:"request"`
	}
	if err := json.Unmarshal(b, &e); err != nil || e.Request.Body == nil || *e.Request.Body != "abcd" {
		t.Fatalf("log %q: %v", b, err)
	}
}
