package harness

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"coregate/bench/load"
	"coregate/bench/report"
	"coregate/bench/scenario"
)

// The system calls and switches a gateway makes per request, counted by
// perf stat on its processes (every thread) while a fixed-rate load sends
// it SyscallRequests requests: the table that shows whether the event loop
// polls, reads, writes and hands off as nginx's does.

// SyscallRequests is the requests of one count.
const SyscallRequests = 50000

// perfGroups are the table's columns: a name and the perf events summed
// into it. task-clock is in milliseconds, turned into µs per request.
var perfGroups = []struct {
	name   string
	events []string
}{
	{"CPU µs", []string{"task-clock"}},
	{"epoll_wait", []string{"syscalls:sys_enter_epoll_wait", "syscalls:sys_enter_epoll_pwait", "syscalls:sys_enter_epoll_pwait2"}},
	{"read", []string{"syscalls:sys_enter_read", "syscalls:sys_enter_recvfrom", "syscalls:sys_enter_readv"}},
	{"write", []string{"syscalls:sys_enter_write", "syscalls:sys_enter_writev", "syscalls:sys_enter_sendto", "syscalls:sys_enter_sendmsg"}},
	{"futex", []string{"syscalls:sys_enter_futex"}},
	{"io_uring_enter", []string{"syscalls:sys_enter_io_uring_enter"}},
	{"context switches", []string{"context-switches"}},
	{"all syscalls", []string{"raw_syscalls:sys_enter"}},
}

// countSyscalls runs SyscallRequests requests of s's load at s's rate (or
// 10 000 req/s for a closed-loop scenario) against t under perf stat and
// returns the counts per request.
func (r *Runner) countSyscalls(s scenario.Scenario, t *target) (report.Syscalls, error) {
	out := report.Syscalls{Scenario: s.Name, Target: t.name, Workers: t.workers}
	rate := s.Load.Rate
	if rate == 0 {
		rate = 10000
	}
	out.Rate = rate
	var events []string
	for _, g := range perfGroups {
		events = append(events, g.events...)
	}
	pids := t.proc.PIDs()
	ps := make([]string, len(pids))
	for i, p := range pids {
		ps[i] = strconv.Itoa(p)
	}
	csv := filepath.Join(r.o.WorkDir, fmt.Sprintf("perf-%s-%s.csv", s.Name, strings.ReplaceAll(t.name, " ", "-")))
	cmd := exec.Command(r.o.Perf, "stat", "-x", ",", "-o", csv, "-e", strings.Join(events, ","), "-p", strings.Join(ps, ","))
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return out, fmt.Errorf("harness: perf stat: %w", err)
	}
	time.Sleep(300 * time.Millisecond) // perf attaches
	res, err := load.Run(load.Config{Addr: t.addr, Path: "/hello", Conns: s.Load.ConnsFor(t.workers), Rate: rate,
		Header: s.Load.Header, Threads: len(r.o.LoadCPUs), MaxRequests: SyscallRequests,
		Duration: time.Duration(float64(SyscallRequests)/rate*float64(time.Second)) + 30*time.Second})
	_ = cmd.Process.Signal(syscall.SIGINT)
	werr := cmd.Wait()
	if err != nil {
		return out, fmt.Errorf("harness: load %s: %w", t.name, err)
	}
	counts, perr := readPerfCSV(csv)
	if perr != nil {
		return out, fmt.Errorf("harness: perf stat: %w (%v)", perr, werr)
	}
	out.Requests = res.Requests
	if res.Requests == 0 {
		return out, fmt.Errorf("harness: perf stat of %s: no request answered", t.name)
	}
	for _, g := range perfGroups {
		var sum float64
		for _, e := range g.events {
			sum += counts[e]
		}
		if g.name == "CPU µs" {
			sum *= 1000 // msec
		}
		out.Columns = append(out.Columns, g.name)
		out.PerReq = append(out.PerReq, sum/float64(res.Requests))
	}
	return out, nil
}

// readPerfCSV reads perf stat -x , output: value, unit, event, …; a value
// perf could not count ("<not counted>", "<not supported>") is 0.
func readPerfCSV(path string) (map[string]float64, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	m := map[string]float64{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Split(line, ",")
		if len(fields) < 3 {
			continue
		}
		v, err := strconv.ParseFloat(fields[0], 64)
		if err != nil {
			v = 0
		}
		m[fields[2]] += v
	}
	if len(m) == 0 {
		return nil, fmt.Errorf("%s: no counts", path)
	}
	return m, sc.Err()
}
