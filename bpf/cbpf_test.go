//go:build linux

package bpf

import (
	"errors"
	"net"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestCBPFSteerCPU: with the classic program in cpu mode, a client on CPU c
// lands on the c-th listener of the group (listen order); switching the
// group to hash mode spreads connections again.
func TestCBPFSteerCPU(t *testing.T) {
	if err := probeCBPF(); err != nil {
		skipUnsupported(t, "classic BPF", err)
	}
	cpus := allowedCPUs(t)
	if len(cpus) > 4 {
		cpus = cpus[:4]
	}
	n := min(cpus[len(cpus)-1]+1, 64)
	if n < 2 {
		n = 2
	}
	ls := listenGroup(t, n)
	if err := AttachCBPF(ls[0].fd, ModeCPU); err != nil {
		t.Fatal(err)
	}
	const dials = 100
	for _, c := range cpus {
		if c >= n {
			continue
		}
		counts := steer(t, ls, c, dials)
		t.Logf("cbpf cpu mode, client on cpu %d: %v", c, counts)
		if counts[c]*100 < 99*dials {
			t.Errorf("client on cpu %d: counts %v, want >= 99%% on listener %d", c, counts, c)
		}
	}
	if err := AttachCBPF(ls[1].fd, ModeHash); err != nil {
		t.Fatal(err)
	}
	counts := steer(t, ls, cpus[0], 2*dials)
	used := 0
	for _, v := range counts {
		if v > 0 {
			used++
		}
	}
	t.Logf("cbpf hash mode, client on cpu %d: %v", cpus[0], counts)
	if used < 2 {
		t.Errorf("hash mode from one cpu: counts %v, want several listeners", counts)
	}
	if err := AttachCBPF(ls[0].fd, Mode(9)); !errors.Is(err, ErrBadMode) {
		t.Errorf("AttachCBPF(bad mode) = %v, want ErrBadMode", err)
	}
	if err := AttachCBPF(-1, ModeCPU); err == nil || errors.Is(err, ErrNotSupported) {
		t.Errorf("AttachCBPF(-1) = %v, want a plain error", err)
	}
}

// TestAttachDropAll: a socket with the drop-all filter receives nothing
// (a datagram socket shows it without timing a handshake); on a listener
// it completes no new handshake, where the kernel lets a listener take a
// socket filter (some refuse with EOPNOTSUPP).
func TestAttachDropAll(t *testing.T) {
	recv := func(filter bool) error {
		pc, err := net.ListenPacket("udp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer pc.Close()
		if filter {
			if err := AttachDropAll(fdOf(t, pc.(*net.UDPConn))); err != nil {
				t.Fatal(err)
			}
		}
		c, err := net.Dial("udp", pc.LocalAddr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := c.Write([]byte("x")); err != nil {
			t.Fatal(err)
		}
		_ = pc.SetReadDeadline(time.Now().Add(time.Second))
		_, _, err = pc.ReadFrom(make([]byte, 8))
		return err
	}
	if err := recv(false); err != nil {
		t.Fatalf("without the filter: %v", err)
	}
	if err := recv(true); err == nil {
		t.Fatal("with the filter: a datagram came through")
	} else if ne, ok := err.(net.Error); !ok || !ne.Timeout() {
		t.Fatalf("with the filter: %v, want a timeout", err)
	}

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if err := AttachDropAll(fdOf(t, l.(*net.TCPListener))); errors.Is(err, unix.EOPNOTSUPP) {
		t.Skipf("this kernel refuses a socket filter on a listener: %v", err)
	} else if err != nil {
		t.Fatal(err)
	}
	c, err := net.DialTimeout("tcp", l.Addr().String(), 500*time.Millisecond)
	if err == nil {
		c.Close()
		t.Fatal("dial to a listener with the filter succeeded, want a timeout")
	}
}

func fdOf(t *testing.T, c syscall.Conn) int {
	t.Helper()
	raw, err := c.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var fd int
	if err := raw.Control(func(f uintptr) { fd = int(f) }); err != nil {
		t.Fatal(err)
	}
	return fd
}
