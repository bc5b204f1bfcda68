package worker

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"coregate/plugins"
	"coregate/worker/router"
)

// reader is a test plugin that reads the request body (a
// plugins.BodyReader): its rewrite records the body it got, and answers
// 403 to the body its configuration names.
type reader struct{ rec *recorder }

type readerConf struct {
	Limit  int64  `json:"limit"`
	Deny   string `json:"deny"`
	Fields bool   `json:"fields"` // record every header field (RequestHeaderAt) too
	Log    bool   `json:"log"`    // record the body the log phase sees too
}

func (reader) Schema() []byte { return []byte(`{"type":"object"}`) }

func (reader) Check(raw json.RawMessage) error {
	var c readerConf
	return json.Unmarshal(raw, &c)
}

func (r reader) Build(raw json.RawMessage, _ plugins.Env) (plugins.Instance, error) {
	c := readerConf{Limit: 1 << 20}
	if err := json.Unmarshal(raw, &c); err != nil {
		return nil, err
	}
	return &readerInst{rec: r.rec, limit: c.Limit, deny: []byte(c.Deny), fields: c.Fields, log: c.Log}, nil
}

type readerInst struct {
	rec    *recorder
	limit  int64
	deny   []byte
	fields bool
	log    bool
}

func (in *readerInst) BodyLimit() int64 { return in.limit }

func (in *readerInst) Log(c plugins.Ctx) {
	if !in.log {
		return
	}
	b := c.RequestBody()
	s := append(in.rec.seen, "log="...)
	if b == nil {
		s = append(s, "nil"...)
	}
	in.rec.seen = append(append(s, b...), ';')
}

func (in *readerInst) Rewrite(c plugins.Ctx) {
	b := c.RequestBody()
	s := append(in.rec.seen, "body="...)
	if b == nil {
		s = append(s, "nil"...)
	}
	s = append(append(s, b...), ';')
	for i := 0; in.fields; i++ {
		name, value, ok := c.RequestHeaderAt(i)
		if !ok {
			break
		}
		s = append(append(append(append(s, name...), '='), value...), ';')
	}
	in.rec.seen = s
	if len(in.deny) > 0 && bytes.Equal(b, in.deny) {
		c.Exit(403, []byte("denied"))
	}
}

