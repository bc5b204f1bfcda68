package etcdstore

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// etcdProcess is a real etcd process (Debian's etcd-server), a one-member
// cluster on free loopback ports with its data in a temporary directory.
type etcdProcess struct {
	cmd       *exec.Cmd
	endpoints []string
	log       *bytes.Buffer
}

// startEtcdProcess starts etcd, waits until it answers, and stops it (by
// its PID) when the test ends. Without an etcd binary the test is skipped,
// except under CI, where it fails.
func startEtcdProcess(t *testing.T) *etcdProcess {
	t.Helper()
	bin, err := exec.LookPath("etcd")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("no etcd binary under CI (apt-get install etcd-server): %v", err)
		}
		t.Skipf("no etcd binary (apt-get install etcd-server): %v", err)
	}
	ports, err := freePorts(2)
	if err != nil {
		t.Fatal(err)
	}
	client := fmt.Sprintf("http://127.0.0.1:%d", ports[0])
	peer := fmt.Sprintf("http://127.0.0.1:%d", ports[1])
	p := &etcdProcess{endpoints: []string{client}, log: new(bytes.Buffer)}
	p.cmd = exec.Command(bin,
		"--name", "t",
		"--data-dir", filepath.Join(t.TempDir(), "etcd"),
		"--listen-client-urls", client,
		"--advertise-client-urls", client,
		"--listen-peer-urls", peer,
		"--initial-advertise-peer-urls", peer,
		"--initial-cluster", "t="+peer,
		"--log-level", "error",
	)
	p.cmd.Stdout = p.log
	p.cmd.Stderr = p.log
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { p.cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		p.cmd.Process.Kill()
		<-exited
		if t.Failed() {
			t.Logf("etcd output:\n%s", p.log)
		}
	})
	s, err := New(Options{Endpoints: p.endpoints, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, _, err := s.List(context.Background(), "/")
		if err == nil {
			return p
		}
		select {
		case <-exited:
			t.Fatalf("etcd exited: %v\n%s", p.cmd.ProcessState, p.log)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("etcd not answering after 30 s: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestEtcdProcess runs the store suite against a real etcd process.
func TestEtcdProcess(t *testing.T) {
	p := startEtcdProcess(t)
	runSuite(t, p.endpoints)
}
