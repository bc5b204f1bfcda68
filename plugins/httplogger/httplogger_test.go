package httplogger

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"coregate/plugins"
	"coregate/plugins/internal/batch"
	"coregate/plugins/plugintest"
)

func build(t testing.TB, conf string) *plugins.Phases {
	t.Helper()
	return buildMD(t, conf, "")
}

func buildMD(t testing.TB, conf, md string) *plugins.Phases {
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
	// The instances hold their processor, which stops once they are
	// collected (TestProcessorsReleased): held for the test, as a
	// worker's snapshot holds them while it serves.
	t.Cleanup(func() { runtime.KeepAlive(&ph) })
	return &ph
}

// post is one request the log server got.
type post struct {
	body, contentType, auth, host string
	at                            time.Duration
}

// logServer is a real HTTP server on loopback that records the POSTs,
// answering 500 to the first fail of them.
type logServer struct {
	*httptest.Server
	mu    sync.Mutex
	start time.Time
	fail  int
	tries int
	posts []post
	got   chan struct{}
}

func newLogServer(t testing.TB, fail int) *logServer {
	s := &logServer{start: time.Now(), fail: fail, got: make(chan struct{}, 100)}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		defer s.mu.Unlock()
		s.tries++
		if s.fail > 0 {
			s.fail--
			http.Error(w, "down", http.StatusInternalServerError)
			return
		}
		s.posts = append(s.posts, post{string(b), r.Header.Get("Content-Type"), r.Header.Get("Authorization"), r.Host, time.Since(s.start)})
		select {
		case s.got <- struct{}{}:
		default: // a benchmark's POSTs, which nobody waits for
		}
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *logServer) wait(t *testing.T, n int) []post {
	t.Helper()
	for i := 0; i < n; i++ {
		select {
		case <-s.got:
		case <-time.After(10 * time.Second):
			t.Fatalf("POST %d of %d did not come", i+1, n)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]post(nil), s.posts...)
}

// TestCheck: APISIX's refusals; include_req_body and include_resp_body
// are taken.
func TestCheck(t *testing.T) {
	for _, tc := range []struct{ conf, want string }{
		{`{}`, `property "uri" is required`},
		{`{"uri":"127.0.0.1"}`, `property "uri" validation failed`},
		{`{"uri":"http://127.0.0.1","timeout":0}`, `property "timeout" validation failed: expected 0 to be at least 1`},
		{`{"uri":"http://127.0.0.1","concat_method":"csv"}`, `property "concat_method" validation failed: matches none of the enum values`},
		{`{"uri":"http://127.0.0.1","batch_max_size":0}`, `property "batch_max_size" validation failed: expected 0 to be at least 1`},
		{`{"uri":"http://127.0.0.1","include_req_body_expr":[["arg_a","=","1"]]}`, "failed to validate the 'include_req_body_expr' expression: invalid operator '='"},
		{`{"uri":"http://127.0.0.1","include_req_body":true,"max_req_body_bytes":0}`, `property "max_req_body_bytes" validation failed: expected 0 to be at least 1`},
		{`{"uri":"http://127.0.0.1","include_resp_body":true,"include_resp_body_expr":[["status","=","200"]]}`,
			"failed to validate the 'include_resp_body_expr' expression: invalid operator '='"},
		{`{"uri":"http://127.0.0.1","max_resp_body_bytes":0}`, `property "max_resp_body_bytes" validation failed: expected 0 to be at least 1`},
	} {
		err := plugins.Check(Name, json.RawMessage(tc.conf))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.conf, err, tc.want)
		}
	}
	for _, ok := range []string{`{"uri":"http://127.0.0.1","include_resp_body":true}`,
		`{"uri":"http://127.0.0.1","include_resp_body":true,"include_resp_body_expr":[["status","==",200]],"max_resp_body_bytes":10}`} {
		if err := plugins.Check(Name, json.RawMessage(ok)); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
}

