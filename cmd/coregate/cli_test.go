package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"coregate/admin/nodeconf"
	"coregate/admin/store"
	"coregate/admin/store/etcdstore"
	"coregate/internal/e2e"
)

// The command line as an operator uses it: coregate -v/-V, -t, -s
// through the pid file.

// cli runs `coregate args...` to its end and returns its output and exit
// status.
func cli(t *testing.T, args ...string) (string, int) {
	t.Helper()
	out, err := e2e.Run(binPath, 60*time.Second, args...)
	var ee *exec.ExitError
	switch {
	case err == nil:
		return out, 0
	case errors.As(err, &ee):
		return out, ee.ExitCode()
	}
	t.Fatalf("coregate %s: %v\n%s", strings.Join(args, " "), err, out)
	return "", 0
}

// TestCLIVersion: -v prints one line with the version; -V adds the Go
// release, the target, the commit and build flags, and the socket
// selector this kernel allows this process.
func TestCLIVersion(t *testing.T) {
	t.Parallel()
	out, code := cli(t, "-v")
	if code != 0 || !regexp.MustCompile(`^coregate version: coregate/\S+ \(APISIX 3\.\d+\.\d+ compatible\)\n$`).MatchString(out) {
		t.Errorf("-v: status %d\n%s", code, out)
	}
	out, code = cli(t, "-V")
	for _, want := range []string{"coregate version: coregate/", "built by " + runtime.Version() + " for " + runtime.GOOS + "/" + runtime.GOARCH,
		"\ncommit: ", "\nbuild flags: ", "\nsocket selector: "} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("-V: status %d, want %q in\n%s", code, want, out)
		}
	}
	if !regexp.MustCompile(`socket selector: (ebpf|cbpf|kernel_hash|plain) `).MatchString(out) {
		t.Errorf("-V names no selector:\n%s", out)
	}
}

// TestCLIConfigTestLines: -t of a config.yaml with a bad value, a key of
// the wrong type, a YAML error, each says the file, the line and the key,
// "test failed", and exits 1; the start says the same. A sound one says
// "test is successful", and a key coregate does not know is a warning
// naming it; -T prints the configuration in effect too.
func TestCLIConfigTestLines(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	conf := filepath.Join(dir, "config.yaml")
	port := freePort(t)
	good := perCoreConfig(port, 1)
	writeFile(t, filepath.Join(dir, "apisix.yaml"), routesYAML())
	// lineOf is the line of good that holds s.
	lineOf := func(s string) int {
		i := strings.Index(good, s)
		if i < 0 {
			t.Fatalf("no %q in\n%s", s, good)
		}
		return strings.Count(good[:i], "\n") + 1
	}
	for _, tc := range []struct{ name, conf, want string }{
		{"bad value", strings.Replace(good, "worker_processes: 1", "worker_processes: 0", 1),
			fmt.Sprintf("%s:%d", conf, lineOf("worker_processes")) + `: nginx_config.worker_processes: want "auto" or an integer from 1 to 1024, got 0`},
		{"wrong type", strings.Replace(good, "  enable_control: false\n", "  enable_control: false\n  pid_file: [a]\n", 1),
			fmt.Sprintf("%s:%d", conf, lineOf("  enable_control")+1) + `: apisix.pid_file: want a string, got a list`},
		{"yaml", strings.Replace(good, "  enable_admin: false\n", "  enable_admin: false\n   x: y\n", 1),
			fmt.Sprintf("%s:%d", conf, lineOf("  enable_control")) + `: yaml: mapping values are not allowed in this context`},
	} {
		writeFile(t, conf, tc.conf)
		out, code := cli(t, "-t", "-c", conf)
		if code != 1 || !strings.Contains(out, tc.want) || !strings.Contains(out, "configuration file "+conf+" test failed") {
			t.Errorf("-t of a %s: status %d, want 1 and %q in\n%s", tc.name, code, tc.want, out)
		}
		out, code = cli(t, "-c", conf)
		if code != 1 || !strings.Contains(out, tc.want) {
			t.Errorf("start with a %s: status %d, want 1 and %q in\n%s", tc.name, code, tc.want, out)
		}
	}
	writeFile(t, conf, good+"whatever: 1\n")
	out, code := cli(t, "-t", "-c", conf)
	if code != 0 || !strings.Contains(out, "unknown key whatever") || !strings.Contains(out, "configuration file "+conf+" test is successful") {
		t.Errorf("-t of a sound config.yaml: status %d\n%s", code, out)
	}
	// -T: the same, and the configuration in effect: what config.yaml
	// sets, and the defaults of what it leaves out.
	out, code = cli(t, "-T", "-c", conf)
	if code != 0 || !strings.Contains(out, "test is successful") || !strings.Contains(out, "\n  worker_processes: 1\n") ||
		!strings.Contains(out, "\n    keepalive_timeout: 60s\n") || !strings.Contains(out, "\n    config_provider: yaml\n") {
		t.Errorf("-T of a sound config.yaml: status %d\n%s", code, out)
	}
}

