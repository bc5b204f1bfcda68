package e2e

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"coregate/internal/syncbuf"
)

// Etcd is an external etcd process (Debian's etcd-server) on loopback
// ports chosen free when it is made and a data directory, which Start can
// run again on the same ports and data after a Kill. It is killed when
// the test ends; its output is logged when the test failed.
type Etcd struct {
	// Client is the client URL, http://127.0.0.1:port.
	Client string
	// Dir is the data directory.
	Dir  string
	t    testing.TB
	bin  string
	peer string
	cmd  *exec.Cmd
	done chan struct{}
	log  *syncbuf.Buffer
}

// NewEtcd makes an Etcd, not started. It skips the test when there is no
// etcd binary, and fails it under CI=true.
func NewEtcd(t testing.TB) *Etcd {
	t.Helper()
	bin, err := exec.LookPath("etcd")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("no etcd binary under CI (apt-get install etcd-server): %v", err)
		}
		t.Skipf("no etcd binary (apt-get install etcd-server): %v", err)
	}
	e := &Etcd{t: t, bin: bin, Dir: filepath.Join(t.TempDir(), "etcd"), log: &syncbuf.Buffer{},
		Client: fmt.Sprintf("http://127.0.0.1:%d", FreePort(t)),
		peer:   fmt.Sprintf("http://127.0.0.1:%d", FreePort(t))}
	t.Cleanup(func() {
		e.Kill()
		if t.Failed() {
			t.Logf("etcd output:\n%s", e.log.String())
		}
	})
	return e
}

// Start runs etcd and waits up to 30 s until its /health answers 200.
func (e *Etcd) Start() {
	e.t.Helper()
	e.cmd = exec.Command(e.bin, "--name", "t", "--data-dir", e.Dir,
		"--listen-client-urls", e.Client, "--advertise-client-urls", e.Client,
		"--listen-peer-urls", e.peer, "--initial-advertise-peer-urls", e.peer,
		"--initial-cluster", "t="+e.peer, "--log-level", "error")
	e.cmd.Stdout, e.cmd.Stderr = e.log, e.log
	if err := e.cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	done := make(chan struct{})
	e.done = done
	go func(c *exec.Cmd) { _ = c.Wait(); close(done) }(e.cmd)
	c := &http.Client{Timeout: time.Second}
	Eventually(e.t, 30*time.Second, func() error {
		select {
		case <-done:
			e.t.Fatalf("etcd exited:\n%s", e.log.String())
		default:
		}
		r, err := c.Get(e.Client + "/health")
		if err != nil {
			return err
		}
		r.Body.Close()
		if r.StatusCode != 200 {
			return fmt.Errorf("etcd /health: %d", r.StatusCode)
		}
		return nil
	})
}

// Kill ends the process Start started with SIGKILL, as a crash would, and
// waits for it; it does nothing when none runs.
func (e *Etcd) Kill() {
	if e.cmd == nil {
		return
	}
	_ = e.cmd.Process.Signal(syscall.SIGKILL)
	<-e.done
	e.cmd = nil
}