// TestReqBody: include_req_body sends the request body, cut to
// max_req_body_bytes, as request.body, for the requests
// include_req_body_expr matches; only such a configuration makes the
// worker copy bodies (TeeLimit: max_req_body_bytes), and none reads them
// before the upstream (BodyLimit).
func TestReqBody(t *testing.T) {
	s := newLogServer(t, 0)
	if p := build(t, `{"uri":"`+s.URL+`","include_req_body_expr":[["arg_log","==","yes"]]}`); p.BodyLimit() != 0 || p.TeeLimit() != 0 {
		t.Fatalf("BodyLimit %d, TeeLimit %d without include_req_body", p.BodyLimit(), p.TeeLimit())
	}
	p := build(t, `{"uri":"`+s.URL+`","batch_max_size":3,"include_req_body":true,"include_req_body_expr":[["arg_log","==","yes"]],"max_req_body_bytes":5}`)
	if p.BodyLimit() != 0 || p.TeeLimit() != 5 {
		t.Fatalf("BodyLimit %d, TeeLimit %d, want 0 and 5", p.BodyLimit(), p.TeeLimit())
	}
	plugintest.Run(p, plugintest.NewCtx("POST", "/?log=yes").WithBody("0123456789"))
	plugintest.Run(p, plugintest.NewCtx("POST", "/?log=no").WithBody("0123456789"))
	plugintest.Run(p, plugintest.NewCtx("POST", "/?log=yes").WithBody(`{"k":"v"}`))
	var entries []struct {
		Request map[string]any `json:"request"`
	}
	if err := json.Unmarshal([]byte(s.wait(t, 1)[0].body), &entries); err != nil || len(entries) != 3 {
		t.Fatalf("entries %v: %v", entries, err)
	}
	for i, want := range []any{"01234", nil, `{"k":`} {
		if got := entries[i].Request["body"]; got != want {
			t.Errorf("entry %d: body %v, want %v", i, got, want)
		}
	}
}

// TestBatches: a full batch goes at once as a JSON array, with the
// Authorization header and the uri's host without its port as Host; the
// rest once no entry came for
// inactive_timeout.
func TestBatches(t *testing.T) {
	s := newLogServer(t, 0)
	p := build(t, `{"uri":"`+s.URL+`/log?x=1","auth_header":"Basic abc","batch_max_size":2,"inactive_timeout":1,"log_format":{"a":"$arg_a"}}`)
	for _, a := range []string{"1", "2", "3"} {
		plugintest.Run(p, plugintest.NewCtx("GET", "/?a="+a))
	}
	got := s.wait(t, 2)
	if got[0].body != `[{"a":"1","route_id":"1"},{"a":"2","route_id":"1"}]` || got[0].contentType != "application/json" || got[0].auth != "Basic abc" ||
		got[0].host != "127.0.0.1" {
		t.Errorf("first POST %+v", got[0])
	}
	if got[1].body != `[{"a":"3","route_id":"1"}]` {
		t.Errorf("second POST %+v", got[1])
	}
	if got[0].at > 800*time.Millisecond || got[1].at < 900*time.Millisecond || got[1].at > 3*time.Second {
		t.Errorf("POSTs at %v and %v: the full batch at once, the other after 1 s", got[0].at, got[1].at)
	}
}

// TestConcat: batch_max_size 1 sends each entry as one object; new_line
// joins a batch's entries with newlines, as text/plain; a request no
// route matched is "no-matched".
func TestConcat(t *testing.T) {
	s := newLogServer(t, 0)
	p := build(t, `{"uri":"`+s.URL+`","batch_max_size":1,"log_format":{"a":"$arg_a"}}`)
	plugintest.Run(p, plugintest.NewCtx("GET", "/?a=1"))
	if got := s.wait(t, 1); got[0].body != `{"a":"1","route_id":"1"}` {
		t.Errorf("single: %+v", got[0])
	}

	s2 := newLogServer(t, 0)
	p = build(t, `{"uri":"`+s2.URL+`","concat_method":"new_line","batch_max_size":2,"log_format":{"a":"$arg_a"}}`)
	plugintest.Run(p, plugintest.NewCtx("GET", "/?a=1"))
	plugintest.Run(p, plugintest.NewCtx("GET", "/?a=2").WithRoute(""))
	if got := s2.wait(t, 1); got[0].body != "{\"a\":\"1\",\"route_id\":\"1\"}\n{\"a\":\"2\",\"route_id\":\"no-matched\"}" || got[0].contentType != "text/plain" {
		t.Errorf("new_line: %+v", got[0])
	}
}

// TestRetries: while the server answers 500 the batch is sent again,
// retry_delay apart, and arrives once the server is back.
func TestRetries(t *testing.T) {
	s := newLogServer(t, 2)
	p := build(t, `{"uri":"`+s.URL+`","batch_max_size":1,"max_retry_count":2,"retry_delay":1,"log_format":{"a":"$arg_a"}}`)
	plugintest.Run(p, plugintest.NewCtx("GET", "/?a=1"))
	got := s.wait(t, 1)
	if got[0].body != `{"a":"1","route_id":"1"}` || s.tries != 3 || got[0].at < 1900*time.Millisecond {
		t.Errorf("POST %+v after %d tries, want it on the third, 2 s on", got[0], s.tries)
	}
}

