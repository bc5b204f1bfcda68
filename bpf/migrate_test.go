//go:build linux

package bpf

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

const queued = 20 // connections left in a listener's accept queue

// queueClients opens queued connections to port, each sending "msg-<i>", and
// returns their sockets (closed at cleanup).
func queueClients(t *testing.T, port int) []int {
	t.Helper()
	cs := make([]int, 0, queued)
	t.Cleanup(func() {
		for _, fd := range cs {
			closeReset(fd)
		}
	})
	for i := range queued {
		fd, err := dial(port)
		if err != nil {
			t.Fatalf("dial %d: %v", i, err)
		}
		cs = append(cs, fd)
		if _, err := unix.Write(fd, fmt.Appendf(nil, "msg-%d", i)); err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
	}
	return cs
}

// outcome is what became of the queued connections after their listener went.
type outcome struct {
	accepted int // accepted by the surviving listener with their data intact
	served   int // clients that read the surviving listener's reply
	reset    int // clients that saw ECONNRESET or EOF
}

// serveSurvivor accepts on the surviving listener until want connections came
// or quiet passed without one, checks each one's data, replies, and then
// reads every client's fate.
func serveSurvivor(t *testing.T, survivor int, clients []int, want int, quiet time.Duration) outcome {
	t.Helper()
	var o outcome
	seen := map[string]bool{}
	for o.accepted < want {
		_, afd, err := acceptAny([]int{survivor}, quiet)
		if err != nil {
			break
		}
		buf := make([]byte, 64)
		n, err := readTimeout(afd, buf, 2*time.Second)
		if err != nil {
			unix.Close(afd)
			t.Errorf("read migrated connection: %v", err)
			continue
		}
		msg := string(buf[:n])
		if !strings.HasPrefix(msg, "msg-") || seen[msg] {
			t.Errorf("migrated connection carried %q", msg)
		}
		seen[msg] = true
		o.accepted++
		unix.Write(afd, []byte("ok"))
		unix.Close(afd)
	}
	for i, fd := range clients {
		buf := make([]byte, 8)
		n, err := readTimeout(fd, buf, 2*time.Second)
		switch {
		case err == nil && string(buf[:n]) == "ok":
			o.served++
		case errors.Is(err, unix.ECONNRESET) || (err == nil && n == 0):
			o.reset++
		default:
			t.Errorf("client %d: read %q, %v", i, buf[:n], err)
		}
	}
	return o
}

// TestMigrateOnClose leaves connections in listener A's accept queue, closes
// A, and checks that B accepts all of them with their data, and that the
// control (the same program attached as plain SELECT, sysctl off) resets
// them all.
func TestMigrateOnClose(t *testing.T) {
	requireEBPF(t)
	tests := []struct {
		name    string
		migrate bool
		live    int // 1: the program falls back to the kernel hash; 2: it probes slot 1
		want    outcome
	}{
		{"select_or_migrate, hash fallback", true, 1, outcome{queued, queued, 0}},
		{"select_or_migrate, next slot", true, 2, outcome{queued, queued, 0}},
		{"select only", false, 1, outcome{0, 0, queued}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			setMigrateSysctl(t, "0")
			s, err := newSelector(ModeCPU, 2, nil, tt.migrate)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if s.Migrates() != tt.migrate {
				t.Fatalf("Migrates() = %v", s.Migrates())
			}
			ls := listenGroup(t, 2)
			joinAll(t, s, ls)
			// Every connection goes to A: every CPU maps to slot 0.
			for c := range s.ncpu {
				if err := s.cpumap.Put(uint32(c), uint32(0)); err != nil {
					t.Fatal(err)
				}
			}
			if err := s.SetLive(tt.live); err != nil {
				t.Fatal(err)
			}
			clients := queueClients(t, ls[0].port)
			if !waitFor(2*time.Second, func() bool { return queueLen(t, ls[0].fd) == queued }) {
				t.Fatalf("A queue = %d, want %d", queueLen(t, ls[0].fd), queued)
			}
			if q := queueLen(t, ls[1].fd); q != 0 {
				t.Fatalf("B queue = %d before close, want 0", q)
			}
			ls[0].close()
			got := serveSurvivor(t, ls[1].fd, clients, queued, 300*time.Millisecond)
			if got != tt.want {
				t.Errorf("after close(A): %+v, want %+v", got, tt.want)
			}
		})
	}
}

// TestMigrateKernelHash is the KindKernelHash fallback: no program, the
// kernel's hash, and net.ipv4.tcp_migrate_req deciding the fate of A's queue.
func TestMigrateKernelHash(t *testing.T) {
	if err := probeMigrateSysctl(); err != nil {
		skipUnsupported(t, "tcp_migrate_req", err)
	}
	for _, sysctl := range []string{"1", "0"} {
		t.Run("tcp_migrate_req="+sysctl, func(t *testing.T) {
			setMigrateSysctl(t, sysctl)
			ls := listenGroup(t, 2)
			clients := queueClients(t, ls[0].port)
			var qa, qb int
			if !waitFor(2*time.Second, func() bool {
				qa, qb = queueLen(t, ls[0].fd), queueLen(t, ls[1].fd)
				return qa+qb == queued
			}) {
				t.Fatalf("queues %d + %d, want %d", qa, qb, queued)
			}
			if qa == 0 {
				t.Fatalf("kernel hash put no connection on A (queues %d/%d)", qa, qb)
			}
			ls[0].close()
			want := outcome{queued, queued, 0}
			if sysctl == "0" {
				want = outcome{qb, qb, qa}
			}
			if got := serveSurvivor(t, ls[1].fd, clients, queued, 300*time.Millisecond); got != want {
				t.Errorf("A had %d, B %d; after close(A): %+v, want %+v", qa, qb, got, want)
			}
		})
	}
}

