package proxymirror

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"coregate/plugins"
	"coregate/plugins/plugintest"
)

func build(t testing.TB, conf string) (*plugins.Phases, *instance) {
	t.Helper()
	ph, err := plugins.Default.BuildPhases(map[string]json.RawMessage{Name: json.RawMessage(conf)}, plugins.NewLocalEnv())
	if err != nil {
		t.Fatal(err)
	}
	return &ph, ph.Rewrite[0].(*instance)
}

// TestCheck: proxy-mirror.t's refusals.
func TestCheck(t *testing.T) {
	const prefix = "failed to check the configuration of plugin proxy-mirror err: "
	for _, tc := range []struct{ conf, err string }{
		{`{"host":"http://127.0.0.1:1986"}`, ""},
		{`{"host":"https://[::1]:1986","path":"/a","path_concat_mode":"prefix","sample_ratio":0.5}`, ""},
		{`{"host":"http://127.0.0.1"}`, ""},
		{`{"host":"ftp://127.0.0.1:1999"}`, prefix + `property "host" validation failed: failed to match pattern`},
		{`{"host":"http://127.0.0.1::1999"}`, prefix + `property "host" validation failed`},
		{`{"host":"127.0.0.1:1999"}`, prefix + `property "host" validation failed`},
		{`{"host":"http://127.0.0.1:1999/invalid_uri"}`, prefix + `property "host" validation failed`},
		{`{"host":"http://127.0.0.1:1986","sample_ratio":10}`, prefix + `property "sample_ratio" validation failed: expected 10 to be at most 1`},
		{`{"host":"http://127.0.0.1:1986","path":"a"}`, prefix + `property "path" validation failed`},
		{`{"host":"http://127.0.0.1:1986","path":"/a?b"}`, prefix + `property "path" validation failed`},
		{`{"host":"http://127.0.0.1:1986","path_concat_mode":"x"}`, prefix + `property "path_concat_mode" validation failed: matches none of the enum values`},
		{`{}`, prefix + `property "host" is required`},
		{`{"host":"grpc://127.0.0.1:1986"}`, prefix + "host: grpc:// and grpcs:// mirrors are not supported yet"},
	} {
		err := plugins.Check(Name, json.RawMessage(tc.conf))
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("%s: %v", tc.conf, err)
		case tc.err != "" && (err == nil || !strings.HasPrefix(err.Error(), tc.err)):
			t.Errorf("%s: err = %v, want %q…", tc.conf, err, tc.err)
		}
	}
}

// take runs c through p with a queue of its own, without senders, and
// returns the job the request made (nil: none).
func take(t *testing.T, p *plugins.Phases, in *instance, c *plugintest.Ctx) *job {
	t.Helper()
	in.q = newQueue(1, 0)
	plugintest.Run(p, c)
	if c.Exited() || !c.Upstream {
		t.Fatal("the request did not go on")
	}
	select {
	case j := <-in.q.work:
		return j
	default:
		return nil
	}
}

