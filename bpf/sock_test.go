//go:build linux

package bpf

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

var loopback = [4]byte{127, 0, 0, 1}

// rawListen opens a non-blocking SO_REUSEPORT TCP listener on 127.0.0.1:port
// (port 0: a free one) with raw system calls, and returns it with its port.
func rawListen(port int) (int, int, error) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, 0, err
	}
	err = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEPORT, 1)
	if err == nil {
		err = unix.Bind(fd, &unix.SockaddrInet4{Port: port, Addr: loopback})
	}
	if err == nil {
		err = unix.Listen(fd, 512)
	}
	var sa unix.Sockaddr
	if err == nil {
		sa, err = unix.Getsockname(fd)
	}
	if err != nil {
		unix.Close(fd)
		return -1, 0, err
	}
	return fd, sa.(*unix.SockaddrInet4).Port, nil
}

// listener is a test listener that closes at cleanup unless closed before.
type listener struct {
	fd     int
	port   int
	closed bool
}

func (l *listener) close() {
	if !l.closed {
		l.closed = true
		unix.Close(l.fd)
	}
}

// listenGroup opens n listeners in one reuseport group on a free port.
func listenGroup(t testing.TB, n int) []*listener {
	t.Helper()
	ls := make([]*listener, 0, n)
	port := 0
	for range n {
		fd, p, err := rawListen(port)
		if err != nil {
			t.Fatalf("listen on port %d: %v", port, err)
		}
		port = p
		l := &listener{fd: fd, port: p}
		t.Cleanup(l.close)
		ls = append(ls, l)
	}
	return ls
}

func fds(ls []*listener) []int {
	out := make([]int, len(ls))
	for i, l := range ls {
		out[i] = l.fd
	}
	return out
}

// dial connects a blocking socket to 127.0.0.1:port from the calling thread.
func dial(port int) (int, error) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	if err := unix.Connect(fd, &unix.SockaddrInet4{Port: port, Addr: loopback}); err != nil {
		unix.Close(fd)
		return -1, err
	}
	return fd, nil
}

// closeReset closes fd with an RST, leaving no TIME_WAIT behind.
func closeReset(fd int) {
	unix.SetsockoptLinger(fd, unix.SOL_SOCKET, unix.SO_LINGER, &unix.Linger{Onoff: 1, Linger: 0})
	unix.Close(fd)
}

// acceptAny waits up to timeout for a connection on any of the listeners and
// returns the listener's index and the accepted socket (blocking).
func acceptAny(lfds []int, timeout time.Duration) (int, int, error) {
	pfds := make([]unix.PollFd, len(lfds))
	deadline := time.Now().Add(timeout)
	for {
		for i, fd := range lfds {
			pfds[i] = unix.PollFd{Fd: int32(fd), Events: unix.POLLIN}
		}
		left := time.Until(deadline)
		if left <= 0 {
			return -1, -1, errors.New("accept: timed out")
		}
		_, err := unix.Poll(pfds, int(left.Milliseconds())+1)
		if err != nil && !errors.Is(err, unix.EINTR) {
			return -1, -1, err
		}
		for i, p := range pfds {
			if p.Revents&unix.POLLIN == 0 {
				continue
			}
			nfd, _, err := unix.Accept4(lfds[i], unix.SOCK_CLOEXEC)
			if errors.Is(err, unix.EAGAIN) {
				continue
			}
			if err != nil {
				return -1, -1, err
			}
			return i, nfd, nil
		}
	}
}

// onCPU runs fn on a fresh OS thread pinned to cpu (cpu < 0: not pinned). The
// thread is discarded afterwards.
func onCPU(t testing.TB, cpu int, fn func()) {
	t.Helper()
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread exits with the goroutine
		if cpu >= 0 {
			var set unix.CPUSet
			set.Set(cpu)
			if err := unix.SchedSetaffinity(0, &set); err != nil {
				errc <- fmt.Errorf("pin to cpu %d: %w", cpu, err)
				return
			}
		}
		fn()
		errc <- nil
	}()
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
}

// steer dials n connections to port from a thread on cpu (-1: any) and
// returns how many each listener accepted.
func steer(t testing.TB, ls []*listener, cpu, n int) []int {
	t.Helper()
	counts := make([]int, len(ls))
	lfds := fds(ls)
	var err error
	onCPU(t, cpu, func() {
		for range n {
			var cfd, afd, idx int
			if cfd, err = dial(ls[0].port); err != nil {
				return
			}
			idx, afd, err = acceptAny(lfds, 2*time.Second)
			closeReset(cfd)
			if err != nil {
				return
			}
			unix.Close(afd)
			counts[idx]++
		}
	})
	if err != nil {
		t.Fatalf("steer from cpu %d: %v", cpu, err)
	}
	return counts
}

// allowedCPUs returns the CPUs of the process affinity mask.
func allowedCPUs(t testing.TB) []int {
	t.Helper()
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		t.Fatal(err)
	}
	var cpus []int
	for c := range 1024 {
		if set.IsSet(c) {
			cpus = append(cpus, c)
		}
	}
	return cpus
}

// queueLen returns the accept-queue length of a listening socket (for a
// listener, TCP_INFO's tcpi_unacked is sk_ack_backlog).
func queueLen(t testing.TB, fd int) int {
	t.Helper()
	info, err := unix.GetsockoptTCPInfo(fd, unix.IPPROTO_TCP, unix.TCP_INFO)
	if err != nil {
		t.Fatalf("tcp_info: %v", err)
	}
	return int(info.Unacked)
}

// waitFor polls cond every millisecond for up to timeout.
func waitFor(timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(time.Millisecond)
	}
	return true
}

// readTimeout reads once from a blocking socket, waiting up to timeout.
func readTimeout(fd int, buf []byte, timeout time.Duration) (int, error) {
	p := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	deadline := time.Now().Add(timeout)
	for {
		left := time.Until(deadline)
		if left <= 0 {
			return 0, errors.New("read: timed out")
		}
		n, err := unix.Poll(p, int(left.Milliseconds())+1)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return 0, err
		}
		if n > 0 {
			return unix.Read(fd, buf)
		}
	}
}

// setMigrateSysctl sets net.ipv4.tcp_migrate_req for the test and restores it.
func setMigrateSysctl(t testing.TB, v string) {
	t.Helper()
	old, err := os.ReadFile(migrateSysctl)
	if err != nil {
		t.Fatalf("read %s: %v", migrateSysctl, err)
	}
	if err := os.WriteFile(migrateSysctl, []byte(v+"\n"), 0o644); err != nil {
		t.Fatalf("write %s: %v", migrateSysctl, err)
	}
	t.Cleanup(func() {
		if err := os.WriteFile(migrateSysctl, old, 0o644); err != nil {
			t.Errorf("restore %s to %q: %v", migrateSysctl, strings.TrimSpace(string(old)), err)
		}
	})
}
