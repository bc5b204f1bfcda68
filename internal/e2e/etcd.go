package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"coregate/internal/syncbuf"
)

// Etcd is an external etcd process (Debian's etcd-server) on loopback
// ports chosen free when it is made and a data directory, which Start can
// run again on the same ports and data after a Kill. It is killed when
// the test ends; its output is logged when the test failed. An Etcd is
// one etcd of its own, or a member of an EtcdCluster.
type Etcd struct {
	// Client is the client URL, http://127.0.0.1:port.
	Client string
	// Dir is the data directory.
	Dir  string
	t    testing.TB
	bin  string
	name string
	peer string
	// cluster is etcd's --initial-cluster: name=peer of every member.
	cluster string
	cmd     *exec.Cmd
	done    chan struct{}
	log     *syncbuf.Buffer
}

// etcdBinary finds etcd. It skips the test when there is none, and fails
// it under CI=true.
func etcdBinary(t testing.TB) string {
	t.Helper()
	bin, err := exec.LookPath("etcd")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("no etcd binary under CI (apt-get install etcd-server): %v", err)
		}
		t.Skipf("no etcd binary (apt-get install etcd-server): %v", err)
	}
	return bin
}

// newEtcd makes an Etcd named name, not started, with ports taken free.
func newEtcd(t testing.TB, bin, name string) *Etcd {
	e := &Etcd{t: t, bin: bin, name: name, Dir: filepath.Join(t.TempDir(), "etcd"), log: &syncbuf.Buffer{},
		Client: fmt.Sprintf("http://127.0.0.1:%d", FreePort(t)),
		peer:   fmt.Sprintf("http://127.0.0.1:%d", FreePort(t))}
	e.cluster = name + "=" + e.peer
	t.Cleanup(func() {
		e.Kill()
		if t.Failed() {
			t.Logf("etcd %s output:\n%s", name, e.log.String())
		}
	})
	return e
}

// NewEtcd makes an Etcd, not started. It skips the test when there is no
// etcd binary, and fails it under CI=true.
func NewEtcd(t testing.TB) *Etcd {
	t.Helper()
	return newEtcd(t, etcdBinary(t), "t")
}

// Start runs etcd and waits up to 30 s until its /health answers 200.
func (e *Etcd) Start() {
	e.t.Helper()
	e.Launch()
	e.WaitHealthy(30 * time.Second)
}

// Launch runs etcd and returns at once; WaitHealthy waits for it. A
// member of a cluster that lost its quorum is launched and not waited
// for: its /health answers 503 until a leader is elected.
// The process's pid is PID's until it is killed.
func (e *Etcd) Launch() {
	e.t.Helper()
	if e.cmd != nil {
		e.t.Fatalf("etcd %s launched twice", e.name)
	}
	// --initial-cluster is read on the first start only: a member
	// started again reads its members from its data directory.
	e.cmd = exec.Command(e.bin, "--name", e.name, "--data-dir", e.Dir,
		"--listen-client-urls", e.Client, "--advertise-client-urls", e.Client,
		"--listen-peer-urls", e.peer, "--initial-advertise-peer-urls", e.peer,
		"--initial-cluster", e.cluster, "--initial-cluster-state", "new", "--log-level", "error")
	e.cmd.Stdout, e.cmd.Stderr = e.log, e.log
	if err := e.cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	done := make(chan struct{})
	e.done = done
	go func(c *exec.Cmd) { _ = c.Wait(); close(done) }(e.cmd)
}

// WaitHealthy waits up to timeout until the etcd Launch ran answers 200
// on /health (it has a leader), failing the test when it exits first or
// the timeout passes.
func (e *Etcd) WaitHealthy(timeout time.Duration) {
	e.t.Helper()
	if e.cmd == nil {
		e.t.Fatalf("etcd %s is not running", e.name)
	}
	done := e.done
	c := &http.Client{Timeout: time.Second}
	Eventually(e.t, timeout, func() error {
		select {
		case <-done:
			e.t.Fatalf("etcd %s exited:\n%s", e.name, e.log.String())
		default:
		}
		r, err := c.Get(e.Client + "/health")
		if err != nil {
			return err
		}
		r.Body.Close()
		if r.StatusCode != 200 {
			return fmt.Errorf("etcd %s /health: %d", e.name, r.StatusCode)
		}
		return nil
	})
}

// PID is the pid of the process Launch started, 0 when none runs.
func (e *Etcd) PID() int {
	if e.cmd == nil {
		return 0
	}
	return e.cmd.Process.Pid
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

// EtcdCluster is a cluster of external etcd members on loopback, each an
// Etcd of its own ports and data directory, which a test stops (Kill) and
// starts again (Start, Launch) one by one, by the member's pid, to lose
// a member or the quorum and to bring it back. Every member is killed
// when the test ends.
type EtcdCluster struct {
	Members []*Etcd
}

// NewEtcdCluster makes a cluster of n members, not started. It skips the
// test when there is no etcd binary, and fails it under CI=true.
func NewEtcdCluster(t testing.TB, n int) *EtcdCluster {
	t.Helper()
	bin := etcdBinary(t)
	c := &EtcdCluster{}
	var peers []string
	for i := range n {
		m := newEtcd(t, bin, fmt.Sprintf("m%d", i))
		c.Members = append(c.Members, m)
		peers = append(peers, m.cluster)
	}
	for _, m := range c.Members {
		m.cluster = strings.Join(peers, ",")
	}
	return c
}

// Start launches every member that does not run, then waits up to 30 s
// until each answers /health 200 (the cluster elected a leader).
func (c *EtcdCluster) Start() {
	for _, m := range c.Members {
		if m.cmd == nil {
			m.Launch()
		}
	}
	for _, m := range c.Members {
		m.WaitHealthy(30 * time.Second)
	}
}

// Endpoints are the members' client URLs, as deployment.etcd.host lists
// them.
func (c *EtcdCluster) Endpoints() []string {
	var out []string
	for _, m := range c.Members {
		out = append(out, m.Client)
	}
	return out
}

// Leader is the index in Members of the cluster's leader, as the members
// that run say; -1 when none names itself leader (an election, or the
// quorum lost).
func (c *EtcdCluster) Leader() int {
	hc := &http.Client{Timeout: time.Second}
	for i, m := range c.Members {
		if m.cmd == nil {
			continue
		}
		r, err := hc.Post(m.Client+"/v3/maintenance/status", "application/json", strings.NewReader("{}"))
		if err != nil {
			continue
		}
		var st struct {
			Header struct {
				MemberID string `json:"member_id"`
			}
			Leader string
		}
		err = json.NewDecoder(r.Body).Decode(&st)
		r.Body.Close()
		if err == nil && st.Leader != "" && st.Leader == st.Header.MemberID {
			return i
		}
	}
	return -1
}
