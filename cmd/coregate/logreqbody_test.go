package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"coregate/admin/adminapi"
)

// TestAdminAPILoggersReqBody runs file-logger and http-logger with
// include_req_body through the binary, configured through the Admin API:
// a body sent with a Content-Length and a chunked one, short or of 2 MiB,
// all reach the upstream whole, with its answer, and the log entries'
// request.body, cut to max_req_body_bytes, where include_req_body_expr
// holds; none where it does not.
func TestAdminAPILoggersReqBody(t *testing.T) {
	t.Parallel()
	up := newHTTPUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		_, _ = w.Write(b)
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	sink := &logSink{}
	serveLogSink(t, ln, sink)
	path := filepath.Join(t.TempDir(), "body.log")
	adminPort := freePort(t)
	g := startSupervisor(t, "", etcdConfig(adminPort, adminapi.LegacyAdminKey), 1)
	c := newClient(t)
	admin := legacyAdmin(adminPort)
	for id, plugin := range map[string]string{
		"file": `"file-logger":{"path":"` + path + `","include_req_body":true,"include_req_body_expr":[["arg_log","==","yes"]],"max_req_body_bytes":12}`,
		"http": `"http-logger":{"uri":"http://` + ln.Addr().String() + `/log","batch_max_size":1,"include_req_body":true,"max_req_body_bytes":12}`,
	} {
		body := fmt.Sprintf(`{"uri":"/%s","plugins":{%s},"upstream":{"nodes":{%q:1}}}`, id, plugin, up.Addr())
		if r := admin.do(t, c, "PUT", "routes/"+id, body); r.status != 201 {
			t.Fatalf("PUT routes/%s: %d %s", id, r.status, r.body)
		}
	}
	eventually(t, 10*time.Second, func() error {
		if r := do(t, c, "GET", g.url("/file?log=no&warm=1"), "", nil, nil); r.status != 200 {
			return fmt.Errorf("GET /file: %d", r.status)
		}
		if r := do(t, c, "GET", g.url("/http?warm=1"), "", nil, nil); r.status != 200 {
			return fmt.Errorf("GET /http: %d", r.status)
		}
		return nil
	})
	const payload = "0123456789abcdefghij"
	big := payload + strings.Repeat("z", 2<<20)
	bodies := map[string]func() io.Reader{
		"length": func() io.Reader { return strings.NewReader(payload) },
		"chunked": func() io.Reader {
			return io.MultiReader(strings.NewReader(payload[:7]), strings.NewReader(payload[7:]))
		},
		// 2 MiB past the payload: the upstream gets all of it, as
		// without the loggers, and the log its first bytes.
		"big-length": func() io.Reader { return strings.NewReader(big) },
		"big-chunked": func() io.Reader {
			return io.MultiReader(strings.NewReader(big[:7]), strings.NewReader(big[7:]))
		},
	}
	for name, body := range bodies {
		want := payload
		if strings.HasPrefix(name, "big") {
			want = big
		}
		for _, target := range []string{"/file?log=yes&b=yes-" + name, "/file?log=no&b=no-" + name, "/http?b=" + name} {
			if r := do(t, c, "POST", g.url(target), "", nil, body()); r.status != 200 || r.body != want {
				t.Fatalf("POST %s: %d, %d bytes %.40q", target, r.status, len(r.body), r.body)
			}
		}
	}
	for name := range bodies {
		for _, tc := range []struct{ mark, want string }{
			{"b=yes-" + name, payload[:12]},
			{"b=no-" + name, ""},
		} {
			e, _ := fileEntry(t, path, tc.mark)
			req, _ := e["request"].(map[string]any)
			if got, _ := req["body"].(string); got != tc.want {
				t.Errorf("file-logger %s: request.body %q, want %q", tc.mark, got, tc.want)
			}
		}
	}
	eventually(t, 10*time.Second, func() error {
		posts, _ := sink.waitPosts(t, 1)
		for name := range bodies {
			found := false
			for _, p := range posts {
				var entries []struct {
					Request struct {
						URI  string  `json:"uri"`
						Body *string `json:"body"`
					} `json:"request"`
				}
				p = strings.TrimPrefix(p, " ")
				if strings.HasPrefix(p, "{") {
					p = "[" + p + "]" // a batch of one is sent as the entry alone
				}
				if err := json.Unmarshal([]byte(p), &entries); err != nil {
					return fmt.Errorf("POST %q: %v", p, err)
				}
				for _, e := range entries {
					if e.Request.URI == "/http?b="+name {
						if e.Request.Body == nil || *e.Request.Body != payload[:12] {
							return fmt.Errorf("http-logger %s: request.body %v", name, e.Request.Body)
						}
						found = true
					}
				}
			}
			if !found {
				return fmt.Errorf("no http-logger entry for %s in %q", name, posts)
			}
		}
		return nil
	})
}
