package main

import (
	"io"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// TestReplacedWorkerClock: a worker that replaced another on a config
// change and then sat idle counts its first connection's deadlines from
// when that connection came. Its clock used to stand still until its first
// connection, so a head sent in two parts 300ms apart after more than
// client_header_timeout of idleness got 408.
func TestReplacedWorkerClock(t *testing.T) {
	t.Parallel()
	up := textUpstream(t, "ok")
	g := startGateway(t, routesYAML(obj{"id": 1, "uri": "/*", "upstream": upstreamOf(nodes(up.Addr()), nil)}),
		"  http:\n    client_header_timeout: 2s\n")
	// A changed client_header_timeout replaces the worker.
	writeFile(t, filepath.Join(g.dir, "config.yaml"), baseConfig(g.port, "  http:\n    client_header_timeout: 1s\n"))
	if err := g.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	g.waitLog(`msg="worker replaced"`, 1, 10*time.Second)
	g.waitLog(`msg="replaced worker exited"`, 1, 10*time.Second)
	time.Sleep(1500 * time.Millisecond)

	c := dialGateway(t, g)
	br := newReader(c)
	_, _ = io.WriteString(c, "GET /x HTTP/1.1\r\n")
	time.Sleep(300 * time.Millisecond)
	_, _ = io.WriteString(c, "Host: x\r\n\r\n")
	if r := readOne(t, br, "GET"); r.status != 200 {
		t.Fatalf("got %d, want 200", r.status)
	}
}
