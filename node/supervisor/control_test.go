package supervisor

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"coregate/admin/spec"
	"coregate/plugins"
	_ "coregate/plugins/all"
	"coregate/worker/shm"
)

// controlSpec is a configuration with an object of each kind the Control
// API shows.
const controlSpec = `{
 "routes": [{"id": "r1", "uri": "/a", "upstream_id": "u1"}, {"id": 2, "uri": "/b", "service_id": "s1"}],
 "services": [{"id": "s1", "upstream_id": "u1"}],
 "upstreams": [{"id": "u1", "type": "roundrobin", "nodes": {"127.0.0.1:1980": 1}}],
 "plugin_metadata": [{"id": "http-logger", "log_format": {"host": "$host"}}]
}`

// startControl serves the Control API of a supervisor holding
// controlSpec on a free loopback port, and returns its base URL.
func startControl(t *testing.T) string {
	t.Helper()
	var sp spec.Spec
	if err := json.Unmarshal([]byte(controlSpec), &sp); err != nil {
		t.Fatal(err)
	}
	s := &Supervisor{log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	s.setSpec(&sp)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	err = s.ServeControl(ctx, ControlOptions{
		Addr: addr, Plugins: plugins.Default, Enabled: []string{"limit-count", "http-logger", "kafka-logger", "nosuch"},
		KeyPrefix: "/apisix", ID: "node-1", Version: spec.CompatVersion, BootTime: time.Unix(1700000000, 0),
	})
	if err != nil {
		t.Fatal(err)
	}
	return "http://" + addr
}

func controlGet(t *testing.T, method, url string) (int, string, string) {
	t.Helper()
	req, _ := http.NewRequest(method, url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header.Get("Content-Type"), string(b)
}

// TestControlAPI: each endpoint's answer for a configuration with routes,
// services, upstreams and plugin metadata, and APISIX's 404s and errors.
func TestControlAPI(t *testing.T) {
	base := startControl(t)
	for _, tc := range []struct {
		method, path string
		status       int
		body         string
	}{
		{"GET", "/v1/routes", 200, `[{"key":"/apisix/routes/r1","value":{"id":"r1","uri":"/a","upstream_id":"u1"`},
		{"GET", "/v1/route/2", 200, `{"key":"/apisix/routes/2","value":{"id":2,"uri":"/b","service_id":"s1"`},
		{"GET", "/v1/route/9", 404, `{"error_msg":"route[9] not found"}`},
		{"GET", "/v1/services", 200, `[{"key":"/apisix/services/s1","value":{"id":"s1","upstream_id":"u1"`},
		{"GET", "/v1/service/s1", 200, `{"key":"/apisix/services/s1","value":{"id":"s1"`},
		{"GET", "/v1/service/x", 404, `{"error_msg":"service[x] not found"}`},
		{"GET", "/v1/upstreams", 200, `[{"key":"/apisix/upstreams/u1","value":{"id":"u1"`},
		{"GET", "/v1/upstream/u1", 200, `{"key":"/apisix/upstreams/u1","value":{"id":"u1"`},
		{"GET", "/v1/upstream/u2", 404, `{"error_msg":"upstream[u2] not found"}`},
		{"GET", "/v1/plugin_metadatas", 200, `[{"id":"http-logger","log_format":{"host":"$host"}}]`},
		{"GET", "/v1/plugin_metadata/http-logger", 200, `{"id":"http-logger","log_format":{"host":"$host"}}`},
		{"GET", "/v1/plugin_metadata/limit-count", 404, `{"error_msg":"plugin metadata[limit-count] not found"}`},
		{"GET", "/v1/healthcheck", 200, `[]`},
		{"GET", "/v1/healthcheck/upstreams/u1", 404, `{"error_msg":"no checker for upstreams[u1]"}`},
		{"GET", "/v1/healthcheck/routes/r1", 404, `{"error_msg":"no checker for routes[r1]"}`},
		{"GET", "/v1/healthcheck/upstreams/nope", 404, `{"error_msg":"upstreams[nope] not found"}`},
		{"GET", "/v1/healthcheck/upstreams", 404, `{"error_msg":"missing src id for src type upstreams"}`},
		{"GET", "/v1/healthcheck/consumers/x", 400, `{"error_msg":"invalid src type consumers"}`},
		{"POST", "/v1/gc", 200, ``},
		{"PUT", "/v1/plugins/reload", 501, `{"error_msg":"plugins are compiled into coregate`},
		{"GET", "/v1/routes/r1", 404, controlNotFoundPage},
		{"GET", "/v1/gc", 404, controlNotFoundPage},
		{"POST", "/v1/routes", 404, controlNotFoundPage},
		{"GET", "/", 404, controlNotFoundPage},
	} {
		status, ctype, body := controlGet(t, tc.method, base+tc.path)
		if status != tc.status || !strings.HasPrefix(body, tc.body) || tc.body == "" && body != "" {
			t.Errorf("%s %s: %d %s, want %d %s", tc.method, tc.path, status, body, tc.status, tc.body)
		}
		if want := "application/json"; status != 404 && status != 200 && ctype != want ||
			strings.HasPrefix(tc.body, "{") && ctype != want {
			t.Errorf("%s %s: Content-Type %q", tc.method, tc.path, ctype)
		}
	}
	var sch struct {
		Main    map[string]json.RawMessage
		Plugins map[string]struct {
			Priority *int
			Schema   json.RawMessage
		}
	}
	status, _, body := controlGet(t, "GET", base+"/v1/schema")
	if err := json.Unmarshal([]byte(body), &sch); status != 200 || err != nil {
		t.Fatalf("/v1/schema: %d %v", status, err)
	}
	for _, k := range []string{"route", "service", "upstream", "consumer", "ssl", "global_rule", "plugin_config", "consumer_group", "proto"} {
		if len(sch.Main[k]) == 0 {
			t.Errorf("/v1/schema: no main.%s", k)
		}
	}
	// Of the enabled plugins, those coregate has (limit-count and
	// http-logger; not kafka-logger, nor a name no plugin has).
	e, _, _ := plugins.Default.Lookup("limit-count")
	if lc := sch.Plugins["limit-count"]; len(sch.Plugins) != 2 || sch.Plugins["http-logger"].Priority == nil || lc.Priority == nil || *lc.Priority != e.Priority ||
		*lc.Priority == 0 || !strings.HasPrefix(string(lc.Schema), `{"type":"object"`) {
		t.Errorf("/v1/schema plugins: %d, limit-count's priority %v", len(sch.Plugins), lc.Priority)
	}
	var info map[string]any
	status, _, body = controlGet(t, "GET", base+"/v1/server_info")
	if err := json.Unmarshal([]byte(body), &info); status != 200 || err != nil {
		t.Fatalf("/v1/server_info: %d %s", status, body)
	}
	host, _ := os.Hostname()
	if info["id"] != "node-1" || info["hostname"] != host || info["version"] != spec.CompatVersion ||
		info["boot_time"] != float64(1700000000) || info["etcd_version"] != "unknown" || len(info) != 5 {
		t.Errorf("/v1/server_info: %s", body)
	}
}

// TestNodeID: the id is made once (apisix.id, or a random UUID) and kept
// in apisix.uid beside config.yaml, which later starts read.
func TestNodeID(t *testing.T) {
	dir := t.TempDir()
	id, err := NodeID(dir, "")
	if err != nil || !regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`).MatchString(id) {
		t.Fatalf("NodeID = %q, %v: want a version 4 UUID", id, err)
	}
	if again, err := NodeID(dir, "named"); again != id || err != nil {
		t.Errorf("second start: %q, %v; want the kept %q", again, err, id)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, UIDFile)); string(b) != id {
		t.Errorf("%s holds %q, want %q", UIDFile, b, id)
	}
	named := t.TempDir()
	if id, err := NodeID(named, "edge-1"); id != "edge-1" || err != nil {
		t.Errorf("apisix.id: %q, %v", id, err)
	}
	if err := os.WriteFile(filepath.Join(named, UIDFile), []byte("kept-id\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if id, _ := NodeID(named, "edge-1"); id != "kept-id" {
		t.Errorf("a uid file written by hand: %q, want kept-id", id)
	}
}

// TestControlHealthCheck: /v1/healthcheck lists the upstreams with
// checks and their nodes' states, and /v1/healthcheck/upstreams/{id}
// gives one, as APISIX's control API does.
func TestControlHealthCheck(t *testing.T) {
	var sp spec.Spec
	const checked = `{"upstreams": [{"id": "u1", "nodes": {"127.0.0.1:1": 1}, "checks": {"active": {"type": "tcp",
		"healthy": {"interval": 60}, "unhealthy": {"interval": 60}}}}, {"id": "u2", "nodes": {"127.0.0.1:2": 1}}]}`
	if err := json.Unmarshal([]byte(checked), &sp); err != nil {
		t.Fatal(err)
	}
	seg, err := shm.CreateHealth(0)
	if err != nil {
		t.Fatal(err)
	}
	s := &Supervisor{log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	s.health = newHealthChecks(seg, s.log)
	t.Cleanup(s.health.stop)
	s.setSpec(&sp)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	if err := s.ServeControl(ctx, ControlOptions{Addr: addr, Plugins: plugins.Default, KeyPrefix: "/apisix"}); err != nil {
		t.Fatal(err)
	}
	base := "http://" + addr
	for _, tc := range []struct {
		path   string
		status int
		body   string
	}{
		{"/v1/healthcheck", 200, `[{"name":"/apisix/upstreams/u1","type":"tcp","nodes":[{"ip":"127.0.0.1","port":1`},
		{"/v1/healthcheck/upstreams/u1", 200, `{"name":"/apisix/upstreams/u1","type":"tcp","nodes":[{"ip":"127.0.0.1","port":1`},
		{"/v1/healthcheck/upstreams/u2", 404, `{"error_msg":"no checker for upstreams[u2]"}`},
	} {
		status, _, body := controlGet(t, "GET", base+tc.path)
		if status != tc.status || !strings.HasPrefix(body, tc.body) {
			t.Errorf("GET %s: %d %s, want %d %s", tc.path, status, body, tc.status, tc.body)
		}
	}
}
