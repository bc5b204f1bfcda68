package filelogger

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"coregate/plugins"
	"coregate/plugins/plugintest"
)

func build(t testing.TB, conf string, md string) *plugins.Phases {
	t.Helper()
	if err := plugins.Check(Name, json.RawMessage(conf)); err != nil {
		t.Fatalf("%s: %v", conf, err)
	}
	env := plugins.NewLocalEnv()
	if md != "" {
		env.Metadata = plugins.NewSettings(map[string]json.RawMessage{Name: json.RawMessage(md)})
	}
	ph, err := plugins.Default.BuildPhases(map[string]json.RawMessage{Name: json.RawMessage(conf)}, env)
	if err != nil {
		t.Fatal(err)
	}
	return &ph
}

// lines waits, up to 5 s, for the file at path to hold n lines, and
// returns them decoded.
func lines(t *testing.T, path string, n int) []map[string]any {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		b, _ := os.ReadFile(path)
		ls := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
		if len(b) > 0 && len(ls) >= n {
			var out []map[string]any
			for _, l := range ls {
				var m map[string]any
				if err := json.Unmarshal([]byte(l), &m); err != nil {
					t.Fatalf("line %q: %v", l, err)
				}
				out = append(out, m)
			}
			if len(out) != n {
				t.Fatalf("%d lines, want %d:\n%s", len(out), n, b)
			}
			return out
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s holds %q, want %d lines", path, b, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func jsonOf(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestCheck: APISIX's refusals; include_req_body and include_resp_body
// are taken.
func TestCheck(t *testing.T) {
	for _, tc := range []struct{ conf, want string }{
		{`{"path":1}`, `property "path" validation failed: wrong type: expected string, got number`},
		{`{"path":"a","match":[["arg_a","=","1"]]}`, "failed to validate the 'match' expression: rule should be wrapped inside brackets"},
		{`{"path":"a","match":[[["arg_a","=","1"]]]}`, "failed to validate the 'match' expression: invalid operator '='"},
		{`{"path":"a","max_req_body_bytes":0}`, `property "max_req_body_bytes" validation failed: expected 0 to be at least 1`},
		{`{"path":"a","include_req_body":true,"include_req_body_expr":[["arg_a","=","1"]]}`, "failed to validate the 'include_req_body_expr' expression: invalid operator '='"},
		{`{"path":"a","include_req_body_expr":[]}`, `property "include_req_body_expr" validation failed: expect array to have at least 1 items`},
		{`{"path":"a","max_resp_body_bytes":0}`, `property "max_resp_body_bytes" validation failed: expected 0 to be at least 1`},
	} {
		err := plugins.Check(Name, json.RawMessage(tc.conf))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.conf, err, tc.want)
		}
	}
	for _, ok := range []string{`{"path":"file.log"}`, `{}`, `{"path":"a","match":[[["arg_a","==","1"]]],"log_format":{"h":"$host"}}`,
		`{"path":"a","include_req_body":true,"include_req_body_expr":[["arg_a","==","1"]],"max_req_body_bytes":5}`,
		`{"path":"a","include_resp_body":true,"include_resp_body_expr":[["status","==",200]],"max_resp_body_bytes":10}`} {
		if err := plugins.Check(Name, json.RawMessage(ok)); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
}

// TestNoPath: without a path in the configuration or the metadata the
// instance writes nothing (APISIX's error logged when built), rather
// than failing the routes' build.
func TestNoPath(t *testing.T) {
	ph, err := plugins.Default.BuildPhases(map[string]json.RawMessage{Name: json.RawMessage(`{}`)}, plugins.NewLocalEnv())
	if err != nil {
		t.Fatal(err)
	}
	in := ph.Log[0].(*instance)
	if in.w != nil {
		t.Fatal("an instance without a path has a writer")
	}
	plugintest.Run(&ph, plugintest.NewCtx("GET", "/"))
}

// TestFullLog: the default entry has get_full_log's members.
func TestFullLog(t *testing.T) {
	path := filepath.Join(t.TempDir(), "full.log")
	p := build(t, `{"path":"`+path+`"}`, "")
	c := plugintest.NewCtx("GET", "/hello?a=1&b=x%20y&a=2&flag&c=+").
		WithHeader("Host", "example.com").WithHeader("X-A", "1").WithHeader("x-a", "2").WithHeader("User-Agent", `q"t`).
		WithVar("upstream_addr", "127.0.0.1:1980").WithVar("scheme", "http").WithVar("server_port", "9080").
		WithResponseHeader("Content-Type", "text/plain").WithResponseHeader("Set-Cookie", "a").WithResponseHeader("set-cookie", "b")
	c.SetConsumer(&plugins.Consumer{Username: "jack"})
	c.Figures = plugins.Exchange{RequestTime: 30 * time.Millisecond, UpstreamTime: 20 * time.Millisecond, Proxied: true, RequestLength: 99, BytesSent: 150}
	plugintest.Run(p, c)
	m := lines(t, path, 1)[0]
	for k, want := range map[string]string{
		"request": `{"headers":{"host":"example.com","user-agent":"q\"t","x-a":["1","2"]},"method":"GET",` +
			`"querystring":{"a":["1","2"],"b":"x y","c":" ","flag":true},"size":99,"uri":"/hello?a=1\u0026b=x%20y\u0026a=2\u0026flag\u0026c=+",` +
			`"url":"http://example.com:9080/hello?a=1\u0026b=x%20y\u0026a=2\u0026flag\u0026c=+"}`,
		"response":         `{"headers":{"content-type":"text/plain","set-cookie":["a","b"]},"size":150,"status":200}`,
		"upstream":         `"127.0.0.1:1980"`,
		"route_id":         `"1"`,
		"consumer":         `{"username":"jack"}`,
		"client_ip":        `"127.0.0.1"`,
		"latency":          `30`,
		"upstream_latency": `20`,
		"apisix_latency":   `10`,
		"start_time":       jsonOf(t, float64((c.Clock-int64(30*time.Millisecond))/1e6)),
	} {
		if got := jsonOf(t, m[k]); got != want {
			t.Errorf("%s: %s, want %s", k, got, want)
		}
	}
	if srv := m["server"].(map[string]any); srv["version"] != "3.18.0" || srv["hostname"] == nil {
		t.Errorf("server %v", srv)
	}
	if _, ok := m["service_id"]; !ok {
		t.Error("no service_id")
	}
}

// TestReqBody: include_req_body puts the request body, cut to
// max_req_body_bytes, in request.body, where include_req_body_expr holds;
// only such a configuration makes the worker copy bodies (TeeLimit:
// max_req_body_bytes), and none reads them before the upstream
// (BodyLimit).
func TestReqBody(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "off.log")
	if p := build(t, `{"path":"`+path+`"}`, ""); p.BodyLimit() != 0 || p.TeeLimit() != 0 {
		t.Fatalf("BodyLimit %d, TeeLimit %d without include_req_body", p.BodyLimit(), p.TeeLimit())
	}
	p := build(t, `{"path":"`+path+`","include_req_body":false}`, "")
	if p.BodyLimit() != 0 || p.TeeLimit() != 0 {
		t.Fatalf("BodyLimit %d, TeeLimit %d with include_req_body false", p.BodyLimit(), p.TeeLimit())
	}
	plugintest.Run(p, plugintest.NewCtx("POST", "/").WithBody("payload"))
	if r := lines(t, path, 1)[0]["request"].(map[string]any); r["body"] != nil {
		t.Fatalf("include_req_body false: body %v", r["body"])
	}
	path = filepath.Join(dir, "on.log")
	p = build(t, `{"path":"`+path+`","include_req_body":true,"include_req_body_expr":[["arg_log","==","yes"]],"max_req_body_bytes":5}`, "")
	if p.BodyLimit() != 0 || p.TeeLimit() != 5 {
		t.Fatalf("BodyLimit %d, TeeLimit %d, want 0 and 5", p.BodyLimit(), p.TeeLimit())
	}
	plugintest.Run(p, plugintest.NewCtx("POST", "/?log=yes").WithBody("0123456789"))
	plugintest.Run(p, plugintest.NewCtx("POST", "/?log=no").WithBody("0123456789"))
	plugintest.Run(p, plugintest.NewCtx("GET", "/?log=yes"))
	// A copy cut short (the exchange ended before the body did) is
	// logged as far as it goes.
	plugintest.Run(p, plugintest.NewCtx("POST", "/?log=yes").WithCutBody("012"))
	ls := lines(t, path, 4)
	for i, want := range []any{"01234", nil, nil, "012"} {
		if got := ls[i]["request"].(map[string]any)["body"]; got != want {
			t.Errorf("line %d: body %v, want %v", i, got, want)
		}
	}
	if p := build(t, `{"path":"`+path+`","include_req_body":true,"max_req_body_bytes":2097152}`, ""); p.TeeLimit() != 2<<20 || p.BodyLimit() != 0 {
		t.Fatalf("TeeLimit %d, BodyLimit %d, want max_req_body_bytes and 0", p.TeeLimit(), p.BodyLimit())
	}
}