// badRoute is a route whose upstream has no nodes and whose plugin
// configuration limit-count refuses: put into etcd directly, past the
// Admin API, it is what -t must find.
const badRoute = `{"id":"bad","uri":"/bad","plugins":{"limit-count":{"count":-1,"time_window":1}},"upstream":{"type":"roundrobin","nodes":{"127.0.0.1:1":1}}}`

// goodRoute is one the sync serves.
const goodRoute = `{"id":"good","uri":"/good","upstream":{"type":"roundrobin","nodes":{"127.0.0.1:1":1}}}`

func putKV(t *testing.T, s *etcdstore.Store, key, value string) {
	t.Helper()
	if _, _, err := s.Put(context.Background(), key, []byte(value), store.PutOptions{}); err != nil {
		t.Fatal(err)
	}
}

// TestCLIConfigTestEtcd: -t reads every object in etcd and checks it as
// the node's sync does (the Admin API's validation, the plugins'): an
// invalid route put straight into etcd is named by its key, exit 1; once
// deleted, -t passes and counts the objects. On an external etcd, and
// on the embedded one, both while the node runs (its etcd) and after it
// stopped (-t starts it on the data directory, then stops it).
func TestCLIConfigTestEtcd(t *testing.T) {
	t.Run("external", func(t *testing.T) {
		t.Parallel()
		etcd := e2e.NewEtcd(t)
		etcd.Start()
		dir := t.TempDir()
		conf := filepath.Join(dir, "config.yaml")
		writeFile(t, conf, externalConfig(etcd.Client, freePort(t), freePort(t))(freePort(t)))
		s, err := etcdstore.New(etcdstore.Options{Endpoints: []string{etcd.Client}, Timeout: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		putKV(t, s, "/apisix/routes/good", goodRoute)
		putKV(t, s, "/apisix/routes/bad", badRoute)
		checkEtcdTest(t, conf, s)
	})
	t.Run("embedded", func(t *testing.T) {
		t.Parallel()
		g := startSupervisor(t, "", etcdConfig(freePort(t)), 1)
		conf := filepath.Join(g.dir, "config.yaml")
		s := embeddedStore(t, g.dir)
		putKV(t, s, "/apisix/routes/good", goodRoute)
		putKV(t, s, "/apisix/routes/bad", badRoute)
		out, code := cli(t, "-t", "-c", conf)
		if code != 1 || !strings.Contains(out, "/apisix/routes/bad") || !strings.Contains(out, "limit-count") ||
			!strings.Contains(out, "running node's embedded etcd") {
			t.Errorf("-t beside the running node: status %d, want 1 naming /apisix/routes/bad\n%s", code, out)
		}
		stopGracefully(t, g)
		s.Close()
		out, code = cli(t, "-t", "-c", conf)
		if code != 1 || !strings.Contains(out, "/apisix/routes/bad") || !strings.Contains(out, "the embedded etcd in ") {
			t.Errorf("-t of the stopped node: status %d, want 1 naming /apisix/routes/bad\n%s", code, out)
		}
		// Data of another user's is not opened (its files would be
		// left to this one): the node's user runs -t.
		if os.Geteuid() == 0 {
			member := filepath.Join(g.dir, etcdDataDir, "member")
			if err := os.Chown(member, 65534, 65534); err != nil {
				t.Fatal(err)
			}
			out, code = cli(t, "-t", "-c", conf)
			if code != 1 || !strings.Contains(out, "belongs to uid 65534") {
				t.Errorf("-t of another user's embedded etcd: status %d\n%s", code, out)
			}
			if err := os.Chown(member, 0, 0); err != nil {
				t.Fatal(err)
			}
		}
	})
}

// checkEtcdTest runs -t on conf, whose etcd s holds badRoute, then again
// with it deleted.
func checkEtcdTest(t *testing.T, conf string, s *etcdstore.Store) {
	t.Helper()
	out, code := cli(t, "-t", "-c", conf)
	if code != 1 || !strings.Contains(out, "/apisix/routes/bad") || !strings.Contains(out, "limit-count") ||
		strings.Contains(out, "routes/good") || !strings.Contains(out, "test failed") {
		t.Errorf("-t of etcd holding an invalid route: status %d, want 1 naming /apisix/routes/bad only\n%s", code, out)
	}
	if _, err := s.Delete(context.Background(), "/apisix/routes/bad", 0); err != nil {
		t.Fatal(err)
	}
	out, code = cli(t, "-t", "-c", conf)
	if code != 0 || !strings.Contains(out, "1 objects ok") || !strings.Contains(out, "test is successful") {
		t.Errorf("-t of etcd holding a sound route: status %d\n%s", code, out)
	}
}

// pidOf reads the pid file at path.
func pidOf(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatalf("pid file %s: %v", path, err)
	}
	return pid
}

// TestCLISignals: the node writes its pid file at start; a second start on
// the same config.yaml is refused naming it; -s reopen has the worker
// reopen the access log renamed away, -s reload has the node re-read
// config.yaml (a second worker), -s quit drains (a request in flight
// finishes) and the node exits 0 removing the pid file; -s then says the
// pid file is missing, and of a file left by a dead process that it is
// stale, which the next start replaces. A config.yaml broken since is not
// reloaded; -s stop ends the node at once all the same.
func TestCLISignals(t *testing.T) {
	arrived := make(chan struct{}, 1)
	slow := newHTTPUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Has("slow") {
			arrived <- struct{}{}
			time.Sleep(time.Second) // in flight when -s quit comes
		}
		_, _ = w.Write([]byte("hello"))
	})
	g := startSupervisor(t, routesYAML(obj{"id": "r1", "uri": "/hello", "upstream": upstreamOf(nodes(slow.Addr()), nil)}),
		accessLogConfig(1, "    access_log_format: '$request_uri $status'\n"), 1)
	conf := filepath.Join(g.dir, "config.yaml")
	pidFile := filepath.Join(g.dir, "coregate.pid")
	if pid := pidOf(t, pidFile); pid != g.PID() {
		t.Fatalf("pid file says %d, the node is %d", pid, g.PID())
	}

	out, code := cli(t, "-c", conf)
	if code != 1 || !strings.Contains(out, pidFile+" holds pid "+strconv.Itoa(g.PID())) {
		t.Errorf("a second start: status %d, want 1 naming %s\n%s", code, pidFile, out)
	}
	if pid := pidOf(t, pidFile); pid != g.PID() {
		t.Errorf("after the second start the pid file says %d", pid)
	}

	// reopen: the access log renamed, a new one at its path.
	c := newClient(t)
	path := filepath.Join(g.dir, "logs", "access.log")
	do(t, c, "GET", g.url("/hello?before"), "", nil, nil)
	waitFile(t, path, 1)
	if err := os.Rename(path, path+".1"); err != nil {
		t.Fatal(err)
	}
	if out, code := cli(t, "-s", "reopen", "-c", conf); code != 0 || !strings.Contains(out, "SIGUSR1") {
		t.Fatalf("-s reopen: status %d\n%s", code, out)
	}
	// The one worker opens the path again: the file is back.
	eventually(t, 10*time.Second, func() error { _, err := os.Stat(path); return err })
	for i := range 4 {
		do(t, newClient(t), "GET", g.url("/hello?after="+strconv.Itoa(i)), "", nil, nil)
	}
	if after := waitFile(t, path, 4); len(after) != 4 || !strings.HasPrefix(after[0], "/hello?after=") {
		t.Errorf("the reopened access log: %q", after)
	}
	if b, _ := os.ReadFile(path + ".1"); string(b) != "/hello?before 200\n" {
		t.Errorf("the renamed access log: %q", b)
	}

	// reload: config.yaml's worker_processes 1 → 2.
	b, err := os.ReadFile(conf)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, conf, strings.Replace(string(b), "worker_processes: 1", "worker_processes: 2", 1))
	if out, code := cli(t, "-s", "reload", "-c", conf); code != 0 || !strings.Contains(out, "sent SIGHUP to pid "+strconv.Itoa(g.PID())) {
		t.Fatalf("-s reload: status %d\n%s", code, out)
	}
	g.waitLog(`SIGHUP: config.yaml reloaded`, 1, 10*time.Second)
	g.waitLog(`msg="worker ready"`, 2, 10*time.Second)

	// quit: a request in flight is answered, then the node exits 0.
	g.stopped.Store(true)
	answer := make(chan result, 1)
	go func() {
		r, err := tryDo(newClient(t), "GET", g.url("/hello?slow"), "", nil, nil)
		if err != nil {
			r = result{body: err.Error()}
		}
		answer <- r
	}()
	select {
	case <-arrived:
	case <-time.After(10 * time.Second):
		t.Fatal("the slow request did not reach the upstream")
	}
	if out, code := cli(t, "-s", "quit", "-c", conf); code != 0 || !strings.Contains(out, "SIGTERM") {
		t.Fatalf("-s quit: status %d\n%s", code, out)
	}
	select {
	case r := <-answer:
		if r.status != 200 || r.body != "hello" {
			t.Errorf("the request in flight at -s quit: %d %q", r.status, r.body)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("no answer to the request in flight at -s quit")
	}
	select {
	case <-g.done:
	case <-time.After(20 * time.Second):
		t.Fatal("the node did not stop within 20 s of -s quit")
	}
	if code := g.cmd.ProcessState.ExitCode(); code != 0 {
		t.Errorf("exit status %d on -s quit", code)
	}
	if _, err := os.Stat(pidFile); !os.IsNotExist(err) {
		t.Errorf("pid file after the exit: %v", err)
	}
	if out, code := cli(t, "-s", "reload", "-c", conf); code != 1 || !strings.Contains(out, pidFile+" does not exist") {
		t.Errorf("-s reload of a stopped node: status %d\n%s", code, out)
	}

	// A pid file left by a process that is gone.
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	writeFile(t, pidFile, fmt.Sprintf("%d\n", dead.Process.Pid))
	if out, code := cli(t, "-s", "reload", "-c", conf); code != 1 || !strings.Contains(out, pidFile+" is stale") {
		t.Errorf("-s reload with a stale pid file: status %d\n%s", code, out)
	}
	g2 := g.restart(t, 2)
	g2.waitLog(`stale pid file replaced`, 1, 5*time.Second)
	if pid := pidOf(t, pidFile); pid != g2.PID() {
		t.Errorf("pid file says %d, the node is %d", pid, g2.PID())
	}

	// A config.yaml broken since the start is not reloaded, saying why;
	// stop still finds the node, through the default pid file.
	good, err := os.ReadFile(conf)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, conf, strings.Replace(string(good), "worker_processes: 2", "worker_processes: many", 1))
	if out, code := cli(t, "-s", "reload", "-c", conf); code != 1 || !strings.Contains(out, "nginx_config.worker_processes") ||
		!strings.Contains(out, "-s reload: not sent") {
		t.Errorf("-s reload of a broken config.yaml: status %d\n%s", code, out)
	}
	if strings.Contains(g2.Log(), "SIGHUP") {
		t.Errorf("the node got SIGHUP:\n%s", g2.Log())
	}

	// stop: the node exits at once.
	g2.stopped.Store(true)
	if out, code := cli(t, "-s", "stop", "-c", conf); code != 0 || !strings.Contains(out, "SIGQUIT") || !strings.Contains(out, "default pid file") {
		t.Fatalf("-s stop: status %d\n%s", code, out)
	}
	select {
	case <-g2.done:
	case <-time.After(10 * time.Second):
		t.Fatal("the node did not stop within 10 s of -s stop")
	}
	g2.waitLog(`SIGQUIT: stopping now`, 1, time.Second)
	if _, err := os.Stat(pidFile); !os.IsNotExist(err) {
		t.Errorf("pid file after -s stop: %v", err)
	}
}

