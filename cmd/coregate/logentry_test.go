package main

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"coregate/admin/adminapi"
	"coregate/admin/spec"
)

// TestAdminAPILoggerResponse runs http-logger's default entry
// through the binary: response.headers is the head the client got, the
// upstream's fields (a repeated one as an array), the gateway's own (the
// framing it chose) and a plugin's, names in lower case; with
// include_resp_body, response.body is the start of the body the client
// got, max_resp_body_bytes of it.
func TestAdminAPILoggerResponse(t *testing.T) {
	t.Parallel()
	up := newHTTPUpstream(t, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		w.Header().Add("Set-Cookie", "a=1")
		w.Header().Add("Set-Cookie", "b=2")
		_, _ = w.Write([]byte("hello"))
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	sink := &logSink{}
	serveLogSink(t, ln, sink)

	adminPort := freePort(t)
	g := startSupervisor(t, "", etcdConfig(adminPort, adminapi.LegacyAdminKey), 1)
	c := newClient(t)
	admin := legacyAdmin(adminPort)
	if r := admin.do(t, c, "PUT", "routes/full", `{"uri":"/full","plugins":{"http-logger":{"uri":"http://`+ln.Addr().String()+`/log",`+
		`"batch_max_size":1,"include_resp_body":true,"max_resp_body_bytes":4}, "response-rewrite":{"headers":{"set":{"X-Plugin":"p"}}}},"upstream":{"nodes":{"`+up.Addr()+`":1}}}`); r.status != 201 {
		t.Fatalf("PUT route: %d %s", r.status, r.body)
	}
	eventually(t, 10*time.Second, func() error {
		if r := do(t, c, "GET", g.url("/full"), "", nil, nil); r.status != 200 || r.body != "hello" {
			return fmt.Errorf("GET /full = %d %q", r.status, r.body)
		}
		return nil
	})
	posts, _ := sink.waitPosts(t, 1)
	var entry struct {
		Response struct {
			Status  int            `json:"status"`
			Headers map[string]any `json:"headers"`
			Body    string         `json:"body"`
		} `json:"response"`
	}
	if err := json.Unmarshal([]byte(strings.TrimPrefix(posts[len(posts)-1], " ")), &entry); err != nil {
		t.Fatalf("entry %q: %v", posts[len(posts)-1], err)
	}
	h := entry.Response.Headers
	for k, want := range map[string]any{
		"content-type":   "text/plain",
		"set-cookie":     []any{"a=1", "b=2"},
		"content-length": "5", // a headers-only response-rewrite keeps the upstream's framing
		"server":         "APISIX/" + spec.CompatVersion,
		"x-plugin":       "p",
	} {
		if got := h[k]; fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("response.headers[%q] = %v, want %v (%s)", k, got, want, posts[len(posts)-1])
		}
	}
	if h["date"] == nil || entry.Response.Status != 200 || entry.Response.Body != "hell" {
		t.Errorf("entry %s: no date, or not status 200 and body hell", posts[len(posts)-1])
	}
}