// TestCustomFormat: log_format's variables, constants and objects, then
// route_id; the metadata's log_format and path when the configuration has
// none; log_format_extra added to the default entry, never replacing a
// member.
func TestCustomFormat(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "custom.log")
	p := build(t, `{"path":"`+path+`","log_format":{"host":"$host","ip":"$remote_addr","k":"const","n":3,`+
		`"nest":{"m":"$request_method","s":"$status"},"absent":"$http_nope","route_id":"x","body":"$request_body"}}`, "")
	c := plugintest.NewCtx("POST", "/p").WithHeader("Host", "h.test")
	plugintest.Run(p, c)
	want := `{"absent":null,"body":null,"host":"h.test","ip":"127.0.0.1","k":"const","n":3,"nest":{"m":"POST","s":"200"},"route_id":"1"}`
	if got := jsonOf(t, lines(t, path, 1)[0]); got != want {
		t.Errorf("entry %s, want %s", got, want)
	}

	mdPath := filepath.Join(dir, "md.log")
	p = build(t, `{}`, `{"path":"`+mdPath+`","log_format":{"client_ip":"$remote_addr"}}`)
	plugintest.Run(p, plugintest.NewCtx("GET", "/"))
	if got := jsonOf(t, lines(t, mdPath, 1)[0]); got != `{"client_ip":"127.0.0.1","route_id":"1"}` {
		t.Errorf("metadata's format: %s", got)
	}

	extraPath := filepath.Join(dir, "extra.log")
	p = build(t, `{"path":"`+extraPath+`","log_format_extra":{"route_id":"$host","x_host":"$host"}}`, "")
	plugintest.Run(p, plugintest.NewCtx("GET", "/").WithHeader("Host", "e.test"))
	m := lines(t, extraPath, 1)[0]
	if m["x_host"] != "e.test" || m["route_id"] != "1" || m["request"] == nil {
		t.Errorf("extra: %v", m)
	}
}

