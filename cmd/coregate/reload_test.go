package main

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"coregate/internal/e2e"
)

// TestReloadUnderTraffic: apisix.yaml is rewritten several times while
// clients keep sending; no request fails and every answer comes from the
// old or the new config.
func TestReloadUnderTraffic(t *testing.T) {
	t.Parallel()
	a, b := textUpstream(t, "a"), textUpstream(t, "b")
	conf := func(up *httpUpstream) string {
		return routesYAML(obj{"id": 1, "uri": "/r", "upstream": upstreamOf(nodes(up.Addr()), nil)})
	}
	g := startGateway(t, conf(a), "")
	var (
		stop     atomic.Bool
		mu       sync.Mutex
		answers  = map[string]int{}
		failures []string
		wg       sync.WaitGroup
	)
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := newClient(t)
			for i := 0; !stop.Load() && i < 100000; i++ {
				r, err := tryDo(c, "GET", g.url("/r"), "", nil, nil)
				mu.Lock()
				switch {
				case err != nil:
					failures = append(failures, err.Error())
				case r.status != 200 || (r.body != "a" && r.body != "b"):
					failures = append(failures, fmt.Sprintf("%d %q", r.status, r.body))
				default:
					answers[r.body]++
				}
				mu.Unlock()
			}
		}()
	}
	want := "a"
	loaded := strings.Count(g.out.String(), "config reloaded")
	for i := range 4 {
		up, name := b, "b"
		if i%2 == 1 {
			up, name = a, "a"
		}
		g.rewrite(conf(up))
		want = name
		eventually(t, 5*time.Second, func() error {
			r, err := tryDo(newClient(t), "GET", g.url("/r"), "", nil, nil)
			if err != nil || r.body != want {
				return fmt.Errorf("rewrite %d not applied: %v %q", i, err, r.body)
			}
			return nil
		})
	}
	stop.Store(true)
	wg.Wait()
	if len(failures) > 0 {
		t.Errorf("%d requests failed during reloads, first: %s", len(failures), failures[0])
	}
	if answers["a"] == 0 || answers["b"] == 0 {
		t.Errorf("answers %v: want both configs seen", answers)
	}
	// Logged once the supervisor has the worker's word that it applied
	// it, which may come after the worker served it: waited for.
	eventually(t, 5*time.Second, func() error {
		if n := strings.Count(g.out.String(), `msg="config reloaded" proc=supervisor routes=1 workers=1 took=`); n < 4 {
			return fmt.Errorf("%d reloads logged as applied by 1 worker, want 4", n)
		}
		return nil
	})
	if n := strings.Count(g.out.String(), "config reloaded") - loaded; n != 4 {
		t.Errorf("%d reloads logged, want 4:\n%s", n, g.out.String())
	}
}

// reloadRefusals returns the supervisor's log lines that end a reload with
// a refusal, one per refused file: refused where the file is read, or by
// the workers (whose own lines about it come before).
func reloadRefusals(out string) []string {
	var lines []string
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, `msg="config refused`) || strings.Contains(l, `msg="config reload refused by workers"`) {
			lines = append(lines, l)
		}
	}
	return lines
}

// TestReloadRefusesInvalid: a file without its end flag, not YAML, or
// valid but using what the workers do not support yet, is refused with a
// log line naming the problem; the old config keeps serving, and a later
// valid file is taken.
func TestReloadRefusesInvalid(t *testing.T) {
	t.Parallel()
	a, b := textUpstream(t, "a"), textUpstream(t, "b")
	good := func(up *httpUpstream) string {
		return routesYAML(obj{"id": 1, "uri": "/r", "upstream": upstreamOf(nodes(up.Addr()), nil)})
	}
	g := startGateway(t, good(a), "")
	c := newClient(t)
	tests := []struct {
		name, file, logWant string
	}{
		{"missing end flag", strings.TrimSuffix(good(b), "#END\n"), "end flag"},
		{"bad yaml", "routes: [\n#END\n", "apisix.yaml"},
		{"valid but unsupported", routesYAML(obj{"id": 1, "uri": "/r", "upstream": upstreamOf(nodes(b.Addr()), obj{"scheme": "grpc"})}), "grpc"},
	}
	for _, tc := range tests {
		before := len(reloadRefusals(g.out.String()))
		g.rewrite(tc.file)
		eventually(t, 5*time.Second, func() error {
			if len(reloadRefusals(g.out.String())) == before {
				return fmt.Errorf("%s: no refusal logged", tc.name)
			}
			return nil
		})
		refusals := reloadRefusals(g.out.String())
		if len(refusals) != before+1 {
			t.Errorf("%s: %d refusals logged for one file: %q", tc.name, len(refusals)-before, refusals[before:])
		}
		last := refusals[len(refusals)-1]
		if !strings.Contains(last, tc.logWant) {
			t.Errorf("%s: refusal %q does not mention %q", tc.name, last, tc.logWant)
		}
		if r := do(t, c, "GET", g.url("/r"), "", nil, nil); r.status != 200 || r.body != "a" {
			t.Errorf("%s: after the refusal got %d %q, want the old config's a", tc.name, r.status, r.body)
		}
	}
	g.rewrite(good(b))
	eventually(t, 5*time.Second, func() error {
		if r, err := tryDo(c, "GET", g.url("/r"), "", nil, nil); err != nil || r.body != "b" {
			return fmt.Errorf("valid file not taken: %v %q", err, r.body)
		}
		return nil
	})
}

