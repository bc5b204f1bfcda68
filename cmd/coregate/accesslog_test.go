package main

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"coregate/internal/e2e"
)

// accessLogConfig is a config.yaml with n workers and extra under
// nginx_config.http.
func accessLogConfig(n int, http string) func(port int) string {
	return func(port int) string {
		return strings.Replace(baseConfig(port, ""), "worker_processes: 1",
			"worker_processes: "+strconv.Itoa(n), 1) + "  http:\n" + http
	}
}

// stopGracefully stops g with SIGTERM and waits for it to exit 0.
func stopGracefully(t *testing.T, g *supGateway) {
	t.Helper()
	g.stopped.Store(true)
	if err := g.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-g.done:
	case <-time.After(20 * time.Second):
		t.Fatal("the gateway did not stop within 20 s of SIGTERM")
	}
	if code := g.cmd.ProcessState.ExitCode(); code != 0 {
		t.Errorf("exit status %d on SIGTERM", code)
	}
}

// waitFile waits until the file at path holds n lines and returns them.
func waitFile(t *testing.T, path string, n int) []string {
	t.Helper()
	var lines []string
	eventually(t, 15*time.Second, func() error {
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		lines = strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
		if len(b) == 0 {
			lines = nil
		}
		if len(lines) < n {
			return fmt.Errorf("%s: %d lines, want %d", path, len(lines), n)
		}
		return nil
	})
	return lines
}

// TestAccessLogDefaultFormat: with config.yaml saying nothing, a request
// gets a line in APISIX's format in logs/access.log beside config.yaml,
// within the flush interval.
func TestAccessLogDefaultFormat(t *testing.T) {
	t.Parallel()
	up := textUpstream(t, "hello")
	g := startSupervisor(t, routesYAML(obj{"id": "r1", "uri": "/hello", "upstream": upstreamOf(nodes(up.Addr()), nil)}),
		func(port int) string { return baseConfig(port, "") }, 1)
	c := newClient(t)
	if r := do(t, c, "GET", g.url("/hello?x=1"), "", map[string]string{"User-Agent": `ua "q"`}, nil); r.status != 200 {
		t.Fatalf("status %d", r.status)
	}
	lines := waitFile(t, filepath.Join(g.dir, "logs", "access.log"), 1)
	gw, upAddr := regexp.QuoteMeta(g.Addr()), regexp.QuoteMeta(up.Addr())
	re := regexp.MustCompile(`^127\.0\.0\.1 - - \[\d\d/[A-Z][a-z]{2}/\d{4}:\d\d:\d\d:\d\d [+-]\d{4}\] ` + gw +
		` "GET /hello\?x=1 HTTP/1\.1" 200 5 \d+\.\d{3} "-" "ua \\x22q\\x22" ` + upAddr + ` 200 \d+\.\d{3} "http://` + gw + `/hello\?x=1" "[0-9a-f]{32}"$`)
	if len(lines) != 1 || !re.MatchString(lines[0]) {
		t.Errorf("lines %q, want one matching\n%s", lines, re)
	}
}