// TestMatch: an entry is written only for the requests match selects.
func TestMatch(t *testing.T) {
	path := filepath.Join(t.TempDir(), "match.log")
	p := build(t, `{"path":"`+path+`","match":[[["arg_name","==","jack"]]],"log_format":{"a":"$arg_name"}}`, "")
	plugintest.Run(p, plugintest.NewCtx("GET", "/?name=rose"))
	plugintest.Run(p, plugintest.NewCtx("GET", "/?name=jack"))
	if got := jsonOf(t, lines(t, path, 1)); got != `[{"a":"jack","route_id":"1"}]` {
		t.Errorf("entries %s", got)
	}
}

// TestReopen: after the file is renamed and SIGUSR1 comes, the entries go
// to a new file of the path.
func TestReopen(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "r.log")
	p := build(t, `{"path":"`+path+`","log_format":{"a":"$arg_a"}}`, "")
	plugintest.Run(p, plugintest.NewCtx("GET", "/?a=1"))
	lines(t, path, 1)
	if err := os.Rename(path, path+".1"); err != nil {
		t.Fatal(err)
	}
	plugintest.Run(p, plugintest.NewCtx("GET", "/?a=2"))
	lines(t, path+".1", 2)
	if err := syscall.Kill(os.Getpid(), syscall.SIGUSR1); err != nil {
		t.Fatal(err)
	}
	// The signal reaches the writer at some point; an entry then goes
	// to the new file.
	deadline := time.Now().Add(5 * time.Second)
	for {
		plugintest.Run(p, plugintest.NewCtx("GET", "/?a=3"))
		if _, err := os.Stat(path); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no new file after SIGUSR1")
		}
		time.Sleep(20 * time.Millisecond)
	}
	b, _ := os.ReadFile(path)
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if l != `{"a":"3","route_id":"1"}` {
			t.Errorf("new file's entry %s", l)
		}
	}
}