// leftOut returns the log lines of objects left out of the configuration.
func leftOut(out string) []string {
	var lines []string
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, `msg="config store: invalid object left out"`) || strings.Contains(l, `msg="config store: object left out"`) {
			lines = append(lines, l)
		}
	}
	return lines
}

// TestReloadLeavesOutInvalid: an item of the file with an invalid field or
// value, or a plugin configuration the plugin refuses, is left out with a
// log line naming the file, the item and the problem, as an object in etcd
// is; the rest of the file is served.
func TestReloadLeavesOutInvalid(t *testing.T) {
	t.Parallel()
	a, b := textUpstream(t, "a"), textUpstream(t, "b")
	withOther := func(route obj) string {
		return routesYAML(route, obj{"id": 2, "uri": "/other", "upstream": upstreamOf(nodes(b.Addr()), nil)})
	}
	good := withOther(obj{"id": 1, "uri": "/r", "upstream": upstreamOf(nodes(a.Addr()), nil)})
	g := startGateway(t, good, "")
	c := newClient(t)
	tests := []struct {
		name, file, logWant string
	}{
		{"bad field", withOther(obj{"id": 1, "uri": "/r", "no_such_field": 1, "upstream": upstreamOf(nodes(b.Addr()), nil)}), "no_such_field"},
		{"bad value", withOther(obj{"id": 1, "uri": "/r", "methods": []string{"FETCH"}, "upstream": upstreamOf(nodes(b.Addr()), nil)}), "methods"},
		// Left out where the file is read, as the Admin API refuses it, not
		// by the workers' build.
		{"bad plugin configuration", withOther(obj{"id": 1, "uri": "/r", "plugins": obj{"limit-count": obj{"count": -1, "time_window": 60}},
			"upstream": upstreamOf(nodes(b.Addr()), nil)}), "failed to check the configuration of plugin limit-count"},
	}
	for _, tc := range tests {
		before := len(leftOut(g.out.String()))
		g.rewrite(tc.file)
		eventually(t, 5*time.Second, func() error {
			if r, err := tryDo(c, "GET", g.url("/r"), "", nil, nil); err != nil || r.status != 404 {
				return fmt.Errorf("%s: route 1 still served: %v %d", tc.name, err, r.status)
			}
			return nil
		})
		lines := leftOut(g.out.String())
		if len(lines) != before+1 {
			t.Fatalf("%s: %d objects left out, want 1: %q", tc.name, len(lines)-before, lines[before:])
		}
		if last := lines[len(lines)-1]; !strings.Contains(last, tc.logWant) || !strings.Contains(last, `item="apisix.yaml: routes[0] (id 1)"`) {
			t.Errorf("%s: %q does not name the item and %q", tc.name, last, tc.logWant)
		}
		if r := do(t, c, "GET", g.url("/other"), "", nil, nil); r.status != 200 || r.body != "b" {
			t.Errorf("%s: the rest of the file: %d %q", tc.name, r.status, r.body)
		}
		if refusals := reloadRefusals(g.out.String()); len(refusals) != 0 {
			t.Errorf("%s: the file was refused: %q", tc.name, refusals)
		}
		g.rewrite(good)
		eventually(t, 5*time.Second, func() error {
			if r, err := tryDo(c, "GET", g.url("/r"), "", nil, nil); err != nil || r.body != "a" {
				return fmt.Errorf("%s: mended file not taken: %v %q", tc.name, err, r.body)
			}
			return nil
		})
	}
}