// TestCLIInit: coregate init writes a config.yaml that -t passes and
// that loads as the defaults do (nodeconf's TestTemplate checks it has
// every key); a second init does not overwrite it.
func TestCLIInit(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "conf", "config.yaml")
	if out, code := cli(t, "init", path); code != 0 || !strings.Contains(out, "wrote "+path) {
		t.Fatalf("init: status %d\n%s", code, out)
	}
	c, warns, err := nodeconf.Load(path)
	if err != nil || len(warns) != 0 {
		t.Fatalf("the written file: %v %q", err, warns)
	}
	want := nodeconf.Default()
	want.Dir, want.PluginAttr = filepath.Dir(path), c.PluginAttr
	if !reflect.DeepEqual(c, want) {
		t.Errorf("the written file does not load as the defaults:\n%+v\nwant\n%+v", c, want)
	}
	if out, code := cli(t, "-t", "-c", path); code != 0 || !strings.Contains(out, "test is successful") {
		t.Errorf("-t of the written file: status %d\n%s", code, out)
	}
	if err := os.WriteFile(path, []byte("# mine\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, code := cli(t, "init", path); code != 1 || !strings.Contains(out, path+" exists") {
		t.Errorf("init over a file: status %d\n%s", code, out)
	}
	if b, _ := os.ReadFile(path); string(b) != "# mine\n" {
		t.Errorf("init overwrote the file: %q", b)
	}
}