// TestFullEntry: without log_format the entry is APISIX's default one.
func TestFullEntry(t *testing.T) {
	s := newLogServer(t, 0)
	p := build(t, `{"uri":"`+s.URL+`","batch_max_size":1}`)
	plugintest.Run(p, plugintest.NewCtx("GET", "/hello?a=1").WithHeader("Host", "h.test"))
	var m map[string]any
	if err := json.Unmarshal([]byte(s.wait(t, 1)[0].body), &m); err != nil {
		t.Fatal(err)
	}
	req, _ := m["request"].(map[string]any)
	if req["uri"] != "/hello?a=1" || req["method"] != "GET" || m["route_id"] != "1" || m["client_ip"] != "127.0.0.1" {
		t.Errorf("entry %v", m)
	}
}

// TestTLS: an https:// server's self-signed certificate is taken with
// ssl_verify false and refused with true (the batch then dropped after
// its tries).
func TestTLS(t *testing.T) {
	var mu sync.Mutex
	var bodies []string
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		bodies = append(bodies, r.URL.Path+" "+string(b))
		mu.Unlock()
	}))
	defer srv.Close()
	verify := build(t, `{"uri":"`+srv.URL+`/verify","ssl_verify":true,"batch_max_size":1,"log_format":{"a":"$arg_a"}}`)
	plain := build(t, `{"uri":"`+srv.URL+`/plain","batch_max_size":1,"log_format":{"a":"$arg_a"}}`)
	plugintest.Run(verify, plugintest.NewCtx("GET", "/?a=v"))
	plugintest.Run(plain, plugintest.NewCtx("GET", "/?a=p"))
	deadline := time.Now().Add(10 * time.Second)
	for {
		mu.Lock()
		n := len(bodies)
		mu.Unlock()
		if n > 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond) // the verified one, were it sent
	mu.Lock()
	defer mu.Unlock()
	if strings.Join(bodies, "|") != `/plain {"a":"p","route_id":"1"}` {
		t.Fatalf("the TLS server got %q, want only the unverified POST", bodies)
	}
	if _, _, failed := verify.Log[0].(*instance).p.Stats(); failed != 1 {
		t.Fatalf("the verified batch: %d failed, want 1", failed)
	}
}

// TestMetadata: the plugin metadata's log_format serves a configuration
// without one; its max_pending_entries bounds the entries waiting.
func TestMetadata(t *testing.T) {
	s := newLogServer(t, 0)
	p := buildMD(t, `{"uri":"`+s.URL+`/md","batch_max_size":1}`, `{"log_format":{"h":"$host"},"max_pending_entries":1}`)
	plugintest.Run(p, plugintest.NewCtx("GET", "/").WithHeader("Host", "m.test"))
	if got := s.wait(t, 1); got[0].body != `{"h":"m.test","route_id":"1"}` {
		t.Errorf("POST %+v", got[0])
	}

	stuck := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { <-stuck }))
	defer slow.Close()
	defer close(stuck) // before Close, which waits for the handlers
	p = buildMD(t, `{"uri":"`+slow.URL+`/md","batch_max_size":1,"timeout":30}`, `{"max_pending_entries":1}`)
	for range 3 {
		plugintest.Run(p, plugintest.NewCtx("GET", "/"))
	}
	if _, dropped, _ := p.Log[0].(*instance).p.Stats(); dropped != 2 {
		t.Errorf("dropped %d of 3 with one pending entry allowed, want 2", dropped)
	}
}

