package main

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"coregate/admin/adminapi"
)

// TestAdminAPIResponseRewrite configures response-rewrite through the
// Admin API (stored in etcd) and sees its effect with a real client and a
// real upstream: a configuration APISIX refuses is refused with its
// message; the status, body and headers of the upstream's answer are
// replaced (the worker frames the new body); filters rewrite a body that
// comes in pieces, and a gzip one, sent plain; vars limit the rewrite to
// the upstream's 500s; the gateway's own 502 page is rewritten too; an
// HTTP/1.0 client gets the new body delimited by the close. The plugin is
// in the plugin list, with its schema.
func TestAdminAPIResponseRewrite(t *testing.T) {
	t.Parallel()
	up := newHTTPUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("ETag", `"v1"`)
		w.Header().Set("X-Up", "1")
		switch r.URL.Path {
		case "/empty":
			w.Header().Set("Content-Length", "0")
			return
		case "/vars":
			if r.URL.Query().Get("fail") != "" {
				w.WriteHeader(500)
			}
		}
		if r.URL.Query().Get("gz") != "" {
			var z bytes.Buffer
			zw := gzip.NewWriter(&z)
			_, _ = zw.Write([]byte("hello world"))
			_ = zw.Close()
			w.Header().Set("Content-Encoding", "gzip")
			_, _ = w.Write(z.Bytes())
			return
		}
		// Two pieces, flushed apart: the upstream's body is chunked.
		_, _ = w.Write([]byte("hello "))
		w.(http.Flusher).Flush()
		_, _ = w.Write([]byte("world"))
	})
	adminPort := freePort(t)
	g := startSupervisor(t, "", etcdConfig(adminPort, adminapi.LegacyAdminKey), 1)
	c := newClient(t)
	admin := legacyAdmin(adminPort)

	if r := admin.do(t, c, "GET", "plugins/list", ""); r.status != 200 || !strings.Contains(r.body, `"response-rewrite"`) {
		t.Fatalf("plugins/list: %d %s", r.status, r.body)
	}
	if r := admin.do(t, c, "GET", "schema/plugins/response-rewrite", ""); r.status != 200 || !strings.Contains(r.body, `"max_resp_body_size"`) {
		t.Fatalf("schema/plugins/response-rewrite: %d %s", r.status, r.body)
	}
	route := func(uri, conf, node string) string {
		return fmt.Sprintf(`{"uri":%q,"plugins":{"response-rewrite":%s},"upstream":{"nodes":{%q:1}}}`, uri, conf, node)
	}
	for conf, msg := range map[string]string{
		`{"body":"1","body_base64":true}`: `failed to check the configuration of plugin response-rewrite err: invalid base64 content`,
		`{"status_code":599}`:             `failed to check the configuration of plugin response-rewrite err: property \"status_code\" validation failed: expected 599 to be at most 598`,
	} {
		if r := admin.do(t, c, "PUT", "routes/1", route("/hello", conf, up.Addr())); r.status != 400 || !strings.Contains(r.body, msg) {
			t.Fatalf("%s: %d %s", conf, r.status, r.body)
		}
	}
	down := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	for id, body := range map[string]string{
		"1": route("/hello", `{"status_code":201,"body":"new body\n","headers":{"add":["X-Added: $uri"],"set":{"X-Set":"on"},"remove":["X-Up"]}}`, up.Addr()),
		"2": route("/filter", `{"filters":[{"regex":"l","scope":"global","replace":"t"},{"regex":"(\\w+) (\\w+)","replace":"$2 $1"}]}`, up.Addr()),
		"3": route("/vars", `{"vars":[["status","==",500]],"status_code":503,"body":"resting\n"}`, up.Addr()),
		"4": route("/empty", `{"body":"filled","headers":{"X-Old":"form"}}`, up.Addr()),
		"5": route("/down", `{"status_code":200,"body":"fine"}`, down),
	} {
		if r := admin.do(t, c, "PUT", "routes/"+id, body); r.status != 201 {
			t.Fatalf("PUT routes/%s: %d %s", id, r.status, r.body)
		}
	}
	eventually(t, 10*time.Second, func() error {
		for _, path := range []string{"/hello", "/filter", "/vars", "/empty", "/down"} {
			if r := do(t, c, "GET", g.url(path), "", nil, nil); r.status == 404 {
				return fmt.Errorf("GET %s: %d", path, r.status)
			}
		}
		return nil
	})
	for _, tc := range []struct {
		path   string
		status int
		body   string
		hdr    map[string]string
	}{
		{"/hello", 201, "new body\n", map[string]string{"X-Added": "/hello", "X-Set": "on", "X-Up": "", "ETag": ""}},
		{"/filter", 200, "wortd hetto", map[string]string{"X-Up": "1", "ETag": ""}},
		{"/filter?gz=1", 200, "wortd hetto", map[string]string{"Content-Encoding": ""}},
		{"/vars?fail=1", 503, "resting\n", nil},
		{"/vars", 200, "hello world", map[string]string{"ETag": `"v1"`}},
		{"/empty", 200, "filled", map[string]string{"X-Old": "form"}},
		{"/down", 200, "fine", nil},
	} {
		for range 2 { // the second on a reused connection
			r := do(t, c, "GET", g.url(tc.path), "", map[string]string{"Accept-Encoding": "gzip"}, nil)
			if r.status != tc.status || r.body != tc.body {
				t.Fatalf("GET %s: %d %q, want %d %q", tc.path, r.status, r.body, tc.status, tc.body)
			}
			for k, v := range tc.hdr {
				if got := r.header.Get(k); got != v {
					t.Errorf("GET %s: %s %q, want %q", tc.path, k, got, v)
				}
			}
		}
	}
	// An HTTP/1.0 client gets the new body delimited by the close.
	for _, path := range []string{"/hello", "/filter"} {
		conn, err := net.Dial("tcp", g.Addr())
		if err != nil {
			t.Fatal(err)
		}
		_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := io.WriteString(conn, "GET "+path+" HTTP/1.0\r\nHost: x\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		conn.Close()
		if want := map[string]string{"/hello": "new body\n", "/filter": "wortd hetto"}[path]; err != nil || string(body) != want ||
			!resp.Close || len(resp.TransferEncoding) != 0 {
			t.Errorf("HTTP/1.0 %s: %q (err %v, close %v, transfer-encoding %q), want %q", path, body, err, resp.Close, resp.TransferEncoding, want)
		}
	}
}
