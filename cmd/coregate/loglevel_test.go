package main

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestErrorLogLevel: nginx_config.error_log_level sets what the supervisor
// and the workers log. At warn, APISIX's default, a gateway that starts
// and serves writes no INFO line, and an upstream that refuses a
// connection is still logged (at ERROR, as nginx logs connect() failed);
// at crit nothing is; at info the start is. A SIGHUP with another level
// applies it.
func TestErrorLogLevel(t *testing.T) {
	t.Parallel()
	dead := deadAddr(t)
	routes := routesYAML(obj{"id": "dead-route", "uri": "/*", "upstream": upstreamOf(nodes(dead), nil)})
	config := func(level string) func(port int) string {
		return func(port int) string {
			c := baseConfig(port, "")
			if level == "" {
				return strings.Replace(c, "  error_log_level: info\n", "", 1)
			}
			return strings.Replace(c, "error_log_level: info", "error_log_level: "+level, 1)
		}
	}
	info := regexp.MustCompile(`(?m)level=INFO `)
	refused := `level=ERROR .*route=dead-route`
	for _, level := range []string{"", "warn", "error", "crit", "info"} {
		t.Run("level="+level, func(t *testing.T) {
			t.Parallel()
			g := startGatewayConfig(t, routes, config(level))
			waitWorkers(t, g.cmd.Process.Pid, 1, 5*time.Second)
			if r := do(t, newClient(t), "GET", g.url("/x"), "", nil, nil); r.status != 502 {
				t.Fatalf("status %d, want 502", r.status)
			}
			switch level {
			case "crit":
				// The upstream errors are written on the worker's 50 ms
				// tick: a second is twenty of them.
				time.Sleep(time.Second)
				if out := g.out.String(); strings.Contains(out, "level=") {
					t.Errorf("at crit the gateway logged:\n%s", out)
				}
			default:
				g.waitLog(refused, 1, 5*time.Second)
				if got, want := info.MatchString(g.out.String()), level == "info"; got != want {
					t.Errorf("INFO lines written: %v, want %v:\n%s", got, want, g.out.String())
				}
			}
			if level != "crit" {
				return
			}
			// The level changes on SIGHUP: the supervisor's own lines at
			// once, the workers' as they are replaced.
			writeFile(t, filepath.Join(g.dir, "config.yaml"), config("info")(g.port))
			if err := g.cmd.Process.Signal(syscall.SIGHUP); err != nil {
				t.Fatal(err)
			}
			g.waitLog(`level=INFO .*proc=supervisor`, 1, 5*time.Second)
			g.waitLog(`level=INFO .*msg="worker replaced"`, 1, 5*time.Second)
			eventually(t, 5*time.Second, func() error {
				if r := do(t, newClient(t), "GET", g.url("/x"), "", nil, nil); r.status != 502 {
					return fmt.Errorf("status %d, want 502", r.status)
				}
				if !regexp.MustCompile(refused).MatchString(g.out.String()) {
					return fmt.Errorf("no upstream error logged after the SIGHUP")
				}
				return nil
			})
		})
	}
}