// TestCopy: the copy's method, target (path and path_concat_mode, the
// query as an earlier plugin left it), Host and fields; a request's body,
// as the worker read it, is copied with it.
func TestCopy(t *testing.T) {
	for _, tc := range []struct{ conf, target, args, want string }{
		{`{"host":"http://127.0.0.1:1986"}`, "/hello?a=1&b=2", "", "http://127.0.0.1:1986/hello?a=1&b=2"},
		{`{"host":"http://127.0.0.1:1986"}`, "/hello", "", "http://127.0.0.1:1986/hello"},
		{`{"host":"http://127.0.0.1:1986","path":"/a"}`, "/hello?x=1", "", "http://127.0.0.1:1986/a?x=1"},
		{`{"host":"http://127.0.0.1:1986","path":"/a","path_concat_mode":"prefix"}`, "/hello?x=1", "", "http://127.0.0.1:1986/a/hello?x=1"},
		{`{"host":"https://m.example:8443"}`, "/hello?x=1", "y=2", "https://m.example:8443/hello?y=2"},
	} {
		p, in := build(t, tc.conf)
		c := plugintest.NewCtx("PUT", tc.target).WithHeader("Host", "app.example").WithHeader("X-A", "1").
			WithHeader("Connection", "keep-alive").WithHeader("x-a", "2").WithHeader("Content-Length", "0")
		if tc.args != "" {
			c.SetUpstreamURI([]byte("/hello?" + tc.args)) // as key-auth's hide_credentials, before
		}
		j := take(t, p, in, c)
		if j == nil {
			t.Fatalf("%s %s: no copy", tc.conf, tc.target)
		}
		if string(j.url) != tc.want || string(j.method) != "PUT" || string(j.host) != "app.example" ||
			string(j.fields) != "X-A\x001\x00x-a\x002\x00" {
			t.Errorf("%s %s: %s %s host %s fields %q, want %s", tc.conf, tc.target, j.method, j.url, j.host, j.fields, tc.want)
		}
	}
	p, in := build(t, `{"host":"http://127.0.0.1:1986"}`)
	if p.TeeLimit() != MaxBody || p.BodyLimit() != 0 {
		t.Fatalf("TeeLimit %d, BodyLimit %d, want %d and 0", p.TeeLimit(), p.BodyLimit(), MaxBody)
	}
	for _, h := range [][2]string{{"Content-Length", "7"}, {"Transfer-Encoding", "chunked"}} {
		// The body copied as it went upstream, or read whole by a
		// BodyReader of the route before the phases.
		for _, c := range []*plugintest.Ctx{
			plugintest.NewCtx("POST", "/hello").WithHeader(h[0], h[1]).WithTeeBody("payload"),
			plugintest.NewCtx("POST", "/hello").WithHeader(h[0], h[1]).WithBody("payload"),
		} {
			j := take(t, p, in, c)
			if j == nil || !j.hasBody || string(j.body) != "payload" || string(j.fields) != "" {
				t.Fatalf("%s: copy %+v", h, j)
			}
		}
	}
	// A body-less request after one with a body: none copied.
	in.q = newQueue(1, 0)
	j := in.q.take()
	j.body, j.hasBody = append(j.body, "stale"...), true
	in.q.free <- j
	plugintest.Run(p, plugintest.NewCtx("GET", "/hello"))
	if j := <-in.q.work; j.hasBody || len(j.body) != 0 {
		t.Fatalf("GET copied with body %q", j.body)
	}
}

// TestTee: a copy waits for its request's body, copied as it went
// upstream, in the log phase: sent with it when it is whole within
// MaxBody; not sent, and counted, when it was longer or cut short; not
// sent before the log phase; and the copies of two proxy-mirror
// instances of one request both wait, and both go.
func TestTee(t *testing.T) {
	p, in := build(t, `{"host":"http://127.0.0.1:1986"}`)
	in.q = newQueue(2, 0)
	c := plugintest.NewCtx("POST", "/hello").WithHeader("Content-Length", "7").WithTeeBody("payload")
	in.Rewrite(c)
	if len(in.q.work) != 0 {
		t.Fatal("a copy went before its body")
	}
	if v, ok := c.Kept(in.q); !ok || v == 0 {
		t.Fatalf("no job kept: %d %v", v, ok)
	}
	c.Upstream = true // the body went upstream, and was copied
	in.Log(c)
	if len(in.q.work) != 1 {
		t.Fatalf("%d copies sent", len(in.q.work))
	}
	if j := <-in.q.work; string(j.body) != "payload" || !j.hasBody {
		t.Fatalf("copy %+v", j)
	} else {
		in.q.free <- j
	}
	in.Log(c) // a second log phase (another instance's): nothing left
	if len(in.q.work) != 0 || len(in.q.free) != 2 {
		t.Fatalf("work %d, free %d", len(in.q.work), len(in.q.free))
	}

	long := strings.Repeat("x", MaxBody)
	for _, tc := range []struct {
		c                 *plugintest.Ctx
		tooLong, cutShort int64
	}{
		{plugintest.NewCtx("POST", "/").WithCutBody(long), 1, 0},
		{plugintest.NewCtx("POST", "/").WithCutBody("part"), 1, 1},
		{plugintest.NewCtx("POST", "/").WithTeeBody(long + "y"), 2, 1}, // whole, but past MaxBody (a logger's larger limit)
	} {
		plugintest.Run(p, tc.c)
		if len(in.q.work) != 0 || len(in.q.free) != 2 || in.q.tooLong.Load() != tc.tooLong || in.q.cutShort.Load() != tc.cutShort {
			t.Fatalf("work %d, free %d, tooLong %d, cutShort %d, want 0, 2, %d, %d",
				len(in.q.work), len(in.q.free), in.q.tooLong.Load(), in.q.cutShort.Load(), tc.tooLong, tc.cutShort)
		}
	}
	// Read whole before the phases (a BodyReader of the route) but past
	// MaxBody: not sent either.
	plugintest.Run(p, plugintest.NewCtx("POST", "/").WithBody(long+"y"))
	if len(in.q.work) != 0 || len(in.q.free) != 2 || in.q.tooLong.Load() != 3 {
		t.Fatalf("read past MaxBody: work %d, free %d, tooLong %d", len(in.q.work), len(in.q.free), in.q.tooLong.Load())
	}
	// Exactly MaxBody, whole: sent.
	plugintest.Run(p, plugintest.NewCtx("POST", "/").WithTeeBody(long))
	if j := <-in.q.work; len(j.body) != MaxBody {
		t.Fatalf("copy of %d bytes", len(j.body))
	} else {
		in.q.free <- j
	}

	// A global rule's proxy-mirror and the route's, on one request.
	_, other := build(t, `{"host":"http://127.0.0.1:1987"}`)
	other.q = in.q
	two := plugins.NewPhases([]plugins.Configured{{Entry: p.Plugins[0].Entry, Instance: in}, {Entry: p.Plugins[0].Entry, Instance: other}})
	plugintest.Run(&two, plugintest.NewCtx("PUT", "/two").WithTeeBody("both"))
	if len(in.q.work) != 2 {
		t.Fatalf("%d copies sent, want 2", len(in.q.work))
	}
	urls := []string{}
	for range 2 {
		j := <-in.q.work
		if string(j.body) != "both" || j.next != nil {
			t.Fatalf("copy %+v", j)
		}
		urls = append(urls, string(j.url))
		in.q.free <- j
	}
	if urls[0] == urls[1] {
		t.Fatalf("copies to %q", urls)
	}
}

