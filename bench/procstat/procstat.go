package procstat

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// Errors returned by this package.
var (
	ErrFormat  = errors.New("procstat: unexpected file format")
	ErrCPUList = errors.New("procstat: bad cpu list")
)

// Hz is the unit of the CPU times in /proc (USER_HZ), fixed at 100 by the
// Linux ABI on every architecture this project builds for.
const Hz = 100

// Root is the proc file system the package reads; tests point it elsewhere.
var Root = "/proc"

// Stat is the part of /proc/<pid>/stat the benchmark uses.
type Stat struct {
	PID   int
	Comm  string
	State byte
	PPID  int
	UTime uint64 // ticks in user mode, all threads of the process
	STime uint64 // ticks in kernel mode, all threads of the process
}

// CPU returns UTime + STime.
func (s Stat) CPU() uint64 { return s.UTime + s.STime }

// ParseStat parses the contents of /proc/<pid>/stat.
func ParseStat(b []byte) (Stat, error) {
	// pid (comm) state ppid ... ; comm may hold spaces and parentheses.
	open := bytes.IndexByte(b, '(')
	cl := bytes.LastIndexByte(b, ')')
	if open < 0 || cl < open {
		return Stat{}, ErrFormat
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b[:open])))
	if err != nil {
		return Stat{}, fmt.Errorf("%w: pid: %v", ErrFormat, err)
	}
	f := strings.Fields(string(b[cl+1:]))
	// f[0]=state f[1]=ppid ... f[11]=utime f[12]=stime (fields 3, 4, 14, 15).
	if len(f) < 13 || len(f[0]) != 1 {
		return Stat{}, ErrFormat
	}
	s := Stat{PID: pid, Comm: string(b[open+1 : cl]), State: f[0][0]}
	if s.PPID, err = strconv.Atoi(f[1]); err != nil {
		return Stat{}, fmt.Errorf("%w: ppid: %v", ErrFormat, err)
	}
	if s.UTime, err = strconv.ParseUint(f[11], 10, 64); err != nil {
		return Stat{}, fmt.Errorf("%w: utime: %v", ErrFormat, err)
	}
	if s.STime, err = strconv.ParseUint(f[12], 10, 64); err != nil {
		return Stat{}, fmt.Errorf("%w: stime: %v", ErrFormat, err)
	}
	return s, nil
}

// ReadStat reads /proc/<pid>/stat.
func ReadStat(pid int) (Stat, error) {
	b, err := os.ReadFile(filepath.Join(Root, strconv.Itoa(pid), "stat"))
	if err != nil {
		return Stat{}, err
	}
	return ParseStat(b)
}

// ParseRSS returns VmRSS in KiB from the contents of /proc/<pid>/status
// (0 for a process without memory, such as a zombie).
func ParseRSS(b []byte) (uint64, error) { return parseKiB(b, "VmRSS:") }

// ReadRSS reads the resident set of a process in KiB.
func ReadRSS(pid int) (uint64, error) { return readKiB(pid, "status", "VmRSS:") }

// ParsePSS returns Pss in KiB from the contents of /proc/<pid>/smaps_rollup:
// the process's resident pages, each shared one divided by the number of
// processes that map it, so that a group's sum counts every page once
// where VmRSS counts a page shared by a master and its workers in each.
// 0 for a process without memory.
func ParsePSS(b []byte) (uint64, error) { return parseKiB(b, "Pss:") }

// ReadPSS reads the proportional set size of a process in KiB.
func ReadPSS(pid int) (uint64, error) { return readKiB(pid, "smaps_rollup", "Pss:") }

// parseKiB returns the value of the "key  N kB" line of a /proc file, 0
// when there is none.
func parseKiB(b []byte, key string) (uint64, error) {
	for line := range bytes.SplitSeq(b, []byte{'\n'}) {
		rest, ok := bytes.CutPrefix(line, []byte(key))
		if !ok {
			continue
		}
		f := strings.Fields(string(rest))
		if len(f) != 2 || f[1] != "kB" {
			return 0, ErrFormat
		}
		return strconv.ParseUint(f[0], 10, 64)
	}
	return 0, nil
}

// readKiB reads /proc/<pid>/file and parses key's line from it.
func readKiB(pid int, file, key string) (uint64, error) {
	b, err := os.ReadFile(filepath.Join(Root, strconv.Itoa(pid), file))
	if err != nil {
		return 0, err
	}
	return parseKiB(b, key)
}

// Tree returns pid followed by all of its live descendants, in ascending
// order after pid. Processes that vanish while the tree is read are skipped.
func Tree(pid int) ([]int, error) {
	ents, err := os.ReadDir(Root)
	if err != nil {
		return nil, err
	}
	children := map[int][]int{}
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		st, err := ReadStat(p)
		if err != nil {
			continue
		}
		children[st.PPID] = append(children[st.PPID], p)
	}
	out := []int{pid}
	for i := 0; i < len(out); i++ {
		out = append(out, children[out[i]]...)
	}
	sort.Ints(out[1:])
	return out, nil
}

