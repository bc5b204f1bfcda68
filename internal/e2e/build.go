package e2e

import (
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

// handed are the ports FreePort returned in this test process.
var handed = struct {
	sync.Mutex
	ports map[int]bool
}{ports: map[int]bool{}}

// FreePort returns a loopback TCP port nobody listens on right now and
// that FreePort has not returned before in this process. It is safe for
// concurrent use.
func FreePort(t testing.TB) int {
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

// DeadAddr returns a loopback address where nothing listens.
func DeadAddr(t testing.TB) string {
	return fmt.Sprintf("127.0.0.1:%d", FreePort(t))
}
