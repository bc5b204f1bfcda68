package e2e

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

// Build builds the main package in the current directory (a TestMain's
// package) into a new temporary directory, with the race detector when
// race is set, and returns the binary's path and a function that removes
// the directory. The go command's output goes to standard error.
func Build(race bool) (bin string, remove func(), err error) {
	dir, err := os.MkdirTemp("", "coregate-e2e-")
	if err != nil {
		return "", nil, err
	}
	remove = func() { os.RemoveAll(dir) }
	bin = filepath.Join(dir, "coregate")
	args := []string{"build", "-o", bin}
	if race {
		// The gateway's own data races show under a race-enabled test run.
		args = append(args, "-race")
	}
	build := exec.Command("go", append(args, ".")...)
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		remove()
		return "", nil, fmt.Errorf("build: %w", err)
	}
	return bin, remove, nil
}

// handed are the ports FreePort returned in this test process, and the
// TLS port TLSPort paired with each listen port it was asked for.
var handed = struct {
	sync.Mutex
	ports map[int]bool
	tls   map[int]int
}{ports: map[int]bool{}, tls: map[int]int{}}

// FreePort returns a loopback TCP port nobody listens on right now and
// that FreePort has not returned before in this process. It is safe for
// concurrent use.
func FreePort(t testing.TB) int {
	t.Helper()
	handed.Lock()
	defer handed.Unlock()
	port, err := freePortLocked()
	if err != nil {
		t.Fatal(err)
	}
	return port
}

// freePortLocked is FreePort, handed locked.
func freePortLocked() (int, error) {
	for range 100 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, err
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		// A port just closed is the kernel's likely next pick: two calls
		// in a row (an admin and a metrics port) could get the same one.
		if !handed.ports[port] {
			handed.ports[port] = true
			return port, nil
		}
	}
	return 0, errors.New("no free port not handed out before")
}

// TLSPort is the port of the TLS listener (apisix.ssl.listen) of the
// gateway whose listen port (apisix.node_listen) is port, a FreePort: a
// FreePort of its own the first time it is asked for port in this
// process, the same one after, so that a config.yaml written again for
// the same gateway, or for the node that takes its workers over, keeps
// it. It panics where FreePort would fail its test (it takes no test:
// config.yaml templates call it). It is safe for concurrent use.
func TLSPort(port int) int {
	handed.Lock()
	defer handed.Unlock()
	if p, ok := handed.tls[port]; ok {
		return p
	}
	p, err := freePortLocked()
	if err != nil {
		panic("e2e: TLS port: " + err.Error())
	}
	handed.tls[port] = p
	return p
}

// SSLListen is the apisix.ssl section of a config.yaml, indented to go
// under its apisix key, for the gateway whose listen port is port: TLS on
// 127.0.0.1:TLSPort(port), instead of APISIX's default, the fixed port
// 9443, that every gateway a test starts would share.
func SSLListen(port int) string {
	return fmt.Sprintf("  ssl:\n    listen:\n      - ip: 127.0.0.1\n        port: %d\n", TLSPort(port))
}

// DeadAddr returns a loopback address where nothing listens.
func DeadAddr(t testing.TB) string {
	return fmt.Sprintf("127.0.0.1:%d", FreePort(t))
}
