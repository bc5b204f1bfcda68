package soak

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"coregate/bench/procstat"
)

// Socket is one line of /proc/net/tcp or tcp6: its ports and inode.
type Socket struct {
	LocalPort, RemotePort uint16
	Inode                 uint64
	State                 uint8 // the kernel's TCP state: 1 ESTABLISHED … 10 LISTEN
}

// ParseNetTCP parses the contents of /proc/net/tcp or /proc/net/tcp6 into
// inode → socket; lines it cannot read are skipped.
func ParseNetTCP(b []byte, into map[uint64]Socket) {
	sc := bufio.NewScanner(bytes.NewReader(b))
	first := true
	for sc.Scan() {
		if first { // the header
			first = false
			continue
		}
		f := strings.Fields(sc.Text())
		if len(f) < 10 {
			continue
		}
		lp, ok1 := port(f[1])
		rp, ok2 := port(f[2])
		ino, err := strconv.ParseUint(f[9], 10, 64)
		if !ok1 || !ok2 || err != nil || ino == 0 {
			continue
		}
		st, _ := strconv.ParseUint(f[3], 16, 8)
		into[ino] = Socket{LocalPort: lp, RemotePort: rp, Inode: ino, State: uint8(st)}
	}
}

// port reads the port of an "ADDR:PORT" field (hex).
func port(s string) (uint16, bool) {
	i := strings.LastIndexByte(s, ':')
	if i < 0 {
		return 0, false
	}
	p, err := strconv.ParseUint(s[i+1:], 16, 16)
	return uint16(p), err == nil
}

// sockets reads the TCP sockets of the network namespace pid lives in.
func sockets(pid int) map[uint64]Socket {
	m := map[uint64]Socket{}
	for _, f := range []string{"tcp", "tcp6"} {
		if b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "net", f)); err == nil {
			ParseNetTCP(b, m)
		}
	}
	return m
}

// fdTargets returns what each open fd of pid points at (readlink of
// /proc/<pid>/fd/N), or nil if the process is gone.
func fdTargets(pid int) []string {
	dir := filepath.Join("/proc", strconv.Itoa(pid), "fd")
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	out := make([]string, 0, len(ents))
	for _, e := range ents {
		if t, err := os.Readlink(filepath.Join(dir, e.Name())); err == nil {
			out = append(out, t)
		}
	}
	return out
}

// socketInode returns the inode of a "socket:[N]" fd target.
func socketInode(target string) (uint64, bool) {
	s, ok := strings.CutPrefix(target, "socket:[")
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseUint(strings.TrimSuffix(s, "]"), 10, 64)
	return n, err == nil
}

// ClientPorts returns the local ports of the clients whose connections to
// listenPort are open in process pid: the connections it owns.
func ClientPorts(pid int, listenPort uint16) map[uint16]bool {
	socks := sockets(pid)
	out := map[uint16]bool{}
	for _, t := range fdTargets(pid) {
		if ino, ok := socketInode(t); ok {
			if s, ok := socks[ino]; ok && s.LocalPort == listenPort && s.RemotePort != 0 {
				out[s.RemotePort] = true
			}
		}
	}
	return out
}

// FDCount is the open fds of a group of processes.
type FDCount struct {
	Total int // every open fd
	Pool  int // sockets connected to the upstream's port (the keep-alive pool)
	Procs int // processes read
}

// Other is the fds outside the upstream pool.
func (c FDCount) Other() int { return c.Total - c.Pool }

// CountFDs counts the open fds of pids, telling the upstream pool's sockets
// (remote port upstreamPort) from the rest.
func CountFDs(pids []int, upstreamPort uint16) FDCount {
	var c FDCount
	if len(pids) == 0 {
		return c
	}
	socks := sockets(pids[0])
	for _, p := range pids {
		ts := fdTargets(p)
		if ts == nil {
			continue
		}
		c.Procs++
		c.Total += len(ts)
		for _, t := range ts {
			if ino, ok := socketInode(t); ok {
				if s, ok := socks[ino]; ok && s.RemotePort == upstreamPort {
					c.Pool++
				}
			}
		}
	}
	return c
}

// tcpStates names the kernel's TCP states (include/net/tcp_states.h).
var tcpStates = [...]string{1: "ESTABLISHED", 2: "SYN_SENT", 3: "SYN_RECV", 4: "FIN_WAIT1", 5: "FIN_WAIT2",
	6: "TIME_WAIT", 7: "CLOSE", 8: "CLOSE_WAIT", 9: "LAST_ACK", 10: "LISTEN", 11: "CLOSING"}

// DescribeFDs says what the open fds of pids are, one line a process: how
// many of each kind, TCP sockets by state and local→remote port, so that a
// growth in the count can be told apart.
func DescribeFDs(pids []int) []string {
	if len(pids) == 0 {
		return nil
	}
	socks := sockets(pids[0])
	var out []string
	for _, p := range pids {
		ts := fdTargets(p)
		if ts == nil {
			continue
		}
		kinds := map[string]int{}
		for _, t := range ts {
			if ino, ok := socketInode(t); ok {
				if so, ok := socks[ino]; ok {
					st := "?"
					if int(so.State) < len(tcpStates) && tcpStates[so.State] != "" {
						st = tcpStates[so.State]
					}
					kinds[fmt.Sprintf("tcp %s %d→%d", st, so.LocalPort, so.RemotePort)]++
					continue
				}
				kinds["socket (not tcp)"]++
				continue
			}
			if i := strings.IndexAny(t, "[:"); i > 0 && !strings.HasPrefix(t, "/") {
				t = t[:i]
			}
			kinds[t]++
		}
		keys := make([]string, 0, len(kinds))
		for k := range kinds {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		var b strings.Builder
		fmt.Fprintf(&b, "pid %d, %d fds:", p, len(ts))
		for _, k := range keys {
			fmt.Fprintf(&b, " %s ×%d;", k, kinds[k])
		}
		out = append(out, b.String())
	}
	return out
}

// Exited reports whether process pid has exited whole: reaped, or its
// leader a zombie with no other thread left. Every file it held, a
// listening socket among them, is closed by then (the last thread to exit
// closes them, before the leader can be reaped).
func Exited(pid int) bool {
	st, err := procstat.ReadStat(pid)
	if err != nil {
		return !errors.Is(err, procstat.ErrFormat) // gone: reaped
	}
	if st.State != 'Z' && st.State != 'X' {
		return false
	}
	tasks, err := os.ReadDir(filepath.Join("/proc", strconv.Itoa(pid), "task"))
	return err != nil || len(tasks) <= 1
}
