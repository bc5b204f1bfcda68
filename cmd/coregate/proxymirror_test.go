package main

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"coregate/admin/adminapi"
	"coregate/plugins/proxymirror"
)

// TestAdminAPIProxyMirror configures proxy-mirror through the Admin API
// and sees its effect with a real client, a real upstream and a real
// mirror: a configuration APISIX refuses is refused with its message;
// the mirror gets a copy of each request (method, target with path and
// path_concat_mode, Host, fields) while the client gets the upstream's
// answer without waiting for a mirror that takes its time; a request with
// a body, by Content-Length or chunked, reaches the upstream and the mirror
// intact, the client's answer not waiting for the mirror; a body over
// MaxBody, Content-Length or chunked, gets the upstream's answer, the
// upstream all of it, the mirror nothing. The plugin is in the plugin
// list, with its schema.
func TestAdminAPIProxyMirror(t *testing.T) {
	t.Parallel()
	up := newHTTPUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		_, _ = w.Write([]byte("from upstream"))
		_, _ = w.Write(b)
	})
	var mu sync.Mutex
	var got []string
	mirror := newHTTPUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		b, _ := io.ReadAll(r.Body)
		s := r.Method + " " + r.RequestURI + " " + r.Host + " " + r.Header.Get("X-Trace")
		if len(b) > 0 {
			s += fmt.Sprintf(" cl=%d body=%s", r.ContentLength, b)
		}
		got = append(got, s)
		mu.Unlock()
		if r.URL.Query().Get("slow") != "" {
			time.Sleep(3 * time.Second)
		}
		_, _ = w.Write([]byte("from mirror"))
	})
	adminPort := freePort(t)
	g := startSupervisor(t, "", etcdConfig(adminPort, adminapi.LegacyAdminKey), 1)
	c := newClient(t)
	admin := legacyAdmin(adminPort)

	if r := admin.do(t, c, "GET", "plugins/list", ""); r.status != 200 || !strings.Contains(r.body, `"proxy-mirror"`) {
		t.Fatalf("plugins/list: %d %s", r.status, r.body)
	}
	if r := admin.do(t, c, "GET", "schema/plugins/proxy-mirror", ""); r.status != 200 || !strings.Contains(r.body, `"path_concat_mode"`) {
		t.Fatalf("schema/plugins/proxy-mirror: %d %s", r.status, r.body)
	}
	route := func(uri, conf string) string {
		return fmt.Sprintf(`{"uri":%q,"plugins":{"proxy-mirror":%s},"upstream":{"nodes":{%q:1}}}`, uri, conf, up.Addr())
	}
	if r := admin.do(t, c, "PUT", "routes/1", route("/hello", `{"host":"http://`+mirror.Addr()+`","sample_ratio":10}`)); r.status != 400 ||
		!strings.Contains(r.body, `failed to check the configuration of plugin proxy-mirror err: property \"sample_ratio\" validation failed: expected 10 to be at most 1`) {
		t.Fatalf("sample_ratio 10: %d %s", r.status, r.body)
	}
	for id, body := range map[string]string{
		"1": route("/hello", `{"host":"http://`+mirror.Addr()+`"}`),
		"2": route("/prefixed", `{"host":"http://`+mirror.Addr()+`","path":"/shadow","path_concat_mode":"prefix"}`),
	} {
		if r := admin.do(t, c, "PUT", "routes/"+id, body); r.status != 201 {
			t.Fatalf("PUT routes/%s: %d %s", id, r.status, r.body)
		}
	}
	// The two routes may reach the workers in two reloads: wait for the
	// one that holds both, or /hello may still be a 404.
	eventually(t, 10*time.Second, func() error {
		if !strings.Contains(g.out.String(), `msg="config reloaded" proc=supervisor routes=2 `) {
			return fmt.Errorf("no reload of the 2 routes logged")
		}
		if r := do(t, c, "GET", g.url("/prefixed"), "", nil, nil); r.status != 200 {
			return fmt.Errorf("GET /prefixed: %d", r.status)
		}
		return nil
	})
	mirrored := func(want string) {
		t.Helper()
		eventually(t, 10*time.Second, func() error {
			mu.Lock()
			defer mu.Unlock()
			for _, s := range got {
				if s == want {
					return nil
				}
			}
			return fmt.Errorf("the mirror got %q, not %q", got, want)
		})
	}
	start := time.Now()
	r := do(t, c, "GET", g.url("/hello?slow=1&a=b"), "app.example", map[string]string{"X-Trace": "t1"}, nil)
	if took := time.Since(start); r.status != 200 || r.body != "from upstream" || took > 2*time.Second {
		t.Fatalf("GET /hello: %d %q after %v, want the upstream's at once", r.status, r.body, took)
	}
	// The connection serves the next request while the mirror still
	// takes its time.
	start = time.Now()
	if r := do(t, c, "DELETE", g.url("/prefixed?x=1"), "app.example", map[string]string{"X-Trace": "t2"}, nil); r.status != 200 || time.Since(start) > 2*time.Second {
		t.Fatalf("DELETE /prefixed: %d after %v", r.status, time.Since(start))
	}
	mirrored("GET /hello?slow=1&a=b app.example t1")
	mirrored("DELETE /shadow/prefixed?x=1 app.example t2")
	// A body, by Content-Length and chunked: the upstream's answer at
	// once, the mirror taking its time, and the copy with the body.
	big := strings.Repeat("0123456789", 20000) // 200000 bytes, many reads
	for _, tc := range []struct {
		name string
		body io.Reader
		want string
	}{
		{"length", strings.NewReader("payload"), "payload"},
		{"chunked", io.MultiReader(strings.NewReader("chunked "), strings.NewReader("payload")), "chunked payload"},
		{"chunked-big", io.MultiReader(strings.NewReader(big[:1000]), strings.NewReader(big[1000:])), big},
	} {
		start := time.Now()
		r := do(t, c, "POST", g.url("/hello?slow=1&body="+tc.name), "app.example", map[string]string{"X-Trace": tc.name}, tc.body)
		if took := time.Since(start); r.status != 200 || r.body != "from upstream"+tc.want || took > 2*time.Second {
			t.Fatalf("POST %s: %d %.40q after %v, want the upstream's at once", tc.name, r.status, r.body, took)
		}
		mirrored(fmt.Sprintf("POST /hello?slow=1&body=%s app.example %s cl=%d body=%s", tc.name, tc.name, len(tc.want), tc.want))
	}
	// Past MaxBody (2 MiB): the upstream's answer, with all of the body,
	// as without the plugin; no copy.
	over := strings.Repeat("x", 2*proxymirror.MaxBody)
	for _, body := range []io.Reader{
		strings.NewReader(over),
		io.MultiReader(strings.NewReader(over[:1000]), strings.NewReader(over[1000:])), // chunked
	} {
		r := do(t, c, "POST", g.url("/hello?body=over"), "", nil, body)
		if r.status != 200 || r.body != "from upstream"+over {
			t.Fatalf("POST over MaxBody: %d, %d bytes", r.status, len(r.body))
		}
	}
	// A copy sent after those arrives; one of them, were it sent, would
	// be in by then too.
	if r := do(t, c, "GET", g.url("/hello?after=over"), "app.example", map[string]string{"X-Trace": "t3"}, nil); r.status != 200 {
		t.Fatalf("GET after: %d", r.status)
	}
	mirrored("GET /hello?after=over app.example t3")
	time.Sleep(200 * time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	for _, s := range got {
		if strings.Contains(s, "body=over") {
			t.Fatalf("a body over MaxBody copied")
		}
	}
}
