package packaging

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"coregate/internal/e2e"
)

// unit is a systemd unit file: each section's settings, every value of a
// key in the order written.
type unit map[string]map[string][]string

// parseUnit reads a unit file as systemd does: [Section] headers,
// Key=Value lines, # and ; comments, a trailing backslash continuing the
// line. A line that is none of these fails t.
func parseUnit(t testing.TB, path string) unit {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	u := unit{}
	var section map[string][]string
	sc := bufio.NewScanner(f)
	n, line := 0, ""
	for sc.Scan() {
		n++
		l := strings.TrimSpace(sc.Text())
		if l == "" && line == "" || strings.HasPrefix(l, "#") || strings.HasPrefix(l, ";") {
			continue
		}
		if strings.HasSuffix(l, "\\") {
			line += strings.TrimSuffix(l, "\\") + " "
			continue
		}
		l, line = line+l, ""
		if strings.HasPrefix(l, "[") && strings.HasSuffix(l, "]") {
			section = map[string][]string{}
			u[l[1:len(l)-1]] = section
			continue
		}
		k, v, ok := strings.Cut(l, "=")
		if !ok || section == nil {
			t.Fatalf("%s:%d: not a setting of a section: %q", path, n, l)
		}
		k = strings.TrimSpace(k)
		section[k] = append(section[k], strings.TrimSpace(v))
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return u
}

// one is the single value of the [Service] setting key; a key missing or
// written twice fails t.
func (u unit) one(t testing.TB, key string) string {
	t.Helper()
	v := u["Service"][key]
	if len(v) != 1 {
		t.Fatalf("unit: [Service] %s is set %d times, want once", key, len(v))
	}
	return v[0]
}

// capNumbers are the capabilities a unit may name, by number (linux/capability.h).
var capNumbers = map[string]uint{
	"CAP_NET_BIND_SERVICE": 10, "CAP_NET_ADMIN": 12, "CAP_SYS_ADMIN": 21,
	"CAP_SYS_NICE": 23, "CAP_PERFMON": 38, "CAP_BPF": 39,
}

// caps is the unit's AmbientCapabilities, which the tests require to be
// its CapabilityBoundingSet too: the names, and their mask as /proc shows
// capability sets.
func (u unit) caps(t testing.TB) ([]string, uint64) {
	t.Helper()
	names := strings.Fields(u.one(t, "AmbientCapabilities"))
	if b := strings.Fields(u.one(t, "CapabilityBoundingSet")); strings.Join(b, " ") != strings.Join(names, " ") {
		t.Fatalf("unit: CapabilityBoundingSet %q is not AmbientCapabilities %q", b, names)
	}
	var mask uint64
	for _, c := range names {
		bit, ok := capNumbers[c]
		if !ok {
			t.Fatalf("unit: capability %s: not one the tests know", c)
		}
		mask |= 1 << bit
	}
	return names, mask
}

// service runs a unit's commands as systemd would run them for it, with
// no systemd: as a user of the test's choice, with exactly the unit's
// capabilities (ambient, inheritable and bounding set), its LimitNOFILE,
// UMask and NoNewPrivileges, the main process leading a process group of
// its own (the unit's cgroup: KillMode's "remaining processes").
type service struct {
	t        testing.TB
	u        unit
	paths    *strings.Replacer // the unit's paths to where the test installed
	uid, gid int
	log      string // the main process's output
	nofile   string // LimitNOFILE, or "" where this machine cannot raise it
	cmd      *exec.Cmd
	done     chan struct{}
}

// newService prepares to run u as uid:gid, its paths rewritten by
// oldnew (pairs, as strings.NewReplacer takes), and creates its
// StateDirectory and LogsDirectory (the unit's names, under the directories
// that the rewritten /var/lib and /var/log are) as systemd does, the user's.
func newService(t testing.TB, u unit, uid, gid int, oldnew ...string) *service {
	t.Helper()
	s := &service{t: t, u: u, paths: strings.NewReplacer(oldnew...), uid: uid, gid: gid,
		log: filepath.Join(t.TempDir(), "coregate.log"), nofile: u.one(t, "LimitNOFILE")}
	// systemd fails the start where the kernel allows fewer.
	if b, err := os.ReadFile("/proc/sys/fs/nr_open"); err != nil {
		t.Fatal(err)
	} else if n, _ := strconv.Atoi(strings.TrimSpace(string(b))); n < mustAtoi(t, s.nofile) {
		t.Errorf("LimitNOFILE=%s: above fs.nr_open, %d here", s.nofile, n)
	}
	if out, err := exec.Command("prlimit", "--nofile="+s.nofile+":"+s.nofile, "--", "true").CombinedOutput(); err != nil {
		// A container without CAP_SYS_RESOURCE, its hard limit lower.
		t.Logf("LimitNOFILE=%s not applied: this machine does not raise the limit (%v: %s); "+
			"the processes keep the test's own limit", s.nofile, err, bytes.TrimSpace(out))
		s.nofile = ""
	}
	for _, d := range []struct{ key, base string }{{"StateDirectory", "/var/lib/"}, {"LogsDirectory", "/var/log/"}} {
		dir := s.paths.Replace(d.base + u.one(t, d.key))
		mode, err := strconv.ParseUint(u.one(t, d.key+"Mode"), 8, 32)
		if err != nil {
			t.Fatal(err)
		}
		// Its parents are as /var/lib and /var/log are: anyone's to enter.
		if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Mkdir(dir, os.FileMode(mode)); err != nil && !os.IsExist(err) {
			t.Fatal(err)
		}
		if err := os.Chown(dir, uid, gid); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

func mustAtoi(t testing.TB, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// command is the unit's command line for key (ExecStartPre, ...), its
// paths rewritten and $MAINPID expanded, wrapped so that it runs as
// systemd would run it (service's doc).
func (s *service) command(key string) *exec.Cmd {
	s.t.Helper()
	line := s.u.one(s.t, key)
	if strings.ContainsAny(line[:1], "-+@!:|") {
		s.t.Fatalf("unit: %s=%s: a prefix the tests do not run", key, line)
	}
	if s.cmd != nil {
		line = strings.ReplaceAll(line, "$MAINPID", strconv.Itoa(s.cmd.Process.Pid))
	}
	argv := strings.Fields(s.paths.Replace(line))
	names, _ := s.u.caps(s.t)
	var capList string
	for _, c := range names {
		capList += ",+" + strings.ToLower(strings.TrimPrefix(c, "CAP_"))
	}
	wrap := []string{"-c", "umask " + s.u.one(s.t, "UMask") + ` && exec "$@"`, "sh"}
	if s.nofile != "" {
		wrap = append(wrap, "prlimit", "--nofile="+s.nofile+":"+s.nofile, "--")
	}
	wrap = append(wrap, "setpriv", "--reuid="+strconv.Itoa(s.uid), "--regid="+strconv.Itoa(s.gid), "--clear-groups",
		"--inh-caps=-all"+capList, "--ambient-caps=-all"+capList, "--bounding-set=-all"+capList)
	if s.u.one(s.t, "NoNewPrivileges") == "true" {
		wrap = append(wrap, "--no-new-privs")
	}
	c := exec.Command("/bin/sh", append(append(wrap, "--"), argv...)...)
	c.Dir = "/"
	return c
}

// run runs the unit's command for key to its end, within 30 s, and
// returns its output.
func (s *service) run(key string) (string, error) {
	s.t.Helper()
	c := s.command(key)
	var out strings.Builder
	c.Stdout, c.Stderr = &out, &out
	if err := c.Start(); err != nil {
		s.t.Fatal(err)
	}
	timer := time.AfterFunc(30*time.Second, func() { _ = c.Process.Kill() })
	defer timer.Stop()
	err := c.Wait()
	return out.String(), err
}

// start starts ExecStart, the main process, its output to s.log (a file:
// the workers write to it too), and waits for workers lines "worker
// ready" within 30 s.
func (s *service) start(workers int) {
	s.t.Helper()
	c := s.command("ExecStart")
	f, err := os.Create(s.log)
	if err != nil {
		s.t.Fatal(err)
	}
	defer f.Close()
	c.Stdout, c.Stderr = f, f
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := c.Start(); err != nil {
		s.t.Fatal(err)
	}
	s.cmd, s.done = c, make(chan struct{})
	go func() { _ = c.Wait(); close(s.done) }()
	s.t.Cleanup(func() {
		// What a failed test left running is ended as systemd's
		// final SIGKILL would.
		for _, pid := range s.group() {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		select {
		case <-s.done:
		case <-time.After(5 * time.Second):
		}
		if s.t.Failed() {
			s.t.Logf("coregate's output:\n%s", s.output())
		}
	})
	s.waitLog(`msg="worker ready"`, workers, 30*time.Second)
}

func (s *service) output() string {
	b, _ := os.ReadFile(s.log)
	return string(b)
}

// waitLog waits for n lines of the main process's output that match re,
// failing t past timeout or when the process exits first.
func (s *service) waitLog(re string, n int, timeout time.Duration) {
	s.t.Helper()
	rx := regexp.MustCompile(re)
	deadline := time.Now().Add(timeout)
	for {
		if len(rx.FindAllString(s.output(), -1)) >= n {
			return
		}
		select {
		case <-s.done:
			s.t.Fatalf("coregate exited before %d lines matching %s", n, re)
		default:
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("no %d lines matching %s within %v", n, re, timeout)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// group lists the processes of the main process's group: the unit's
// processes, those KillMode and the final SIGKILL reach.
func (s *service) group() []int {
	if s.cmd == nil {
		return nil
	}
	pgid := s.cmd.Process.Pid
	ents, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid pgrp ...: comm may hold spaces and parentheses.
		f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
		if len(f) > 2 && f[0] != "Z" && f[2] == strconv.Itoa(pgid) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// stop stops the service as systemd does for the unit's KillMode (mixed:
// KillSignal to the main process alone) and checks that the main process
// exited within TimeoutStopSec, cleanly, leaving no process of the group.
func (s *service) stop() {
	s.t.Helper()
	if mode := s.u.one(s.t, "KillMode"); mode != "mixed" {
		s.t.Fatalf("unit: KillMode=%s: the test stops mixed only", mode)
	}
	sig := map[string]syscall.Signal{"SIGTERM": syscall.SIGTERM, "SIGINT": syscall.SIGINT}[s.u.one(s.t, "KillSignal")]
	if sig == 0 {
		s.t.Fatalf("unit: KillSignal=%s: not a signal the supervisor stops on", s.u.one(s.t, "KillSignal"))
	}
	timeout, err := time.ParseDuration(s.u.one(s.t, "TimeoutStopSec") + "s")
	if err != nil {
		s.t.Fatal(err)
	}
	if err := syscall.Kill(s.cmd.Process.Pid, sig); err != nil {
		s.t.Fatal(err)
	}
	select {
	case <-s.done:
	case <-time.After(timeout):
		s.t.Fatalf("the main process still runs %v after %v", timeout, sig)
	}
	if st := s.cmd.ProcessState; !st.Success() {
		s.t.Errorf("the main process exited with %v after %v: systemd counts that a failure", st, sig)
	}
	if left := s.group(); len(left) > 0 {
		s.t.Errorf("processes %v left once the main process exited: systemd would SIGKILL them", left)
	}
}

// procStatus is /proc/pid/status's lines, by field.
func procStatus(t testing.TB, pid int) map[string]string {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]string{}
	for l := range strings.Lines(string(b)) {
		k, v, _ := strings.Cut(l, ":")
		m[k] = strings.TrimSpace(v)
	}
	return m
}

// checkProcesses checks that each process of the service runs as its
// user, with exactly the unit's capabilities and LimitNOFILE.
func (s *service) checkProcesses(want int) {
	s.t.Helper()
	pids := s.group()
	if len(pids) != want {
		s.t.Fatalf("%d processes in the unit's group (%v), want %d: the supervisor and its workers", len(pids), pids, want)
	}
	_, mask := s.u.caps(s.t)
	capHex := fmt.Sprintf("%016x", mask)
	rxLimit := regexp.MustCompile(`(?m)^Max open files\s+` + s.nofile + `\s+` + s.nofile + `\s+files`)
	for _, pid := range pids {
		st := procStatus(s.t, pid)
		if f := strings.Fields(st["Uid"]); len(f) != 4 || f[0] != strconv.Itoa(s.uid) || f[3] != strconv.Itoa(s.uid) {
			s.t.Errorf("pid %d: Uid %q, want %d", pid, st["Uid"], s.uid)
		}
		for _, k := range []string{"CapEff", "CapPrm", "CapAmb", "CapBnd"} {
			if st[k] != capHex {
				s.t.Errorf("pid %d: %s %s, want %s (the unit's capabilities)", pid, k, st[k], capHex)
			}
		}
		if st["NoNewPrivs"] != "1" {
			s.t.Errorf("pid %d: NoNewPrivs %s, want 1", pid, st["NoNewPrivs"])
		}
		lim, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/limits")
		if err != nil {
			s.t.Fatal(err)
		}
		if s.nofile != "" && !rxLimit.Match(lim) {
			s.t.Errorf("pid %d: open files limit not %s:\n%s", pid, s.nofile, lim)
		}
	}
}

// testConfig rewrites the installed config.yaml at path for this test:
// free ports for the listener (and lowPort, when not 0, below 1024), the
// Admin API, the metrics, the Control API and TLS; info logs. Every edit
// must apply once: a shipped config.yaml that changed fails the test here
// rather than starting a node on the fixed ports.
func testConfig(t testing.TB, path string, port, lowPort, admin int) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	conf := string(b)
	listen := fmt.Sprintf("    - %d\n", port)
	if lowPort != 0 {
		listen += fmt.Sprintf("    - %d\n", lowPort)
	}
	for _, e := range []struct{ old, new string }{
		{"apisix:\n", fmt.Sprintf("apisix:\n  control:\n    ip: 127.0.0.1\n    port: %d\n  ssl:\n    listen:\n      - ip: 127.0.0.1\n        port: %d\n",
			e2e.FreePort(t), e2e.FreePort(t))},
		{"    - 9080\n", listen},
		{"      port: 9180\n", fmt.Sprintf("      port: %d\n", admin)},
		{"      port: 9091\n", fmt.Sprintf("      port: %d\n", e2e.FreePort(t))},
		{"error_log_level: warn\n", "error_log_level: info\n"},
	} {
		if n := strings.Count(conf, e.old); n != 1 {
			t.Fatalf("%s: %q found %d times, want once", path, e.old, n)
		}
		conf = strings.Replace(conf, e.old, e.new, 1)
	}
	if err := os.WriteFile(path, []byte(conf), 0); err != nil {
		t.Fatal(err)
	}
}

// lowFreePort is a port below 1024 that nothing listens on (all
// addresses), or 0 when a few tries find none.
func lowFreePort() int {
	for range 50 {
		p := 600 + rand.IntN(400)
		l, err := net.Listen("tcp", ":"+strconv.Itoa(p))
		if err == nil {
			l.Close()
			return p
		}
	}
	return 0
}

// adminKey is the admin role's key in the config.yaml at path.
func adminKey(t testing.TB, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^\s+key: (\w+)\n\s+role: admin$`).FindSubmatch(b)
	if m == nil {
		t.Fatalf("%s: no admin key", path)
	}
	return string(m[1])
}

// serveRoute puts a route /packaged to a test upstream through the Admin
// API on adminPort, and checks that each of ports serves it within 10 s.
// The upstream answers /packaged?slow=1 a second late, after a send on the
// channel returned.
func serveRoute(t testing.TB, adminPort int, key string, ports ...int) <-chan struct{} {
	t.Helper()
	slow := make(chan struct{}, 1)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("slow") == "1" {
			select {
			case slow <- struct{}{}:
			default:
			}
			time.Sleep(time.Second)
		}
		_, _ = io.WriteString(w, "served by the upstream: "+r.URL.Path)
	}))
	t.Cleanup(up.Close)
	c := &http.Client{Timeout: 5 * time.Second}
	body := fmt.Sprintf(`{"uri": "/packaged", "upstream": {"type": "roundrobin", "nodes": {%q: 1}}}`, up.Listener.Addr().String())
	req, err := http.NewRequest(http.MethodPut, fmt.Sprintf("http://127.0.0.1:%d/apisix/admin/routes/packaged", adminPort), strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-API-KEY", key)
	res, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusCreated && res.StatusCode != http.StatusOK {
		t.Fatalf("PUT route: %d %s", res.StatusCode, b)
	}
	checkServed(t, ports...)
	return slow
}

// checkServed checks that each of ports serves serveRoute's route within
// 10 s.
func checkServed(t testing.TB, ports ...int) {
	t.Helper()
	c := &http.Client{Timeout: 5 * time.Second}
	for _, port := range ports {
		url := fmt.Sprintf("http://127.0.0.1:%d/packaged", port)
		e2e.Eventually(t, 10*time.Second, func() error {
			res, err := c.Get(url)
			if err != nil {
				return err
			}
			b, _ := io.ReadAll(res.Body)
			res.Body.Close()
			if res.StatusCode != http.StatusOK || string(b) != "served by the upstream: /packaged" {
				return fmt.Errorf("GET %s: %d %q", url, res.StatusCode, b)
			}
			return nil
		})
	}
}

// missing skips t for what this machine lacks, or fails it under CI=true,
// where .ci/run installed everything and runs as root.
func missing(t testing.TB, format string, args ...any) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf(format+" (under CI)", args...)
	}
	t.Skipf(format, args...)
}

// needRoot skips t unless it runs as root with setpriv and prlimit, which
// running a unit's commands as another user with its capabilities takes.
func needRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		missing(t, "running the unit's commands as its user with its capabilities takes root")
	}
	for _, c := range []string{"setpriv", "prlimit"} {
		if _, err := exec.LookPath(c); err != nil {
			missing(t, "%s not installed (util-linux)", c)
		}
	}
}

// verifyUnit runs systemd-analyze verify on the unit at path, its
// commands' paths rewritten by oldnew, when systemd-analyze is installed:
// any complaint fails t (it exits 0 on settings it ignores).
func verifyUnit(t testing.TB, path string, oldnew ...string) {
	t.Helper()
	if _, err := exec.LookPath("systemd-analyze"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("systemd-analyze not installed under CI (apt-get install systemd)")
		}
		t.Log("systemd-analyze not installed (apt-get install systemd): the unit is not verified")
		return
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// verify checks that the commands exist: where the test installed them.
	copyPath := filepath.Join(t.TempDir(), filepath.Base(path))
	if err := os.WriteFile(copyPath, []byte(strings.NewReplacer(oldnew...).Replace(string(b))), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("systemd-analyze", "verify", copyPath).CombinedOutput()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatal(err)
	}
	if err != nil || len(out) > 0 {
		t.Errorf("systemd-analyze verify %s: %v\n%s", path, err, out)
	}
}