// Usage is the summed CPU time and resident set of a group of processes.
type Usage struct {
	Ticks  uint64 // utime+stime of all processes read
	RSSKiB uint64 // VmRSS summed over the processes
	PSSKiB uint64 // Pss summed over the processes: shared pages counted once
	Procs  int    // processes that could be read
}

// Measure sums CPU ticks, RSS and PSS over pids; processes gone meanwhile
// are skipped.
func Measure(pids []int) Usage {
	var u Usage
	for _, p := range pids {
		st, err := ReadStat(p)
		if err != nil {
			continue
		}
		u.Ticks += st.CPU()
		if rss, err := ReadRSS(p); err == nil {
			u.RSSKiB += rss
		}
		if pss, err := ReadPSS(p); err == nil {
			u.PSSKiB += pss
		}
		u.Procs++
	}
	return u
}

// CPUTimes is one line of /proc/stat.
type CPUTimes struct {
	CPU  int // -1 for the "cpu" summary line
	Busy uint64
	Idle uint64 // idle + iowait
}

// ParseSystem parses the cpu lines of /proc/stat; the summary line comes
// first with CPU -1.
func ParseSystem(b []byte) ([]CPUTimes, error) {
	var out []CPUTimes
	for line := range bytes.SplitSeq(b, []byte{'\n'}) {
		if !bytes.HasPrefix(line, []byte("cpu")) {
			continue
		}
		f := strings.Fields(string(line))
		if len(f) < 8 {
			return nil, ErrFormat
		}
		c := CPUTimes{CPU: -1}
		if f[0] != "cpu" {
			n, err := strconv.Atoi(f[0][3:])
			if err != nil {
				return nil, fmt.Errorf("%w: %q", ErrFormat, f[0])
			}
			c.CPU = n
		}
		// user nice system idle iowait irq softirq steal [guest guest_nice]
		// guest time is already counted in user.
		for i, s := range f[1:min(len(f), 9)] {
			v, err := strconv.ParseUint(s, 10, 64)
			if err != nil {
				return nil, fmt.Errorf("%w: %v", ErrFormat, err)
			}
			if i == 3 || i == 4 {
				c.Idle += v
			} else {
				c.Busy += v
			}
		}
		out = append(out, c)
	}
	if len(out) == 0 {
		return nil, ErrFormat
	}
	return out, nil
}

// ReadSystem reads /proc/stat.
func ReadSystem() ([]CPUTimes, error) {
	b, err := os.ReadFile(filepath.Join(Root, "stat"))
	if err != nil {
		return nil, err
	}
	return ParseSystem(b)
}

// ParseCPUList parses a Linux cpu list such as "0", "0-3" or "0,2,4-5".
// The result is sorted and free of duplicates.
func ParseCPUList(s string) ([]int, error) {
	seen := map[int]bool{}
	for part := range strings.SplitSeq(strings.TrimSpace(s), ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		if err != nil || a < 0 {
			return nil, fmt.Errorf("%w: %q", ErrCPUList, s)
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil || b < a {
				return nil, fmt.Errorf("%w: %q", ErrCPUList, s)
			}
		}
		for c := a; c <= b; c++ {
			seen[c] = true
		}
	}
	out := make([]int, 0, len(seen))
	for c := range seen {
		out = append(out, c)
	}
	sort.Ints(out)
	return out, nil
}

// FormatCPUList is the inverse of ParseCPUList for a sorted list.
func FormatCPUList(cpus []int) string {
	var sb strings.Builder
	for i := 0; i < len(cpus); {
		j := i
		for j+1 < len(cpus) && cpus[j+1] == cpus[j]+1 {
			j++
		}
		if sb.Len() > 0 {
			sb.WriteByte(',')
		}
		if j > i {
			fmt.Fprintf(&sb, "%d-%d", cpus[i], cpus[j])
		} else {
			fmt.Fprintf(&sb, "%d", cpus[i])
		}
		i = j + 1
	}
	return sb.String()
}

// ParseSchedstat returns the first field of a /proc/<pid>/task/<tid>/schedstat
// line: the nanoseconds the thread has run on a CPU.
func ParseSchedstat(b []byte) (uint64, error) {
	f := strings.Fields(string(b))
	if len(f) != 3 {
		return 0, fmt.Errorf("procstat: schedstat %q: want 3 fields", strings.TrimSpace(string(b)))
	}
	return strconv.ParseUint(f[0], 10, 64)
}

// RunNS sums the nanoseconds every thread of pids has run, from the
// kernel's schedstat: where /proc/<pid>/stat counts in ticks of 10 ms, this
// resolves a round of a few seconds to well under 0.1 %. Threads and
// processes gone meanwhile are skipped, so a reading is comparable with
// another only over long-lived threads (a gateway's workers are).
func RunNS(pids []int) uint64 {
	var sum uint64
	for _, p := range pids {
		tasks, err := os.ReadDir(filepath.Join(Root, strconv.Itoa(p), "task"))
		if err != nil {
			continue
		}
		for _, t := range tasks {
			b, err := os.ReadFile(filepath.Join(Root, strconv.Itoa(p), "task", t.Name(), "schedstat"))
			if err != nil {
				continue
			}
			if ns, err := ParseSchedstat(b); err == nil {
				sum += ns
			}
		}
	}
	return sum
}
