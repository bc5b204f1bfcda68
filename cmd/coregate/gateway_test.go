package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"coregate/internal/syncbuf"
)

// The end-to-end tests run the real binary, built once by TestMain, against
// real upstream servers on loopback.

var binPath string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "coregate-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binPath = filepath.Join(dir, "coregate")
	args := []string{"build", "-o", binPath}
	if raceEnabled {
		// The gateway's own data races show under a race-enabled test run.
		args = append(args, "-race")
	}
	build := exec.Command("go", append(args, ".")...)
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// freePort returns a loopback TCP port nobody listens on right now.
func freePort(t testing.TB) int {
	t.Helper()
	handed.Lock()
	defer handed.Unlock()
	for range 100 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		// A port just closed is the kernel's likely next pick: two calls
		// in a row (an admin and a metrics port) could get the same one.
		if !handed.ports[port] {
			handed.ports[port] = true
			return port
		}
	}
	t.Fatal("no free port not handed out before")
	return 0
}

// handed are the ports freePort returned in this test process.
var handed = struct {
	sync.Mutex
	ports map[int]bool
}{ports: map[int]bool{}}

// gateway is one coregate process with its config directory.
type gateway struct {
	t    testing.TB
	dir  string
	port int
	cmd  *exec.Cmd
	out  *syncbuf.Buffer
	done chan struct{}
}

const baseConfig = `apisix:
  node_listen:
    - %d
  enable_admin: false
deployment:
  role: data_plane
  role_data_plane:
    config_provider: yaml
plugin_attr:
  prometheus:
    enable_export_server: false
nginx_config:
  worker_processes: 1
  error_log_level: info
%s`

// startGateway writes config.yaml (with extra appended) and apisix.yaml and
// starts the gateway, waiting until it answers.
func startGateway(t testing.TB, apisixYAML, extra string) *gateway {
	t.Helper()
	return startGatewayConfig(t, apisixYAML, func(port int) string { return fmt.Sprintf(baseConfig, port, extra) })
}

// startGatewayConfig is startGateway with the whole config.yaml made by
// config for the listen port chosen.
func startGatewayConfig(t testing.TB, apisixYAML string, config func(port int) string) *gateway {
	t.Helper()
	g := &gateway{t: t, dir: t.TempDir(), port: freePort(t), out: &syncbuf.Buffer{}, done: make(chan struct{})}
	writeFile(t, filepath.Join(g.dir, "config.yaml"), config(g.port))
	writeFile(t, filepath.Join(g.dir, "apisix.yaml"), apisixYAML)
	g.cmd = exec.Command(binPath, "-c", filepath.Join(g.dir, "config.yaml"))
	g.cmd.Stdout, g.cmd.Stderr = g.out, g.out
	if err := g.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = g.cmd.Wait(); close(g.done) }()
	t.Cleanup(g.stop)
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", g.addr(), 200*time.Millisecond)
		if err == nil {
			c.Close()
			return g
		}
		select {
		case <-g.done:
			t.Fatalf("gateway exited at start:\n%s", g.out.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("gateway did not listen within 10s:\n%s", g.out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (g *gateway) addr() string { return "127.0.0.1:" + strconv.Itoa(g.port) }

func (g *gateway) url(path string) string { return "http://" + g.addr() + path }

// stop ends the process it started: SIGTERM, then SIGKILL after 5 s.
func (g *gateway) stop() {
	select {
	case <-g.done:
		g.t.Errorf("the gateway exited before the test ended: %v", g.cmd.ProcessState)
	default:
		_ = g.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-g.done:
			if code := g.cmd.ProcessState.ExitCode(); code != 0 {
				g.t.Errorf("the gateway exited with status %d on SIGTERM", code)
			}
		case <-time.After(5 * time.Second):
			g.t.Errorf("the gateway did not stop within 5s of SIGTERM")
			// Its workers would outlive it (they wait for the next
			// supervisor): they go too.
			ws := workerProcs(g.t, g.cmd.Process.Pid)
			_ = g.cmd.Process.Kill()
			for _, w := range ws {
				_ = syscall.Kill(w.pid, syscall.SIGKILL)
			}
			<-g.done
		}
	}
	if strings.Contains(g.out.String(), "WARNING: DATA RACE") {
		g.t.Errorf("the gateway has a data race")
	}
	if g.t.Failed() {
		g.t.Logf("gateway output:\n%s", g.out.String())
	}
}

// rewrite replaces apisix.yaml atomically.
func (g *gateway) rewrite(apisixYAML string) {
	g.t.Helper()
	tmp := filepath.Join(g.dir, ".apisix.yaml.tmp")
	writeFile(g.t, tmp, apisixYAML)
	// Make sure the mtime moves even on coarse-grained file systems.
	future := time.Now().Add(time.Second)
	_ = os.Chtimes(tmp, future, future)
	if err := os.Rename(tmp, filepath.Join(g.dir, "apisix.yaml")); err != nil {
		g.t.Fatal(err)
	}
}

func writeFile(t testing.TB, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

// eventually polls f until it returns nil or the timeout passes.
func eventually(t testing.TB, timeout time.Duration, f func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %v", timeout, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// rawExchange writes raw bytes to the gateway and reads until the
// connection closes or idle passes with nothing new.
func rawExchange(t testing.TB, addr string, raw string, idle time.Duration) string {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, raw); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	buf := make([]byte, 64<<10)
	for {
		_ = c.SetReadDeadline(time.Now().Add(idle))
		n, err := c.Read(buf)
		out.Write(buf[:n])
		if err != nil {
			return out.String()
		}
	}
}

// readResponses parses n responses from r (for pipelining tests).
func readResponses(t testing.TB, r *bufio.Reader, n int, method string) []*http.Response {
	t.Helper()
	var rs []*http.Response
	for i := 0; i < n; i++ {
		resp, err := http.ReadResponse(r, &http.Request{Method: method})
		if err != nil {
			t.Fatalf("response %d: %v", i, err)
		}
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatalf("response %d body: %v", i, err)
		}
		resp.Body = io.NopCloser(bytes.NewReader(body))
		rs = append(rs, resp)
	}
	return rs
}
