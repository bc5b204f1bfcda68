package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"coregate/admin/adminapi"
)

// fileEntry waits up to 10 s for a JSON line of path that holds want
// (its text), and returns it decoded, with every line of the file.
func fileEntry(t *testing.T, path, want string) (map[string]any, []string) {
	t.Helper()
	var m map[string]any
	var all []string
	eventually(t, 10*time.Second, func() error {
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		all = strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
		for _, l := range all {
			if strings.Contains(l, want) {
				return json.Unmarshal([]byte(l), &m)
			}
		}
		return fmt.Errorf("%s holds no line with %s:\n%s", path, want, b)
	})
	return m, all
}

// TestAdminAPIFileLogger runs file-logger through the binary, configured
// through the Admin API: the full entry of a proxied request (with the
// response's headers and, include_resp_body, its body), a
// log_format and path of the plugin metadata (which then serve every
// file-logger without its own, as APISIX), a new file after the
// old one is renamed and SIGUSR1 comes, requests unslowed by a file that
// blocks; the Admin API lists the plugin, serves its schema and refuses
// include_resp_body.
func TestAdminAPIFileLogger(t *testing.T) {
	t.Parallel()
	up := textUpstream(t, "hello")
	dir := t.TempDir()
	full, meta := filepath.Join(dir, "full.log"), filepath.Join(dir, "meta.log")
	adminPort := freePort(t)
	g := startSupervisor(t, "", etcdConfig(adminPort, adminapi.LegacyAdminKey), 1)
	c := newClient(t)
	admin := legacyAdmin(adminPort)
	put := func(path, body string) {
		t.Helper()
		if r := admin.do(t, c, "PUT", path, body); r.status != 201 && r.status != 200 {
			t.Fatalf("PUT %s: %d %s", path, r.status, r.body)
		}
	}
	if r := admin.do(t, c, "GET", "plugins/list", ""); !strings.Contains(r.body, `"file-logger"`) {
		t.Errorf("plugins/list: %d %s", r.status, r.body)
	}
	if r := admin.do(t, c, "GET", "schema/plugins/file-logger", ""); r.status != 200 || !strings.Contains(r.body, `"max_req_body_bytes"`) {
		t.Errorf("schema/plugins/file-logger: %d %s", r.status, r.body)
	}
	r := admin.do(t, c, "PUT", "routes/bad", `{"uri":"/bad","plugins":{"file-logger":{"path":"x","include_req_body":true,"max_req_body_bytes":0}},`+
		`"upstream":{"nodes":{"`+up.Addr()+`":1}}}`)
	if want := `failed to check the configuration of plugin file-logger err: property \"max_req_body_bytes\" validation failed: expected 0 to be at least 1`; r.status != 400 ||
		!strings.Contains(r.body, want) {
		t.Errorf("PUT max_req_body_bytes 0: %d %s, want 400 %s", r.status, r.body, want)
	}

	put("routes/full", `{"uri":"/hello","plugins":{"file-logger":{"path":"`+full+`","include_resp_body":true}},"upstream":{"type":"roundrobin","nodes":{"`+up.Addr()+`":1}}}`)
	eventually(t, 10*time.Second, func() error {
		if r := do(t, c, "GET", g.url("/hello"), "", nil, nil); r.status != 200 {
			return fmt.Errorf("GET /hello = %d %q", r.status, r.body)
		}
		return nil
	})
	r = do(t, c, "GET", g.url("/hello?name=jack&x=1&x=2"), "", map[string]string{"X-Test": "a"}, nil)
	if r.status != 200 || r.body != "hello" {
		t.Fatalf("GET /hello: %d %q", r.status, r.body)
	}
	e, _ := fileEntry(t, full, `jack`)
	req, _ := e["request"].(map[string]any)
	resp, _ := e["response"].(map[string]any)
	hdr, _ := req["headers"].(map[string]any)
	qs, _ := req["querystring"].(map[string]any)
	rh, _ := resp["headers"].(map[string]any)
	if req["method"] != "GET" || req["uri"] != "/hello?name=jack&x=1&x=2" || hdr["x-test"] != "a" || qs["name"] != "jack" ||
		fmt.Sprint(qs["x"]) != "[1 2]" || resp["status"] != float64(200) || e["route_id"] != "full" ||
		e["upstream"] != up.Addr() || e["client_ip"] != "127.0.0.1" || e["latency"] == nil || e["upstream_latency"] == nil ||
		resp["body"] != "hello" || rh["content-length"] != "5" {
		b, _ := json.Marshal(e)
		t.Errorf("full entry %s", b)
	}

	// The metadata's log_format serves every file-logger without one,
	// as APISIX's; its path those without one.
	put("plugin_metadata/file-logger", `{"path":"`+meta+`","log_format":{"host":"$host","client_ip":"$remote_addr","status":"$status"}}`)
	put("routes/meta", `{"uri":"/meta","plugins":{"file-logger":{}},"upstream":{"type":"roundrobin","nodes":{"`+up.Addr()+`":1}}}`)
	eventually(t, 10*time.Second, func() error {
		if r := do(t, c, "GET", g.url("/meta"), "", nil, nil); r.status != 200 {
			return fmt.Errorf("GET /meta = %d %q", r.status, r.body)
		}
		return nil
	})
	m, _ := fileEntry(t, meta, `"route_id":"meta"`)
	if m["client_ip"] != "127.0.0.1" || m["status"] != "200" || m["route_id"] != "meta" || m["host"] == nil {
		t.Errorf("metadata's entry %v", m)
	}

	eventually(t, 10*time.Second, func() error {
		do(t, c, "GET", g.url("/hello?formatted"), "", nil, nil)
		b, _ := os.ReadFile(full)
		if !strings.Contains(string(b), `{"client_ip":"127.0.0.1","host":"127.0.0.1","status":"200","route_id":"full"}`) {
			return fmt.Errorf("full.log has no entry in the metadata's format:\n%s", b)
		}
		return nil
	})

	if err := os.Rename(full, full+".1"); err != nil {
		t.Fatal(err)
	}
	if err := g.cmd.Process.Signal(syscall.SIGUSR1); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, func() error {
		do(t, c, "GET", g.url("/hello?after"), "", nil, nil)
		_, err := os.Stat(full)
		return err
	})
	// The entries before the signal reached the writer are in the
	// renamed file, the jack one among them; the new file has only
	// later ones.
	fileEntry(t, full+".1", `jack`)
	_, lines := fileEntry(t, full, `"route_id":"full"`)
	for _, l := range lines {
		if l != `{"client_ip":"127.0.0.1","host":"127.0.0.1","status":"200","route_id":"full"}` {
			t.Errorf("new file's entry %s", l)
		}
	}

	// A file that never takes a write (a FIFO nobody reads: its opening
	// blocks) holds the writer, not the requests.
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	put("routes/fifo", `{"uri":"/fifo","plugins":{"file-logger":{"path":"`+fifo+`"}},"upstream":{"type":"roundrobin","nodes":{"`+up.Addr()+`":1}}}`)
	eventually(t, 10*time.Second, func() error {
		if r := do(t, c, "GET", g.url("/fifo"), "", nil, nil); r.status != 200 {
			return fmt.Errorf("GET /fifo = %d %q", r.status, r.body)
		}
		return nil
	})
	t0 := time.Now()
	for i := range 20 {
		if r := do(t, c, "GET", g.url("/fifo?n="+fmt.Sprint(i)), "", nil, nil); r.status != 200 || r.body != "hello" {
			t.Fatalf("GET /fifo %d: %d %q", i, r.status, r.body)
		}
	}
	if d := time.Since(t0); d > 3*time.Second {
		t.Errorf("20 requests took %v with the file blocked", d)
	}
}