// TestSampleRatio: about sample_ratio of the requests are copied.
func TestSampleRatio(t *testing.T) {
	p, in := build(t, `{"host":"http://127.0.0.1:1986","sample_ratio":0.5}`)
	in.q = newQueue(1, 0)
	n := 0
	for range 1000 {
		c := plugintest.NewCtx("GET", "/hello")
		plugintest.Run(p, c)
		select {
		case j := <-in.q.work:
			n++
			in.q.free <- j
		default:
		}
	}
	if n < 400 || n > 600 {
		t.Fatalf("%d of 1000 copied at 0.5", n)
	}
}

// TestFull: past the copies in flight, a request is not copied and goes
// on.
func TestFull(t *testing.T) {
	p, in := build(t, `{"host":"http://127.0.0.1:1986"}`)
	in.q = newQueue(1, 0)
	plugintest.Run(p, plugintest.NewCtx("GET", "/1"))
	c := plugintest.NewCtx("GET", "/2")
	plugintest.Run(p, c)
	if !c.Upstream || len(in.q.work) != 1 {
		t.Fatalf("upstream %v, %d in flight", c.Upstream, len(in.q.work))
	}
}

// TestSend: the senders send the copy to a real mirror, which gets the
// method, target, Host, fields and body (with its Content-Length).
func TestSend(t *testing.T) {
	var mu sync.Mutex
	var got []string
	mirror := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		b, _ := io.ReadAll(r.Body)
		got = append(got, r.Method+" "+r.RequestURI+" "+r.Host+" "+r.Header.Get("X-A")+" ua="+r.Header.Get("User-Agent")+
			" cl="+strconv.FormatInt(r.ContentLength, 10)+" te="+strings.Join(r.TransferEncoding, ",")+" body="+string(b))
		mu.Unlock()
		_, _ = w.Write([]byte("mirrored"))
	}))
	defer mirror.Close()
	p, in := build(t, `{"host":"`+mirror.URL+`"}`)
	in.q = newQueue(4, 2)
	plugintest.Run(p, plugintest.NewCtx("DELETE", "/item/1?force=1").WithHeader("Host", "app.example").WithHeader("X-A", "1"))
	deadline := time.Now().Add(10 * time.Second)
	for in.q.sent.Load() < 1 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	plugintest.Run(p, plugintest.NewCtx("POST", "/up").WithHeader("Host", "app.example").
		WithHeader("Transfer-Encoding", "chunked").WithBody("a\x00body"))
	for in.q.sent.Load() < 2 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 2 || got[0] != "DELETE /item/1?force=1 app.example 1 ua= cl=0 te= body=" ||
		got[1] != "POST /up app.example  ua= cl=6 te= body=a\x00body" {
		t.Fatalf("mirror got %q (sent %d, failed %d)", got, in.q.sent.Load(), in.q.failed.Load())
	}
}

// TestFieldWithNUL: a field whose value holds a NUL is left out of the
// copy, the others kept, and the copy is sent.
func TestFieldWithNUL(t *testing.T) {
	p, in := build(t, `{"host":"http://127.0.0.1:1986"}`)
	j := take(t, p, in, plugintest.NewCtx("GET", "/hello").WithHeader("X-Bad", "a\x00b").WithHeader("X-A", "1"))
	if j == nil || string(j.fields) != "X-A\x001\x00" {
		t.Fatalf("copy %+v", j)
	}
}
