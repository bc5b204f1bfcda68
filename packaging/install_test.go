package packaging

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"coregate/bpf"
	"coregate/internal/e2e"
)

// nobody is the user the tests run make install's unit as, where no
// coregate user is to be created: Debian's nobody and nogroup.
const nobody = 65534

// worldDir is a new directory that other users may enter (t.TempDir's
// are its owner's alone), removed when t ends.
func worldDir(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "coregate-packaging-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// makeIn runs make in the repository's root with args, failing t when it
// fails, and returns its output.
func makeIn(t testing.TB, args ...string) string {
	t.Helper()
	c := exec.Command("make", args...)
	c.Dir = ".."
	out, err := c.CombinedOutput()
	if err != nil {
		t.Fatalf("make %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// checkMode fails t unless path has mode (permissions, setuid, setgid,
// sticky) and, when gid >= 0, belongs to group gid.
func checkMode(t testing.TB, path string, mode os.FileMode, gid int) {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := fi.Mode() & (os.ModePerm | os.ModeSticky | os.ModeSetuid | os.ModeSetgid); got != mode {
		t.Errorf("%s: mode %v, want %v", path, got, mode)
	}
	if gid >= 0 {
		if g := int(fi.Sys().(*syscall.Stat_t).Gid); g != gid {
			t.Errorf("%s: group %d, want %d", path, g, gid)
		}
	}
}

// TestMakeInstall installs into a DESTDIR with PREFIX=/usr, checks what
// went where, then runs the installed unit as systemd would, as nobody:
// ExecStartPre passes, ExecStart serves a route on a free port and on one
// below 1024 with the eBPF selector attached, ExecReload re-reads
// config.yaml (a second worker), and SIGTERM to the main process alone
// (KillMode=mixed) stops every process, answering the request in flight.
func TestMakeInstall(t *testing.T) {
	needRoot(t)
	dest, bin := worldDir(t), t.TempDir()
	if names, _ := parseUnit(t, "coregate.service").caps(t); strings.Join(names, " ") != "CAP_NET_BIND_SERVICE CAP_BPF" {
		t.Errorf("unit: capabilities %q, want CAP_NET_BIND_SERVICE (ports below 1024) and CAP_BPF (the eBPF selector), no more", names)
	}
	makeIn(t, "install", "DESTDIR="+dest, "PREFIX=/usr", "BIN="+bin)

	exe := filepath.Join(dest, "usr/bin/coregate")
	unitPath := filepath.Join(dest, "usr/lib/systemd/system/coregate.service")
	etc := filepath.Join(dest, "etc/coregate")
	checkMode(t, exe, 0o755, -1)
	checkMode(t, unitPath, 0o644, -1)
	checkMode(t, etc, 0o770|os.ModeSticky, -1)
	for _, f := range []string{"config.yaml", "apisix.yaml"} {
		checkMode(t, filepath.Join(etc, f), 0o640, -1)
		want, err := os.ReadFile(filepath.Join("../conf", f))
		if err != nil {
			t.Fatal(err)
		}
		if got, err := os.ReadFile(filepath.Join(etc, f)); err != nil || string(got) != string(want) {
			t.Errorf("%s: not conf/%s (%v)", f, f, err)
		}
	}

	// A second install keeps the configuration the administrator edited.
	conf := filepath.Join(etc, "config.yaml")
	edited := []byte("# edited\n")
	if err := os.WriteFile(conf, edited, 0o640); err != nil {
		t.Fatal(err)
	}
	if out := makeIn(t, "install", "DESTDIR="+dest, "PREFIX=/usr", "BIN="+bin); !strings.Contains(out, "/etc/coregate/config.yaml kept as it is") {
		t.Errorf("second make install: no word of the kept config.yaml:\n%s", out)
	}
	if got, _ := os.ReadFile(conf); string(got) != string(edited) {
		t.Fatalf("second make install replaced config.yaml")
	}
	if err := os.Remove(conf); err != nil {
		t.Fatal(err)
	}
	makeIn(t, "install", "DESTDIR="+dest, "PREFIX=/usr", "BIN="+bin)

	// A PREFIX is written into the unit's commands.
	other := worldDir(t)
	makeIn(t, "install", "DESTDIR="+other, "PREFIX=/opt/cg", "BIN="+bin)
	u := parseUnit(t, filepath.Join(other, "opt/cg/lib/systemd/system/coregate.service"))
	if got := u.one(t, "ExecStart"); !strings.HasPrefix(got, "/opt/cg/bin/coregate -c /etc/coregate/config.yaml") {
		t.Errorf("PREFIX=/opt/cg: ExecStart=%s", got)
	}

	// What make install's packaging/adduser does on the target, for the
	// user the test runs the unit as.
	c := exec.Command("../packaging/adduser", etc)
	c.Env = append(os.Environ(), "COREGATE_USER=nobody")
	if out, err := c.CombinedOutput(); err != nil {
		t.Fatalf("packaging/adduser: %v\n%s", err, out)
	}
	checkMode(t, etc, 0o770|os.ModeSticky, nobody)
	checkMode(t, conf, 0o640, nobody)

	paths := []string{"/usr/bin/coregate", exe, "/etc/coregate", etc,
		"/var/lib/coregate", filepath.Join(dest, "var/lib/coregate"), "/var/log/coregate", filepath.Join(dest, "var/log/coregate")}
	verifyUnit(t, unitPath, paths...)
	runUnit(t, parseUnit(t, unitPath), nobody, nobody, etc, filepath.Join(dest, "var/lib/coregate"), paths...)
}

// runUnit runs the installed unit u (its config.yaml in etc, its state
// directory state) as uid:gid, its paths rewritten by paths: the checks
// TestMakeInstall's doc lists.
func runUnit(t *testing.T, u unit, uid, gid int, etc, state string, paths ...string) {
	conf := filepath.Join(etc, "config.yaml")
	port, admin := e2e.FreePort(t), e2e.FreePort(t)
	low := lowFreePort()
	if low == 0 {
		t.Log("no free port below 1024 found: CAP_NET_BIND_SERVICE not tried")
	}
	testConfig(t, conf, port, low, admin)
	s := newService(t, u, uid, gid, paths...)

	// ExecStartPre refuses a config.yaml the start would refuse, and
	// passes the installed one.
	good, err := os.ReadFile(conf)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(conf, append(good, "\nnot_a_key_of_coregate: [\n"...), 0); err != nil {
		t.Fatal(err)
	}
	if out, err := s.run("ExecStartPre"); err == nil {
		t.Errorf("ExecStartPre passed a config.yaml that does not parse:\n%s", out)
	}
	if err := os.WriteFile(conf, good, 0); err != nil {
		t.Fatal(err)
	}
	if out, err := s.run("ExecStartPre"); err != nil {
		t.Fatalf("ExecStartPre: %v\n%s", err, out)
	}
	s.start(1)
	s.checkProcesses(2)
	// The eBPF selector attaches as the unit's user wherever it does as
	// root (this test's process).
	if kind, err := bpf.Probe(); kind == bpf.KindEBPF {
		s.waitLog(`msg="socket selector" proc=supervisor kind=ebpf`, 1, time.Second)
	} else {
		t.Logf("the eBPF selector is not available here, even to root (%v): not checked", err)
	}
	ports := []int{port}
	if low != 0 {
		ports = append(ports, low)
	}
	slow := serveRoute(t, admin, adminKey(t, conf), ports...)
	for _, f := range []string{"config-cache.json", "apisix.uid"} {
		if _, err := os.Stat(filepath.Join(etc, f)); err != nil {
			t.Errorf("the node did not write %s beside config.yaml: %v", f, err)
		}
	}
	if _, err := os.Stat(filepath.Join(state, "etcd-data")); err != nil {
		t.Errorf("the embedded etcd's data is not in the state directory: %v", err)
	}
	if _, err := os.Stat(filepath.Join(etc, "etcd-data")); err == nil {
		t.Errorf("the embedded etcd's data is beside config.yaml, which ProtectSystem=strict leaves read-only to it")
	}

	// ExecReload: config.yaml asks for a second worker.
	b, err := os.ReadFile(conf)
	if err != nil {
		t.Fatal(err)
	}
	two := strings.Replace(string(b), "worker_processes: 1\n", "worker_processes: 2\n", 1)
	if two == string(b) {
		t.Fatal("config.yaml: no worker_processes: 1")
	}
	if err := os.WriteFile(conf, []byte(two), 0); err != nil {
		t.Fatal(err)
	}
	if out, err := s.run("ExecReload"); err != nil {
		t.Fatalf("ExecReload: %v\n%s", err, out)
	}
	s.waitLog(`msg="SIGHUP: config.yaml reloaded" proc=supervisor workers=2`, 1, 10*time.Second)
	s.waitLog(`msg="worker ready"`, 2, 10*time.Second)
	s.checkProcesses(3)
	checkServed(t, ports...)

	// The stop drains: a request in flight when the main process gets
	// SIGTERM is answered.
	answer := make(chan string, 1)
	go func() {
		res, err := (&http.Client{Timeout: 10 * time.Second}).Get(fmt.Sprintf("http://127.0.0.1:%d/packaged?slow=1", port))
		if err != nil {
			answer <- err.Error()
			return
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		answer <- fmt.Sprintf("%d %s", res.StatusCode, b)
	}()
	select {
	case <-slow:
	case <-time.After(10 * time.Second):
		t.Fatal("the slow request did not reach the upstream")
	}
	s.stop()
	if got := <-answer; got != "200 served by the upstream: /packaged" {
		t.Errorf("the request in flight at the stop: %s", got)
	}
}
