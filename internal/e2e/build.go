package e2e

import (
	"errors"
	"fmt"
	"math/rand/v2"
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

// freePortLocked is FreePort, handed locked. The port is drawn from below
// the kernel's ephemeral range (ip_local_port_range), which the outgoing
// connections of every process on the machine take their local ports
// from: a port handed out there could be taken by a connection of another
// test's gateway, upstream or etcd client between this call and the bind
// of the gateway it is for, an EADDRINUSE that lasts as long as that
// connection. Below the range only a listener asking for that very port
// can take it.
func freePortLocked() (int, error) {
	lo, hi := portRange()
	for range 200 {
		port := lo + rand.IntN(hi-lo)
		if handed.ports[port] {
			continue
		}
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			continue
		}
		l.Close()
		handed.ports[port] = true
		return port, nil
	}
	return 0, errors.New("no free port not handed out before")
}

// portRange is the range FreePort draws from: from 10000 (above the
// ports services are configured on) to the start of the ephemeral range,
// or 20000–30000 when that range cannot be read or starts too low.
func portRange() (lo, hi int) {
	lo, hi = 10000, 30000
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return lo, hi
	}
	var first, last int
	if _, err := fmt.Sscan(string(b), &first, &last); err != nil || first < lo+5000 {
		return 20000, 30000
	}
	return lo, first
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