// readerHarness is a harness whose worker compiled routes and global
// rules with the probes and p-read (priority 2800), the body reader.
func readerHarness(t testing.TB, routes, globals []string, cfg Config) (*harness, *recorder) {
	t.Helper()
	rec := &recorder{events: make([]string, 0, 256), seen: make([]byte, 0, 4096)}
	table := []plugins.Entry{{Name: "p-hi", Priority: 3000}, {Name: "p-read", Priority: 2800}, {Name: "p-lo", Priority: 1000}}
	reg := plugins.NewRegistry(table)
	reg.Register("p-hi", probe{"p-hi", rec})
	reg.Register("p-read", reader{rec})
	reg.Register("p-lo", probe{"p-lo", rec})
	cfg.Listen = []string{"127.0.0.1:0"}
	w := New(cfg)
	snap, err := compile(pluginSpec(t, routes, globals, nil, nil), router.HostURI, upstreamEnv{}, pluginSet{reg: reg, env: w.cfg.Plugins}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	h := newHarnessSnap(t, w, snap)
	h.loop = h.cl.loop // for traffic, which runs the loop's queued work
	return h, rec
}

var readerRoutes = []string{
	`{"id":"r1","uri":"/read","plugins":{"p-read":{"limit":16,"deny":"no"},"p-lo":{}},"upstream":{"nodes":{"127.0.0.1:1980":1}}}`,
	`{"id":"r2","uri":"/plain","plugins":{"p-lo":{}},"upstream":{"nodes":{"127.0.0.1:1980":1}}}`,
}

// send delivers bytes from the client in one read, clearing what each side
// got before.
func (h *harness) send(s string) {
	h.cl.out, h.up.out = h.cl.out[:0], h.up.out[:0]
	h.cl.in = append(h.cl.in, s...)
	h.traffic(h.cl)
}

// TestReadBody: a route with a BodyReader has its request bodies read
// whole before the request phases: a Content-Length body or a chunked one,
// in one read or several; the plugin sees the data, and the upstream gets
// the request as the worker frames it, the chunked body re-framed.
func TestReadBody(t *testing.T) {
	h, rec := readerHarness(t, readerRoutes, nil, Config{})
	for _, tc := range []struct {
		name  string
		reads []string
		seen  string
		body  string // what follows the head upstream
	}{
		{"length, one read", []string{"POST /read HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello"}, "body=hello;", "hello"},
		{"length, three reads", []string{"POST /read HTTP/1.1\r\nHost: x\r\nContent-Length: 11\r\n\r\nhel", "lo wo", "rld"},
			"body=hello world;", "hello world"},
		{"head alone first", []string{"PUT /read HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n", "ab"}, "body=ab;", "ab"},
		{"chunked, one read", []string{"POST /read HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5;a=b\r\nhello\r\n6\r\n world\r\n0\r\nX-T: 1\r\n\r\n"},
			"body=hello world;", "b\r\nhello world\r\n0\r\n\r\n"},
		{"chunked, cut everywhere", []string{"POST /read HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5", "\r\nhel", "lo\r", "\n3\r\nabc\r\n", "0\r\n", "\r\n"},
			"body=helloabc;", "8\r\nhelloabc\r\n0\r\n\r\n"},
		{"chunked, empty", []string{"POST /read HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"}, "body=nil;", "0\r\n\r\n"},
		{"no body", []string{"GET /read HTTP/1.1\r\nHost: x\r\n\r\n"}, "body=nil;", ""},
	} {
		rec.reset()
		for i, r := range tc.reads {
			h.send(r)
			if i < len(tc.reads)-1 && (len(h.up.out) != 0 || len(rec.seen) != 0) {
				t.Fatalf("%s: read %d: the upstream got %q, the plugin saw %q before the body was whole", tc.name, i, h.up.out, rec.seen)
			}
		}
		if string(rec.seen) != tc.seen {
			t.Errorf("%s: the plugin saw %q, want %q", tc.name, rec.seen, tc.seen)
		}
		up := string(h.up.out)
		_, body, ok := strings.Cut(up, "\r\n\r\n")
		if !ok || body != tc.body {
			t.Errorf("%s: the upstream got\n%q\nwant the body %q", tc.name, up, tc.body)
		}
		if strings.Contains(tc.reads[0], "chunked") && !strings.Contains(up, "\r\nTransfer-Encoding: chunked\r\n") {
			t.Errorf("%s: not chunked upstream:\n%q", tc.name, up)
		}
		h.up.in = append(h.up.in, upOK...)
		h.traffic(h.up)
		if !bytes.HasPrefix(h.cl.out, []byte("HTTP/1.1 200 OK\r\n")) || h.cl.closed {
			t.Fatalf("%s: answer\n%q", tc.name, h.cl.out)
		}
	}

	// A route without a reader: the body streams as before, and the
	// phases run at once.
	rec.reset()
	h.send("POST /plain HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\n\r\nab")
	if !strings.HasSuffix(string(h.up.out), "\r\n\r\nab") || len(rec.events) == 0 {
		t.Fatalf("streamed: %q, phases %v", h.up.out, rec.events)
	}
	h.send("cd")
	h.up.in = append(h.up.in, upOK...)
	h.traffic(h.up)
	if string(h.up.out) != "cd" || !bytes.HasPrefix(h.cl.out, []byte("HTTP/1.1 200 OK\r\n")) {
		t.Fatalf("streamed rest: %q, answer %q", h.up.out, h.cl.out)
	}
}

// TestReadBodyAnswers: a body over the limit is answered 413 and one
// malformed 400, the upstream never contacted; a plugin that ends the
// request on the body is answered, the body dropped, and the next
// pipelined request served; Expect: 100-continue gets its 100 before the
// body; client_body_timeout ends the wait with 408.
func TestReadBodyAnswers(t *testing.T) {
	for _, tc := range []struct {
		name, req, status string
	}{
		{"length over the limit", "POST /read HTTP/1.1\r\nHost: x\r\nContent-Length: 17\r\n\r\n", "HTTP/1.1 413 "},
		{"chunked over the limit", "POST /read HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n10\r\n0123456789abcdef\r\n1\r\nx\r\n0\r\n\r\n", "HTTP/1.1 413 "},
		{"malformed chunk", "POST /read HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nab\r\n0\r\n\r\n", "HTTP/1.1 400 "},
	} {
		h, rec := readerHarness(t, readerRoutes, nil, Config{})
		h.send(tc.req)
		if !strings.HasPrefix(string(h.cl.out), tc.status) || !strings.Contains(string(h.cl.out), "\r\nConnection: close\r\n") ||
			len(h.up.out) != 0 || len(rec.seen) != 0 {
			t.Errorf("%s: answer %q, upstream %q, plugin %q", tc.name, h.cl.out, h.up.out, rec.seen)
		}
	}
	// client_max_body_size below the plugin's limit wins.
	h, _ := readerHarness(t, readerRoutes, nil, Config{MaxBodySize: 4})
	h.send("POST /read HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n")
	if !strings.HasPrefix(string(h.cl.out), "HTTP/1.1 413 ") || len(h.up.out) != 0 {
		t.Errorf("client_max_body_size: %q, upstream %q", h.cl.out, h.up.out)
	}

	h, rec := readerHarness(t, readerRoutes, nil, Config{})
	h.send("POST /read HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nno" + "GET /read HTTP/1.1\r\nHost: x\r\n\r\n")
	first, second, _ := strings.Cut(string(h.cl.out), "denied")
	if !strings.HasPrefix(first, "HTTP/1.1 403 Forbidden\r\n") || second != "" || len(h.up.out) == 0 || h.cl.closed {
		t.Fatalf("denied, then pipelined: answer %q, upstream %q", h.cl.out, h.up.out)
	}
	if d := cmp.Diff("body=no;body=nil;", string(rec.seen)); d != "" {
		t.Fatalf("seen (-want +got):\n%s", d)
	}
	h.up.in = append(h.up.in, upOK...)
	h.traffic(h.up)

	h, rec = readerHarness(t, readerRoutes, nil, Config{})
	h.send("POST /read HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nExpect: 100-continue\r\n\r\n")
	if string(h.cl.out) != "HTTP/1.1 100 Continue\r\n\r\n" {
		t.Fatalf("expect: %q", h.cl.out)
	}
	h.send("ok")
	if string(rec.seen) != "body=ok;" || !strings.HasSuffix(string(h.up.out), "\r\n\r\nok") || len(h.cl.out) != 0 {
		t.Fatalf("after 100: plugin %q, upstream %q, client %q", rec.seen, h.up.out, h.cl.out)
	}

	h, rec = readerHarness(t, readerRoutes, nil, Config{BodyTimeout: time.Second})
	h.send("POST /read HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhe")
	h.w.now += int64(time.Second)
	h.w.expireDeadlines()
	if !strings.HasPrefix(string(h.cl.out), "HTTP/1.1 408 ") || len(h.up.out) != 0 || len(rec.seen) != 0 {
		t.Fatalf("timeout: answer %q, upstream %q, plugin %q", h.cl.out, h.up.out, rec.seen)
	}
}

// TestReadBodyLog: the body read for the plugins is still the log
// phase's once the upstream answered (the loggers' include_req_body); the
// next request on the connection, without one, has none.
func TestReadBodyLog(t *testing.T) {
	routes := []string{`{"id":"r1","uri":"/read","plugins":{"p-read":{"log":true}},"upstream":{"nodes":{"127.0.0.1:1980":1}}}`}
	h, rec := readerHarness(t, routes, nil, Config{})
	for _, tc := range []struct{ req, seen string }{
		{"POST /read HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n3\r\nabc\r\n0\r\n\r\n", "body=helloabc;log=helloabc;"},
		{"GET /read HTTP/1.1\r\nHost: x\r\n\r\n", "body=nil;log=nil;"},
		{"PUT /read HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nok", "body=ok;log=ok;"},
	} {
		rec.reset()
		h.send(tc.req)
		h.up.in = append(h.up.in, upOK...)
		h.traffic(h.up)
		if !strings.HasPrefix(string(h.cl.out), "HTTP/1.1 200 ") || string(rec.seen) != tc.seen {
			t.Fatalf("%q: answer %q, plugin %q, want %q", tc.req, h.cl.out, rec.seen, tc.seen)
		}
	}
}

// TestReadBodyGlobal: a global rule's reader has the body read for every
// route, and for a request no route matched, before its 404.
func TestReadBodyGlobal(t *testing.T) {
	h, rec := readerHarness(t, readerRoutes[1:], []string{`{"id":"g","plugins":{"p-read":{}}}`}, Config{})
	h.send("POST /plain HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc")
	if string(rec.seen) != "body=abc;" || !strings.HasSuffix(string(h.up.out), "\r\n\r\nabc") {
		t.Fatalf("route: plugin %q, upstream %q", rec.seen, h.up.out)
	}
	h.up.in = append(h.up.in, upOK...)
	h.traffic(h.up)
	rec.reset()
	h.send("POST /none HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nxyz")
	if string(rec.seen) != "body=xyz;" || !strings.HasPrefix(string(h.cl.out), "HTTP/1.1 404 ") || h.cl.closed {
		t.Fatalf("no route: plugin %q, answer %q", rec.seen, h.cl.out)
	}
}

// TestRequestHeaderAtFields: RequestHeaderAt gives every request header field, names as
// sent, in order, repeated ones each, and ok false past the last, from
// the head kept while the body was read.
func TestRequestHeaderAtFields(t *testing.T) {
	h, rec := readerHarness(t, []string{
		`{"id":"r1","uri":"/read","plugins":{"p-read":{"fields":true}},"upstream":{"nodes":{"127.0.0.1:1980":1}}}`,
	}, nil, Config{})
	h.send("POST /read HTTP/1.1\r\nHost: x\r\nX-A: 1\r\nx-a: 2\r\nContent-Length: 2\r\n\r\n")
	h.send("ok")
	if want := "body=ok;Host=x;X-A=1;x-a=2;Content-Length=2;"; string(rec.seen) != want {
		t.Fatalf("seen %q, want %q", rec.seen, want)
	}
}