// TestRespBody: include_resp_body sends the start of the body the client
// got as response.body, max_resp_body_bytes of it, with the response's
// headers; include_resp_body_expr, where $status is the response's,
// leaves it out of the requests it does not select.
func TestRespBody(t *testing.T) {
	s := newLogServer(t, 0)
	p := build(t, `{"uri":"`+s.URL+`/log","batch_max_size":2,"include_resp_body":true,"max_resp_body_bytes":3,`+
		`"include_resp_body_expr":[["status","==","200"]]}`)
	if p.RespBodyLimit() != 3 {
		t.Errorf("RespBodyLimit %d, want 3", p.RespBodyLimit())
	}
	for _, status := range []int{200, 500} {
		c := plugintest.NewCtx("GET", "/").WithResponseHeader("X-Up", "u")
		c.UpstreamStatus, c.UpstreamBody = status, []byte("hello")
		plugintest.Run(p, c)
	}
	got := s.wait(t, 1)
	var entries []struct {
		Response map[string]any `json:"response"`
	}
	if err := json.Unmarshal([]byte(got[0].body), &entries); err != nil || len(entries) != 2 {
		t.Fatalf("POST %s: %v", got[0].body, err)
	}
	if r := entries[0].Response; r["body"] != "hel" || fmt.Sprint(r["headers"]) != "map[x-up:u]" {
		t.Errorf("200: response %v, want body hel and the headers", r)
	}
	if r := entries[1].Response; r["body"] != nil || r["status"] != float64(500) {
		t.Errorf("500: response %v, want no body", r)
	}
}

// TestProcessorsReleased: each configuration change (another uri, as an
// Admin API update brings) makes a processor; once the instances of the
// configuration before are dropped, its processor POSTs what it held and
// stops, so that N changes leave neither processors nor goroutines
// behind, and no entry queued before a change is lost.
func TestProcessorsReleased(t *testing.T) {
	s := newLogServer(t, 0)
	base, goroutines := batch.Open(), runtime.NumGoroutine()
	const changes = 10
	for i := range changes {
		// Batches that only a flush sends: the entry waits in the
		// processor when the configuration changes.
		conf := fmt.Sprintf(`{"uri":"%s/log/%d","batch_max_size":100,"inactive_timeout":3600,"buffer_duration":3600,"log_format":{"n":"$arg_n"}}`, s.URL, i)
		p, err := plugins.Default.BuildPhases(map[string]json.RawMessage{Name: json.RawMessage(conf)}, plugins.NewLocalEnv())
		if err != nil {
			t.Fatal(err)
		}
		plugintest.Run(&p, plugintest.NewCtx("GET", fmt.Sprintf("/?n=%d", i)))
	}
	deadline := time.Now().Add(10 * time.Second)
	for batch.Open() > base || processors.Len() > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d processors open (%d before), %d configurations held, after %d changes", batch.Open(), base, processors.Len(), changes)
		}
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
	var got []string
	for _, p := range s.wait(t, changes) {
		got = append(got, p.body)
	}
	slices.Sort(got)
	var want []string
	for i := range changes {
		want = append(want, fmt.Sprintf(`[{"n":"%d","route_id":"1"}]`, i))
	}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("POSTs %q, want %q", got, want)
	}
	// The HTTP clients' idle connections close with the processors'
	// senders, and the server's goroutines end with them.
	for n := runtime.NumGoroutine(); n > goroutines+4; n = runtime.NumGoroutine() {
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines after %d changes, %d before", n, changes, goroutines)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestDroppedMetric: the entries dropped are counted in DroppedMetric's
// series of the worker's metrics: queue_full when every pending entry is
// taken, send_failed when a batch is refused past its retries.
func TestDroppedMetric(t *testing.T) {
	refuse := newLogServer(t, 1000)
	stuck := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { <-stuck }))
	defer slow.Close()
	defer close(stuck)
	env := plugins.NewLocalEnv()
	env.Metadata = plugins.NewSettings(map[string]json.RawMessage{Name: json.RawMessage(`{"max_pending_entries":1}`)})
	for _, conf := range []string{
		`{"uri":"` + refuse.URL + `/m","batch_max_size":1,"max_retry_count":0}`,
		`{"uri":"` + slow.URL + `/m","batch_max_size":1,"timeout":30}`,
	} {
		ph, err := plugins.Default.BuildPhases(map[string]json.RawMessage{Name: json.RawMessage(conf)}, env)
		if err != nil {
			t.Fatal(err)
		}
		for range 3 {
			plugintest.Run(&ph, plugintest.NewCtx("GET", "/"))
			time.Sleep(100 * time.Millisecond) // the refused batch goes before the next
		}
	}
	queueFull, sendFailed := env.Metrics.Slot(DroppedMetric, "queue_full"), env.Metrics.Slot(DroppedMetric, "send_failed")
	waitUntil := time.Now().Add(10 * time.Second)
	for sendFailed.Load() != 3 || queueFull.Load() != 2 {
		if time.Now().After(waitUntil) {
			t.Fatalf("queue_full %d (want 2), send_failed %d (want 3)", queueFull.Load(), sendFailed.Load())
		}
		time.Sleep(10 * time.Millisecond)
	}
}
