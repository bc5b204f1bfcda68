package etcdstore

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"coregate/admin/store"
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

// etcdMember is one member of a cluster of etcd processes.
type etcdMember struct {
	cmd    *exec.Cmd
	client string
	exited chan struct{}
}

// startEtcdCluster starts an n-member etcd cluster of processes on free
// loopback ports and waits until it answers; the members are killed (by
// PID) when the test ends.
func startEtcdCluster(t *testing.T, n int) []*etcdMember {
	t.Helper()
	bin, err := exec.LookPath("etcd")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("no etcd binary under CI (apt-get install etcd-server): %v", err)
		}
		t.Skipf("no etcd binary (apt-get install etcd-server): %v", err)
	}
	ports, err := freePorts(2 * n)
	if err != nil {
		t.Fatal(err)
	}
	var initial []string
	for i := range n {
		initial = append(initial, fmt.Sprintf("m%d=http://127.0.0.1:%d", i, ports[2*i+1]))
	}
	members := make([]*etcdMember, n)
	var logs []*bytes.Buffer
	for i := range n {
		client := fmt.Sprintf("http://127.0.0.1:%d", ports[2*i])
		peer := fmt.Sprintf("http://127.0.0.1:%d", ports[2*i+1])
		log := new(bytes.Buffer)
		logs = append(logs, log)
		cmd := exec.Command(bin,
			"--name", fmt.Sprintf("m%d", i),
			"--data-dir", filepath.Join(t.TempDir(), "etcd"),
			"--listen-client-urls", client, "--advertise-client-urls", client,
			"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
			"--initial-cluster", strings.Join(initial, ","),
			"--initial-cluster-state", "new",
			"--log-level", "error",
		)
		cmd.Stdout, cmd.Stderr = log, log
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		m := &etcdMember{cmd: cmd, client: client, exited: make(chan struct{})}
		go func() { m.cmd.Wait(); close(m.exited) }()
		members[i] = m
	}
	t.Cleanup(func() {
		for _, m := range members {
			m.kill()
		}
		if t.Failed() {
			for i, l := range logs {
				t.Logf("etcd member %d output:\n%s", i, l)
			}
		}
	})
	s, err := New(Options{Endpoints: endpointsOf(members), Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	deadline := time.Now().Add(60 * time.Second)
	for {
		if _, err := s.GenID(context.Background()); err == nil {
			return members
		} else if time.Now().After(deadline) {
			t.Fatalf("etcd cluster not answering after 60 s: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (m *etcdMember) kill() {
	m.cmd.Process.Kill()
	<-m.exited
}

func endpointsOf(ms []*etcdMember) []string {
	var eps []string
	for _, m := range ms {
		eps = append(eps, m.client)
	}
	return eps
}

// TestEtcdCluster: a store on a 3-member cluster keeps working when one
// member is stopped mid-test: a watch opened before delivers every change
// made after (resumed from its last revision if it ends), and the whole
// suite then runs with the member still down.
func TestEtcdCluster(t *testing.T) {
	members := startEtcdCluster(t, 3)
	eps := endpointsOf(members)
	s := newStore(t, eps)
	ctx := ctxT(t)
	dir := s.Prefix() + "/"
	_, rev, err := s.List(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	// put retries a write that found no leader or the stopped member: the
	// client moves to a live one.
	put := func(key string) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			_, _, err := s.Put(ctx, dir+key, []byte(`{}`), store.PutOptions{})
			if err == nil {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("Put %s with one member down: %v", key, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	seen := map[string]bool{}
	last := rev
	ch := s.Watch(ctx, dir, last+1)
	take := func(want int) {
		t.Helper()
		deadline := time.After(60 * time.Second)
		for len(seen) < want {
			select {
			case wr, ok := <-ch:
				if !ok || wr.Err != nil {
					// Lost with its member: resume from the last revision.
					ch = s.Watch(ctx, dir, last+1)
					continue
				}
				for _, ev := range wr.Events {
					seen[ev.KV.Key] = true
				}
				last = wr.Revision
			case <-deadline:
				t.Fatalf("watch saw %d keys, want %d", len(seen), want)
			}
		}
	}
	for i := range 5 {
		put(fmt.Sprintf("routes/before%d", i))
	}
	take(5)
	members[0].kill()
	for i := range 5 {
		put(fmt.Sprintf("routes/after%d", i))
	}
	take(10)
	runSuite(t, eps)
}