// TestCLIErrorLogReopen: with nginx_config.error_log the supervisor and
// its workers log to that file, not to standard error; after a rotation
// renamed it, -s reopen has both write to a new file at the path.
func TestCLIErrorLogReopen(t *testing.T) {
	t.Parallel()
	up := textUpstream(t, "hello")
	g := bindSupervisor(e2e.Start(t, e2e.Options{Bin: binPath, Listen: true,
		Config: func(port int) string {
			return strings.Replace(perCoreConfig(port, 1), "nginx_config:\n", "nginx_config:\n  error_log: logs/error.log\n", 1)
		},
		APISIX: routesYAML(obj{"id": "r1", "uri": "/hello", "upstream": upstreamOf(nodes(up.Addr()), nil)})}))
	path := filepath.Join(g.dir, "logs", "error.log")
	read := func(path string) string { b, _ := os.ReadFile(path); return string(b) }
	eventually(t, 10*time.Second, func() error {
		if !strings.Contains(read(path), `msg="worker ready"`) {
			return fmt.Errorf("no worker ready in %s:\n%s", path, read(path))
		}
		return nil
	})
	if strings.Contains(g.Log(), `msg="worker ready"`) {
		t.Errorf("the log went to standard error too:\n%s", g.Log())
	}
	if r := do(t, newClient(t), "GET", g.url("/hello"), "", nil, nil); r.status != 200 {
		t.Fatalf("GET /hello: %d", r.status)
	}
	if err := os.Rename(path, path+".1"); err != nil {
		t.Fatal(err)
	}
	if out, code := cli(t, "-s", "reopen", "-c", filepath.Join(g.dir, "config.yaml")); code != 0 {
		t.Fatalf("-s reopen: status %d\n%s", code, out)
	}
	// The supervisor's line, then the worker's, in the new file.
	eventually(t, 10*time.Second, func() error {
		log := read(path)
		if !strings.Contains(log, "SIGUSR1: the workers reopen their logs") || !strings.Contains(log, "SIGUSR1: logs reopened") {
			return fmt.Errorf("the new error log:\n%s", log)
		}
		return nil
	})
	if old := read(path + ".1"); !strings.Contains(old, `msg="worker ready"`) || strings.Contains(old, "SIGUSR1") {
		t.Errorf("the renamed error log:\n%s", old)
	}
}
