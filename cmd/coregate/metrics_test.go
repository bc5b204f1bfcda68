package main

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"coregate/bpf"
)

// TestNodeMetrics: the export server serves the node's metrics in valid
// Prometheus text (checked by promtool): the socket selector in use, the
// live workers, and the restarts after a worker is killed.
func TestNodeMetrics(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("promtool is missing (Debian package prometheus)")
		}
		t.Skip("promtool is missing (Debian package prometheus)")
	}
	up := textUpstream(t, "ok")
	mport := freePort(t)
	g := startGatewayConfig(t, routesYAML(obj{"uri": "/hello", "upstream": upstreamOf(nodes(up.addr()), nil)}), func(port int) string {
		return fmt.Sprintf(`apisix:
  node_listen: [%d]
deployment:
  role: data_plane
  role_data_plane:
    config_provider: yaml
nginx_config:
  worker_processes: 1
plugin_attr:
  prometheus:
    export_uri: /m
    export_addr:
      ip: 127.0.0.1
      port: %d
`, port, mport)
	})
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
	check := exec.Command(promtool, "check", "metrics")
	check.Stdin = strings.NewReader(text)
	var out bytes.Buffer
	check.Stdout, check.Stderr = &out, &out
	if err := check.Run(); err != nil {
		t.Fatalf("promtool check metrics: %v\n%s\n%s", err, out.String(), text)
	}
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