// startMember re-executes the test binary as a worker process that opens the
// selector from inherited descriptors, with every capability dropped, and
// joins slot 0 with its own listener on port. It returns once the child
// reported ready, with the child's CapEff.
func startMember(t *testing.T, s *Selector, port int) (*exec.Cmd, string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(),
		envRole+"="+roleMember,
		envPort+"="+strconv.Itoa(port),
		envSlot+"=0",
		envDropCaps+"=1",
	)
	cmd.ExtraFiles = s.Files()
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stdin.Close()
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	line := make(chan string, 1)
	go func() {
		l, _ := bufio.NewReader(stdout).ReadString('\n')
		line <- l
	}()
	select {
	case l := <-line:
		capeff, ok := strings.CutPrefix(strings.TrimSpace(l), "ready capeff=")
		if !ok {
			t.Fatalf("child: %q", l)
		}
		return cmd, capeff
	case <-time.After(10 * time.Second):
		t.Fatal("child not ready after 10s")
	}
	return nil, ""
}

// TestMigrateOnKill kills, with SIGKILL, a worker process whose listener
// holds queued connections: they are served by the surviving listener.
func TestMigrateOnKill(t *testing.T) {
	requireEBPF(t)
	setMigrateSysctl(t, "0")
	s := newTestSelector(t, ModeHash, 2, nil)
	ls := listenGroup(t, 1) // B, in this process, slot 1
	mb, err := OpenMember(s.Files(), 1)
	if err != nil {
		t.Fatal(err)
	}
	defer mb.Close()
	if err := mb.Join(ls[0].fd); err != nil {
		t.Fatal(err)
	}
	cmd, capeff := startMember(t, s, ls[0].port)
	if capeff != "0000000000000000" {
		t.Errorf("child CapEff = %s, want none", capeff)
	}
	if got := s.Conns(0); got != childConns {
		t.Errorf("count published by the child = %d, want %d", got, childConns)
	}
	if err := s.SetLive(1); err != nil { // everything to slot 0, the child
		t.Fatal(err)
	}
	clients := queueClients(t, ls[0].port)
	time.Sleep(20 * time.Millisecond)
	if q := queueLen(t, ls[0].fd); q != 0 {
		t.Fatalf("B queue = %d before the kill, want 0 (all in the child's)", q)
	}
	start := time.Now()
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	err = cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("child exit: %v, want killed by SIGKILL", err)
	}
	got := serveSurvivor(t, ls[0].fd, clients, queued, 2*time.Second)
	t.Logf("kill -9 to %d migrated connections served: %v", got.accepted, time.Since(start))
	if want := (outcome{queued, queued, 0}); got != want {
		t.Errorf("after SIGKILL: %+v, want %+v", got, want)
	}
	// The dead worker's slot is empty: new connections go to B.
	if counts := steer(t, ls, -1, 50); counts[0] != 50 {
		t.Errorf("after the kill: counts %v, want all 50 on B", counts)
	}
}

// TestMigrateHalfOpen leaves A's connections half-open on the server side
// (TCP_DEFER_ACCEPT keeps them as request sockets until data comes), closes
// A, and only then lets the clients send: the request sockets migrate to B.
// The control (plain SELECT, sysctl off) resets them.
func TestMigrateHalfOpen(t *testing.T) {
	requireEBPF(t)
	tests := []struct {
		name    string
		migrate bool
		want    outcome
	}{
		{"select_or_migrate", true, outcome{queued, queued, 0}},
		{"select only", false, outcome{0, 0, queued}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			setMigrateSysctl(t, "0")
			s, err := newSelector(ModeCPU, 2, nil, tt.migrate)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			ls := listenGroup(t, 2)
			joinAll(t, s, ls)
			for c := range s.ncpu {
				if err := s.cpumap.Put(uint32(c), uint32(0)); err != nil {
					t.Fatal(err)
				}
			}
			if err := unix.SetsockoptInt(ls[0].fd, unix.IPPROTO_TCP, unix.TCP_DEFER_ACCEPT, 10); err != nil {
				t.Fatal(err)
			}
			clients := make([]int, 0, queued)
			t.Cleanup(func() {
				for _, fd := range clients {
					closeReset(fd)
				}
			})
			for i := range queued {
				fd, err := dial(ls[0].port)
				if err != nil {
					t.Fatalf("dial %d: %v", i, err)
				}
				clients = append(clients, fd)
			}
			time.Sleep(20 * time.Millisecond)
			if qa, qb := queueLen(t, ls[0].fd), queueLen(t, ls[1].fd); qa != 0 || qb != 0 {
				t.Fatalf("accept queues %d/%d, want 0/0 (connections half-open)", qa, qb)
			}
			ls[0].close()
			for i, fd := range clients {
				if _, err := unix.Write(fd, fmt.Appendf(nil, "msg-%d", i)); err != nil {
					t.Fatalf("write %d: %v", i, err)
				}
			}
			if got := serveSurvivor(t, ls[1].fd, clients, queued, 500*time.Millisecond); got != tt.want {
				t.Errorf("after close(A): %+v, want %+v", got, tt.want)
			}
		})
	}
}