// TestStartLeavesOutBadPlugins: a node whose first apisix.yaml has an
// object with a plugin configuration the plugin refuses starts without it,
// as from etcd, and says which object and plugin; the rest is served.
func TestStartLeavesOutBadPlugins(t *testing.T) {
	t.Parallel()
	up := textUpstream(t, "ok")
	rest := "  - id: ok\n    uri: /ok\n    upstream:\n      nodes:\n        \"" + up.Addr() + "\": 1\n"
	for _, bad := range []struct{ file, want string }{
		{"routes:\n  - id: 1\n    uri: /r\n    plugins:\n      limit-count: {count: -1, time_window: 60}\n    upstream:\n      nodes:\n        \"127.0.0.1:1980\": 1\n" + rest + "#END\n",
			`item="apisix.yaml: routes[0] (id 1)" err="failed to check the configuration of plugin limit-count`},
		{"consumers:\n  - username: jack\n    plugins:\n      key-auth: {}\nroutes:\n" + rest + "#END\n",
			`item="apisix.yaml: consumers[0] (username jack)" err="failed to check the configuration of plugin key-auth`},
		{"plugin_metadata:\n  - id: no-such-plugin\n    x: 1\nroutes:\n" + rest + "#END\n",
			`item="apisix.yaml: plugin_metadata[0] (id no-such-plugin)"`},
	} {
		g := startGateway(t, bad.file, "")
		if r := do(t, newClient(t), "GET", g.url("/ok"), "", nil, nil); r.status != 200 || r.body != "ok" {
			t.Errorf("start with %q: the rest of the file: %d %q", bad.file, r.status, r.body)
		}
		if out := g.out.String(); !strings.Contains(out, bad.want) {
			t.Errorf("start with %q: the log lacks %s:\n%s", bad.file, bad.want, out)
		}
	}
}

// TestStartRefusesBadGlobalRule: a global rule of the file that fails is
// not left out as other items are (every route would be served without
// it): the node does not start, and says which rule and why.
func TestStartRefusesBadGlobalRule(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "config.yaml")
	writeFile(t, cfg, baseConfig(freePort(t), ""))
	writeFile(t, filepath.Join(dir, "apisix.yaml"), "global_rules:\n  - id: g\n    plugins:\n      no-such-plugin: {}\n"+
		"routes:\n  - id: ok\n    uri: /ok\n    upstream:\n      nodes:\n        \"127.0.0.1:1980\": 1\n#END\n")
	out, err := e2e.Run(binPath, 10*time.Second, "-c", cfg)
	want := "global rule g refuses the configuration, which would serve every route without it: unknown plugin [no-such-plugin]"
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 || !strings.Contains(out, want) {
		t.Errorf("start with a bad global rule: %v, want exit status 1 and %q:\n%s", err, want, out)
	}
}

// TestUnknownConfigKeys: config.yaml keys the gateway does not know are
// reported at start, by name.
func TestUnknownConfigKeys(t *testing.T) {
	t.Parallel()
	up := textUpstream(t, "ok")
	g := startGateway(t, routesYAML(obj{"id": 1, "uri": "/r", "upstream": upstreamOf(nodes(up.Addr()), nil)}),
		"  no_such_nginx_key: 1\n  http:\n    not_a_directive: on\n")
	if r := do(t, newClient(t), "GET", g.url("/r"), "", nil, nil); r.status != 200 {
		t.Fatalf("status %d", r.status)
	}
	out := g.out.String()
	for _, k := range []string{"nginx_config.no_such_nginx_key", "nginx_config.http.not_a_directive"} {
		if !strings.Contains(out, k) {
			t.Errorf("unknown key %s not reported:\n%s", k, out)
		}
	}
}

// TestStartRefusesUnimplementedKeys: a config.yaml key coregate does not
// implement whose absence would weaken security stops the start, the
// error naming the file, the line and the key (admin/nodeconf's doc
// lists them).
func TestStartRefusesUnimplementedKeys(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ extra, key string }{
		{"  http:\n    real_ip_from: [10.0.0.0/8]\n", "nginx_config.http.real_ip_from"},
		{"  user: nobody\n", "nginx_config.user"},
	} {
		dir := t.TempDir()
		cfg := filepath.Join(dir, "config.yaml")
		conf := baseConfig(freePort(t), tc.extra)
		writeFile(t, cfg, conf)
		writeFile(t, filepath.Join(dir, "apisix.yaml"), routesYAML())
		out, err := e2e.Run(binPath, 10*time.Second, "-c", cfg)
		// The line the key is written on.
		line := strings.Count(conf[:strings.Index(conf, tc.key[strings.LastIndexByte(tc.key, '.')+1:]+":")], "\n") + 1
		want := cfg + ":" + strconv.Itoa(line) + ": " + tc.key + ": not supported, and ignoring it would "
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 1 || !strings.Contains(out, want) {
			t.Errorf("start with %s: %v, want exit status 1 and %q:\n%s", tc.key, err, want, out)
		}
	}
}