// TestDropWhenFull: when every buffer is queued the entries are dropped
// and counted, and Log does not block.
func TestDropWhenFull(t *testing.T) {
	path := filepath.Join(t.TempDir(), "full.log")
	w := writerOf(path)
	var held []*buf
	for {
		b := w.take()
		if b == nil {
			break
		}
		held = append(held, b)
	}
	if len(held) != queueLen {
		t.Fatalf("took %d buffers, want %d", len(held), queueLen)
	}
	p := build(t, `{"path":"`+path+`","log_format":{"a":"$arg_a"}}`, "")
	done := make(chan struct{})
	go func() {
		plugintest.Run(p, plugintest.NewCtx("GET", "/?a=1"))
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Log blocked with every buffer out")
	}
	if d, _ := Dropped(path); d != 2 { // the probe above, and the request
		t.Fatalf("dropped %d, want 2", d)
	}
	if d := p.Log[0].(*instance).dropped.Load(); d != 1 { // the request, in DroppedMetric's series
		t.Fatalf("the worker's %s counts %d, want 1", DroppedMetric, d)
	}
	for _, b := range held {
		w.free <- b
	}
	plugintest.Run(p, plugintest.NewCtx("GET", "/?a=2"))
	lines(t, path, 1)
}

// TestRespBody: include_resp_body logs the start of the body the client
// got as response.body, max_resp_body_bytes of it, for the requests
// include_resp_body_expr selects (none for an empty body); the route reads that much of its
// responses (Phases.RespBodyLimit), nothing without include_resp_body or
// with a log_format, whose entry has no response.body.
func TestRespBody(t *testing.T) {
	path := filepath.Join(t.TempDir(), "body.log")
	p := build(t, `{"path":"`+path+`","include_resp_body":true,"max_resp_body_bytes":5,"include_resp_body_expr":[["arg_b","==","1"]]}`, "")
	if p.RespBodyLimit() != 5 {
		t.Errorf("RespBodyLimit %d, want 5", p.RespBodyLimit())
	}
	for _, target := range []string{"/?b=1", "/?b=0", "/?b=1&empty"} {
		c := plugintest.NewCtx("GET", target)
		if !strings.HasSuffix(target, "empty") {
			c.UpstreamBody = []byte(`say "hello"`)
		}
		plugintest.Run(p, c)
	}
	got := lines(t, path, 3)
	for i, want := range []any{`say "`, nil, nil} {
		resp := got[i]["response"].(map[string]any)
		if resp["body"] != want {
			t.Errorf("entry %d: response %v, want body %v", i, resp, want)
		}
	}
	for conf, want := range map[string]int64{
		`{"path":"` + path + `"}`:                                                     0,
		`{"path":"` + path + `","include_resp_body":true}`:                            524288,
		`{"path":"` + path + `","include_resp_body":true,"log_format":{"a":"$host"}}`: 0,
	} {
		if p := build(t, conf, ""); p.RespBodyLimit() != want {
			t.Errorf("%s: RespBodyLimit %d, want %d", conf, p.RespBodyLimit(), want)
		}
	}
}
