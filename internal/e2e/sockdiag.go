package e2e

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TCPEntry is a TCP socket as the kernel's sock_diag reports it.
type TCPEntry struct {
	LocalPort, RemotePort int
	State                 int // 1 ESTABLISHED, 8 CLOSE_WAIT, ...
	Inode                 uint64
}

// ServerSockets returns the server side of the connections to the gateway
// port, by the client's port. An inode of 0 means no process accepted the
// connection yet (it waits in an accept queue). It asks sock_diag for
// every state but TIME_WAIT and LISTEN (reading /proc/net/tcp instead would
// walk the tens of thousands of TIME_WAIT sockets load tests leave behind).
func ServerSockets(t testing.TB, port int) map[int]TCPEntry {
	t.Helper()
	out := map[int]TCPEntry{}
	for _, family := range []uint8{unix.AF_INET, unix.AF_INET6} {
		entries, err := diagTCP(family, 0xfff&^(1<<6|1<<10))
		if err != nil {
			t.Fatalf("sock_diag: %v", err)
		}
		for _, e := range entries {
			if e.LocalPort == port {
				out[e.RemotePort] = e
			}
		}
	}
	return out
}

// diagTCP dumps the TCP sockets of family whose state is in the states bit
// mask, through NETLINK_SOCK_DIAG (struct inet_diag_req_v2 in, struct
// inet_diag_msg out).
func diagTCP(family uint8, states uint32) ([]TCPEntry, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, unix.NETLINK_SOCK_DIAG)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	_ = unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &unix.Timeval{Sec: 5})
	req := make([]byte, unix.NLMSG_HDRLEN+56)
	binary.NativeEndian.PutUint32(req[0:], uint32(len(req)))
	binary.NativeEndian.PutUint16(req[4:], unix.SOCK_DIAG_BY_FAMILY)
	binary.NativeEndian.PutUint16(req[6:], unix.NLM_F_REQUEST|unix.NLM_F_DUMP)
	binary.NativeEndian.PutUint32(req[8:], 1)
	r := req[unix.NLMSG_HDRLEN:]
	r[0], r[1] = family, unix.IPPROTO_TCP
	binary.NativeEndian.PutUint32(r[4:], states)
	if err := unix.Sendto(fd, req, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return nil, err
	}
	var out []TCPEntry
	buf := make([]byte, 1<<16)
	// Bounded: a dump of a million sockets ends well within 100000 reads.
	for range 100000 {
		n, _, err := unix.Recvfrom(fd, buf, 0)
		if err != nil {
			return nil, err
		}
		msgs, err := syscall.ParseNetlinkMessage(buf[:n])
		if err != nil {
			return nil, err
		}
		for _, m := range msgs {
			switch m.Header.Type {
			case unix.NLMSG_DONE:
				return out, nil
			case unix.NLMSG_ERROR:
				return nil, fmt.Errorf("netlink error %v", m.Data)
			}
			d := m.Data
			if len(d) < 72 {
				continue
			}
			out = append(out, TCPEntry{
				State:      int(d[1]),
				LocalPort:  int(binary.BigEndian.Uint16(d[4:])),
				RemotePort: int(binary.BigEndian.Uint16(d[6:])),
				Inode:      uint64(binary.NativeEndian.Uint32(d[68:])),
			})
		}
	}
	return nil, errors.New("sock_diag: the dump did not end")
}

// SocketOwners maps socket inodes to the pid among pids that holds them.
func SocketOwners(pids []int) map[uint64]int {
	out := map[uint64]int{}
	for _, pid := range pids {
		dir := "/proc/" + strconv.Itoa(pid) + "/fd"
		ents, err := os.ReadDir(dir)
		if err != nil {
			continue
		}
		for _, e := range ents {
			link, err := os.Readlink(filepath.Join(dir, e.Name()))
			if err != nil || !strings.HasPrefix(link, "socket:[") {
				continue
			}
			inode, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimPrefix(link, "socket:["), "]"), 10, 64)
			if err == nil {
				out[inode] = pid
			}
		}
	}
	return out
}

// AcceptedBy waits until the gateway accepted every connection whose client
// port is in ports, and returns the worker pid that holds each (by port).
func AcceptedBy(t testing.TB, gwPort int, ports []int, pids []int, timeout time.Duration) map[int]int {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		socks := ServerSockets(t, gwPort)
		owners := SocketOwners(pids)
		got := map[int]int{}
		missing := 0
		for _, p := range ports {
			e, ok := socks[p]
			if !ok || e.Inode == 0 {
				missing++
				continue
			}
			if pid, ok := owners[e.Inode]; ok {
				got[p] = pid
			} else {
				missing++
			}
		}
		if missing == 0 {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %d of %d connections not held by a worker", timeout, missing, len(ports))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// LocalPort is the client-side port of c.
func LocalPort(c net.Conn) int { return c.LocalAddr().(*net.TCPAddr).Port }

// DialPinned opens n connections to addr from a thread pinned to cpu: on
// loopback the SYN is processed on the CPU of the thread that calls connect.
func DialPinned(t testing.TB, addr string, cpu, n int) []net.Conn {
	t.Helper()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var old, set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &old); err != nil {
		t.Fatal(err)
	}
	set.Set(cpu)
	if err := unix.SchedSetaffinity(0, &set); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = unix.SchedSetaffinity(0, &old) }()
	conns := make([]net.Conn, 0, n)
	for range n {
		c, err := net.DialTimeout("tcp", addr, 2*time.Second)
		if err != nil {
			CloseAll(conns)
			t.Fatalf("dial from cpu %d: %v", cpu, err)
		}
		conns = append(conns, c)
	}
	return conns
}

// CloseAll closes every connection of conns.
func CloseAll(conns []net.Conn) {
	for _, c := range conns {
		_ = c.Close()
	}
}

// CountBy counts the values of m.
func CountBy(m map[int]int) map[int]int {
	out := map[int]int{}
	for _, v := range m {
		out[v]++
	}
	return out
}

// DialN opens n connections to addr, each within timeout, and fails the
// test when one cannot be opened. They are closed when the test ends.
func DialN(t testing.TB, addr string, n int, timeout time.Duration) []net.Conn {
	t.Helper()
	conns := make([]net.Conn, 0, n)
	for range n {
		c, err := net.DialTimeout("tcp", addr, timeout)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		conns = append(conns, c)
	}
	return conns
}