// TestRepositoryConfig: the repository's conf/config.yaml, with the listen,
// TLS (APISIX's default 9443, there), metrics, Admin API and upstream
// ports moved, serves /hello as `make run` does, and listens for TLS: on the embedded etcd, once the Makefile's PUT of the route went
// through the Admin API. (conf/apisix.yaml, the same route for a data
// plane, is checked by admin/standalone's TestConfFiles.)
func TestRepositoryConfig(t *testing.T) {
	t.Parallel()
	body := strings.Repeat("1234567890", 102) + "1234"
	up := newHTTPUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/hello" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/plain")
		_, _ = w.Write([]byte(body))
	})
	cfg, err := os.ReadFile(filepath.Join("..", "..", "conf", "config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	mk, err := os.ReadFile(filepath.Join("..", "..", "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	put := regexp.MustCompile(`'(\{"uri": "/hello".*\})'`).FindSubmatch(mk)
	key := regexp.MustCompile(`(?m)^ADMIN_KEY := (\S+)$`).FindSubmatch(mk)
	if put == nil || key == nil || !strings.Contains(string(put[1]), "127.0.0.1:1980") ||
		!strings.Contains(string(cfg), "- 9080") || !strings.Contains(string(cfg), "port: 9091") ||
		!strings.Contains(string(cfg), "port: 9180") ||
		!strings.Contains(string(cfg), "\napisix:\n") || strings.Contains(string(cfg), "  ssl:") {
		t.Fatalf("conf/config.yaml or the Makefile's run no longer has what this test moves")
	}
	metricsPort, adminPort, controlPort := freePort(t), freePort(t), freePort(t)
	g := startGatewayConfig(t, "", func(port int) string {
		c := strings.Replace(string(cfg), "- 9080", "- "+strconv.Itoa(port), 1)
		c = strings.Replace(c, "\napisix:\n", "\napisix:\n"+e2e.SSLListen(port)+
			"  control:\n    port: "+strconv.Itoa(controlPort)+"\n", 1)
		c = strings.Replace(c, "port: 9180", "port: "+strconv.Itoa(adminPort), 1)
		return strings.Replace(c, "port: 9091", "port: "+strconv.Itoa(metricsPort), 1)
	})
	c := newClient(t)
	route := strings.ReplaceAll(string(put[1]), "127.0.0.1:1980", up.Addr())
	admin := adminAPI{e2e.Admin{Port: adminPort, Key: string(key[1])}}
	if r := admin.do(t, c, "PUT", "routes/1", route); r.status != 201 {
		t.Fatalf("the Makefile's PUT: %d %s", r.status, r.body)
	}
	eventually(t, 10*time.Second, func() error {
		if r := do(t, c, "GET", g.url("/hello"), "", nil, nil); r.status != 200 || r.body != body {
			return fmt.Errorf("GET /hello: %d, %d bytes", r.status, len(r.body))
		}
		return nil
	})
	// The Control API, on by default: the route as the node holds it,
	// and server_info with the id kept beside config.yaml.
	control := "http://127.0.0.1:" + strconv.Itoa(controlPort)
	if r := do(t, c, "GET", control+"/v1/route/1", "", nil, nil); r.status != 200 || !strings.Contains(r.body, `"key":"/apisix/routes/1"`) {
		t.Errorf("control API /v1/route/1: %d %s", r.status, r.body)
	}
	uid, err := os.ReadFile(filepath.Join(g.dir, "apisix.uid"))
	if r := do(t, c, "GET", control+"/v1/server_info", "", nil, nil); err != nil || r.status != 200 ||
		!strings.Contains(r.body, `"id":"`+string(uid)+`"`) || !strings.Contains(r.body, `"etcd_version":"3.`) {
		t.Errorf("control API /v1/server_info: %d %s (apisix.uid %q, %v)", r.status, r.body, uid, err)
	}
	if tc, err := net.DialTimeout("tcp", g.TLSAddr(), 2*time.Second); err != nil {
		t.Errorf("the TLS listener: %v", err)
	} else {
		tc.Close()
	}
	if out := g.out.String(); strings.Contains(out, "level=WARN") || strings.Contains(out, "level=ERROR") {
		t.Errorf("the shipped config logs warnings:\n%s", out)
	}
}
