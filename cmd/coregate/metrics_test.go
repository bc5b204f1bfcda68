package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"coregate/bpf"
	"coregate/internal/e2e"
)

// TestNodeMetrics: the export server serves the node's metrics in valid
// Prometheus text (checked by promtool): the socket selector in use, the
// live workers, and the restarts after a worker is killed.
func TestNodeMetrics(t *testing.T) {
	t.Parallel()
	promtool := requirePromtool(t)
	up := textUpstream(t, "ok")
	mport := freePort(t)
	g := startGatewayConfig(t, routesYAML(obj{"uri": "/hello", "upstream": upstreamOf(nodes(up.Addr()), nil)}),
		exportConfig(1, mport))
	url := fmt.Sprintf("http://127.0.0.1:%d/m", mport)
	scrape := func() string {
		resp, err := http.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 {
			t.Fatalf("scrape: %d %s", resp.StatusCode, b)
		}
		return string(b)
	}
	text := scrape()
	promCheck(t, promtool, text)
	kind := "ebpf"
	if k, _ := bpf.Probe(); k != bpf.KindEBPF && os.Getenv("CI") != "true" {
		kind = `[a-z_]+`
	}
	for _, re := range []string{
		`(?m)^coregate_socket_selector\{kind="` + kind + `",mode="hash"\} 1$`,
		`(?m)^coregate_workers 1$`,
		`(?m)^coregate_worker_restarts_total 0$`,
		`(?m)^apisix_node_info\{hostname="[^"]*",version="[0-9.]+"\} 1$`,
	} {
		if !regexp.MustCompile(re).MatchString(text) {
			t.Errorf("metrics lack %s:\n%s", re, text)
		}
	}

	// Kill the worker: the restart is counted, and the workers gauge
	// comes back to 1.
	ws := waitWorkers(t, g.cmd.Process.Pid, 1, 5*time.Second)
	if err := syscall.Kill(ws[0].pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	g.waitLog(`msg="worker respawned"`, 1, 5*time.Second)
	eventually(t, 5*time.Second, func() error {
		text := scrape()
		if !strings.Contains(text, "\ncoregate_worker_restarts_total 1\n") || !strings.Contains(text, "\ncoregate_workers 1\n") {
			return fmt.Errorf("after kill -9:\n%s", text)
		}
		return nil
	})
}

// TestConnectionMetrics: the workers' connection and request counts reach
// the export server under APISIX's names (nginx's stub_status figures),
// summed over the workers, valid for promtool; the counters do not go back
// when a worker is killed and restarted.
func TestConnectionMetrics(t *testing.T) {
	promtool := requirePromtool(t)
	cpus := requirePerCore(t)
	up := textUpstream(t, "ok")
	mport := freePort(t)
	g := startSupervisor(t, routesYAML(obj{"uri": "/hello", "upstream": upstreamOf(nodes(up.Addr()), nil)}),
		exportConfig(2, mport), 2, "--cpus", cpuList(cpus[:2]))
	url := fmt.Sprintf("http://127.0.0.1:%d/m", mport)
	type figures struct {
		requests                                             int
		accepted, handled, active, reading, writing, waiting int
		workerRequests, workerConns                          [2]int // by worker id
		text                                                 string
	}
	scrape := func() (figures, error) {
		resp, err := http.Get(url)
		if err != nil {
			return figures{}, err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		f := figures{text: string(b)}
		for name, p := range map[string]*int{
			`apisix_http_requests_total`:                              &f.requests,
			`apisix_nginx_http_current_connections{state="accepted"}`: &f.accepted,
			`apisix_nginx_http_current_connections{state="handled"}`:  &f.handled,
			`apisix_nginx_http_current_connections{state="active"}`:   &f.active,
			`apisix_nginx_http_current_connections{state="reading"}`:  &f.reading,
			`apisix_nginx_http_current_connections{state="writing"}`:  &f.writing,
			`apisix_nginx_http_current_connections{state="waiting"}`:  &f.waiting,
			`coregate_worker_requests_total{worker="0"}`:              &f.workerRequests[0],
			`coregate_worker_requests_total{worker="1"}`:              &f.workerRequests[1],
			`coregate_worker_connections{worker="0"}`:                 &f.workerConns[0],
			`coregate_worker_connections{worker="1"}`:                 &f.workerConns[1],
		} {
			m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + ` (\d+)$`).FindStringSubmatch(f.text)
			if m == nil {
				return f, fmt.Errorf("no %s in:\n%s", name, f.text)
			}
			*p, _ = strconv.Atoi(m[1])
		}
		return f, nil
	}
	waitWorkers(t, g.cmd.Process.Pid, 2, 5*time.Second)

	// Settle: whatever the start-up check did is reported, and its
	// connections are closed.
	var base figures
	eventually(t, 5*time.Second, func() error {
		f, err := scrape()
		if err != nil {
			return err
		}
		if f.active != 0 {
			return fmt.Errorf("active %d, want 0", f.active)
		}
		base = f
		return nil
	})

	// 8 connections, 5 requests each, left open and idle.
	const conns, perConn = 8, 5
	for i := 0; i < conns; i++ {
		c, err := net.Dial("tcp", g.Addr())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		br := bufio.NewReader(c)
		for j := 0; j < perConn; j++ {
			fmt.Fprintf(c, "GET /hello HTTP/1.1\r\nHost: a\r\n\r\n")
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}
	var after figures
	eventually(t, 5*time.Second, func() error {
		f, err := scrape()
		if err != nil {
			return err
		}
		got := [...]int{f.requests - base.requests, f.accepted - base.accepted, f.handled - base.handled, f.active, f.waiting, f.reading, f.writing,
			f.workerRequests[0] + f.workerRequests[1], f.workerConns[0] + f.workerConns[1]}
		want := [...]int{conns * perConn, conns, conns, conns, conns, 0, 0, f.requests, conns}
		if got != want {
			return fmt.Errorf("requests, accepted, handled (added), active, waiting, reading, writing, per-worker requests and connections summed = %v, want %v", got, want)
		}
		after = f
		return nil
	})
	promCheck(t, promtool, after.text)

	// A worker killed: its open connections leave the figures, its
	// counters stay in the totals. The victim is the worker holding the
	// most of the 8 connections: the selector may have given all of them
	// to one worker.
	ws := waitWorkers(t, g.cmd.Process.Pid, 2, 5*time.Second)
	victim := ws[0]
	for _, w := range ws {
		if after.workerConns[w.id] > after.workerConns[victim.id] {
			victim = w
		}
	}
	survivors := conns - after.workerConns[victim.id]
	if err := syscall.Kill(victim.pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	g.waitLog(`msg="worker respawned"`, 1, 5*time.Second)
	eventually(t, 5*time.Second, func() error {
		f, err := scrape()
		if err != nil {
			return err
		}
		if f.requests < after.requests || f.accepted < after.accepted || f.handled < after.handled ||
			f.workerRequests[0] < after.workerRequests[0] || f.workerRequests[1] < after.workerRequests[1] {
			return fmt.Errorf("counters went back: %d %d %d %v after %d %d %d %v", f.requests, f.accepted, f.handled, f.workerRequests,
				after.requests, after.accepted, after.handled, after.workerRequests)
		}
		if f.active != survivors || f.waiting != survivors {
			return fmt.Errorf("active %d waiting %d, want the survivor's share of %d: %d", f.active, f.waiting, conns, survivors)
		}
		return nil
	})
}

// requirePromtool returns promtool's path; without it the test skips, or
// fails when CI=true.
func requirePromtool(t *testing.T) string {
	t.Helper()
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("promtool is missing (Debian package prometheus)")
		}
		t.Skip("promtool is missing (Debian package prometheus)")
	}
	return promtool
}

// exportConfig makes a config.yaml with the given workers, the export
// server on 127.0.0.1:mport at /m and the TLS listener on
// e2e.TLSPort(port).
func exportConfig(workers, mport int) func(port int) string {
	return func(port int) string {
		return fmt.Sprintf(`apisix:
  node_listen: [%d]
  enable_control: false
%sdeployment:
  role: data_plane
  role_data_plane:
    config_provider: yaml
nginx_config:
  worker_processes: %d
  error_log_level: info
plugin_attr:
  prometheus:
    export_uri: /m
    export_addr:
      ip: 127.0.0.1
      port: %d
`, port, e2e.SSLListen(port), workers, mport)
	}
}

// promCheck runs promtool check metrics on text. APISIX exports
// apisix_http_requests_total as a gauge, which promtool's lint (exit status
// 3) flags; that is the only problem allowed.
func promCheck(t *testing.T, promtool, text string) {
	t.Helper()
	check := exec.Command(promtool, "check", "metrics")
	check.Stdin = strings.NewReader(text)
	var out bytes.Buffer
	check.Stdout, check.Stderr = &out, &out
	if err := check.Run(); err != nil {
		var ee *exec.ExitError
		problems := strings.TrimSpace(out.String())
		if !errors.As(err, &ee) || ee.ExitCode() != 3 || problems != `apisix_http_requests_total non-counter metrics should not have "_total" suffix` {
			t.Fatalf("promtool check metrics: %v\n%s\n%s", err, problems, text)
		}
	}
}