// TestAccessLogWorkers: two workers, clients on many connections; once the
// gateway stopped gracefully the file holds every request's line, whole,
// none lost or doubled.
func TestAccessLogWorkers(t *testing.T) {
	t.Parallel()
	up := textUpstream(t, "hello")
	g := startSupervisor(t, routesYAML(obj{"id": "r1", "uri": "/hello", "upstream": upstreamOf(nodes(up.Addr()), nil)}),
		accessLogConfig(2, "    access_log: logs/x.log\n    access_log_format: '$request_uri $status $body_bytes_sent $upstream_status $route_id $pid \"$http_user_agent\"'\n"), 2)
	const clients, per = 8, 150
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	for i := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// A connection per client, a few requests each on a new one:
			// the kernel spreads them over both workers.
			for j := range per {
				tr := &http.Transport{DisableKeepAlives: j%10 == 0}
				c := &http.Client{Transport: tr, Timeout: 10 * time.Second}
				r, err := tryDo(c, "GET", g.url(fmt.Sprintf("/hello?c=%d&r=%d", i, j)), "", map[string]string{"User-Agent": "load"}, nil)
				tr.CloseIdleConnections()
				if err != nil || r.status != 200 {
					errs <- fmt.Errorf("request %d/%d: %v %d", i, j, err, r.status)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	stopGracefully(t, g)
	b, err := os.ReadFile(filepath.Join(g.dir, "logs", "x.log"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	var want, got []string
	for i := range clients {
		for j := range per {
			want = append(want, fmt.Sprintf("/hello?c=%d&r=%d 200 5 200 r1", i, j))
		}
	}
	pids := map[string]int{}
	re := regexp.MustCompile(`^(.* r1) (\d+) "load"$`)
	for _, l := range lines {
		m := re.FindStringSubmatch(l)
		if m == nil {
			t.Fatalf("line %q", l)
		}
		got = append(got, m[1])
		pids[m[2]]++
	}
	sort.Strings(want)
	sort.Strings(got)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("%d lines, want %d (one per request)", len(got), len(want))
	}
	t.Logf("lines per worker: %v", pids)
	if strings.Contains(g.out.String(), "lines dropped") {
		t.Errorf("lines dropped:\n%s", g.out.String())
	}
}

// TestAccessLogReopen: after logrotate's rename, SIGUSR1 to the
// supervisor has the workers write to a new file at the path.
func TestAccessLogReopen(t *testing.T) {
	t.Parallel()
	up := textUpstream(t, "hello")
	g := startSupervisor(t, routesYAML(obj{"id": "r1", "uri": "/hello", "upstream": upstreamOf(nodes(up.Addr()), nil)}),
		accessLogConfig(2, "    access_log_format: '$request_uri $status'\n"), 2)
	path := filepath.Join(g.dir, "logs", "access.log")
	c := newClient(t)
	do(t, c, "GET", g.url("/hello?before"), "", nil, nil)
	waitFile(t, path, 1)
	if err := os.Rename(path, path+".1"); err != nil {
		t.Fatal(err)
	}
	if err := g.cmd.Process.Signal(syscall.SIGUSR1); err != nil {
		t.Fatal(err)
	}
	// Each worker opens the path again: the file is back.
	eventually(t, 10*time.Second, func() error { _, err := os.Stat(path); return err })
	time.Sleep(100 * time.Millisecond) // the other worker's reopen
	for i := range 4 {
		do(t, newClient(t), "GET", g.url("/hello?after="+strconv.Itoa(i)), "", nil, nil)
	}
	after := waitFile(t, path, 4)
	sort.Strings(after)
	if want := "/hello?after=0 200,/hello?after=1 200,/hello?after=2 200,/hello?after=3 200"; strings.Join(after, ",") != want {
		t.Errorf("new file %q, want %s", after, want)
	}
	if b, _ := os.ReadFile(path + ".1"); string(b) != "/hello?before 200\n" {
		t.Errorf("rotated file %q", b)
	}
	if !strings.Contains(g.out.String(), "SIGUSR1") {
		t.Errorf("no SIGUSR1 in the log:\n%s", g.out.String())
	}
}

// TestAccessLogOff: enable_access_log: false writes nothing.
func TestAccessLogOff(t *testing.T) {
	t.Parallel()
	up := textUpstream(t, "hello")
	g := startSupervisor(t, routesYAML(obj{"id": "r1", "uri": "/hello", "upstream": upstreamOf(nodes(up.Addr()), nil)}),
		accessLogConfig(1, "    enable_access_log: false\n"), 1)
	for range 5 {
		do(t, newClient(t), "GET", g.url("/hello"), "", nil, nil)
	}
	stopGracefully(t, g)
	if _, err := os.Stat(filepath.Join(g.dir, "logs")); !os.IsNotExist(err) {
		t.Errorf("logs/: %v, want none", err)
	}
}

// TestAccessLogBlockedDisk: the log is a FIFO whose reader never reads,
// a stand-in for a disk that stopped: requests are answered all the same,
// the lines the writer cannot place are dropped and counted.
func TestAccessLogBlockedDisk(t *testing.T) {
	t.Parallel()
	up := textUpstream(t, "hello")
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skip("mkfifo:", err)
	}
	r, err := os.OpenFile(fifo, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	g := startSupervisor(t, routesYAML(obj{"id": "r1", "uri": "/hello", "upstream": upstreamOf(nodes(up.Addr()), nil)}),
		accessLogConfig(1, "    access_log: "+fifo+"\n    access_log_buffer: 4k\n    access_log_format: '$request_uri $status "+strings.Repeat("x", 400)+"'\n"), 1)
	// 2 MB of lines: far past the pipe's 64 KiB and the worker's buffers.
	c := newClient(t)
	start := time.Now()
	for i := range 5000 {
		if r := do(t, c, "GET", g.url("/hello?i="+strconv.Itoa(i)), "", nil, nil); r.status != 200 {
			t.Fatalf("request %d: status %d", i, r.status)
		}
	}
	t.Logf("5000 requests in %v", time.Since(start))
	g.waitLog(`lines dropped, the disk is behind`, 1, 10*time.Second)
}

// TestAccessLogBadFormat: a format with an unknown variable refuses the
// config.yaml, with nginx's reason.
func TestAccessLogBadFormat(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "config.yaml"), accessLogConfig(1, "    access_log_format: '$remote_addr $nope'\n")(freePort(t)))
	writeFile(t, filepath.Join(dir, "apisix.yaml"), routesYAML())
	out, err := e2e.Run(binPath, 10*time.Second, "-c", filepath.Join(dir, "config.yaml"))
	if err == nil || !strings.Contains(out, "access_log_format: access log format: unknown variable $nope") {
		t.Errorf("err %v, output:\n%s", err, out)
	}
}

var _ = net.Dial
