package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// WorkerProc is a worker process as /proc shows it: its pid, and the
// --id and --cpu of its command line (-1 when absent).
type WorkerProc struct {
	PID, ID, CPU int
}

// Workers lists the live worker processes that are children of the
// supervisor supPID, by reading /proc/*/stat (parent pid) and
// /proc/*/cmdline.
func Workers(t testing.TB, supPID int) []WorkerProc {
	t.Helper()
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var out []WorkerProc
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		f := ProcStat(pid)
		if len(f) < 2 || f[1] != strconv.Itoa(supPID) || f[0] == "Z" {
			continue
		}
		cmdline, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil {
			continue
		}
		args := strings.Split(strings.TrimRight(string(cmdline), "\x00"), "\x00")
		if len(args) < 2 || args[1] != "worker" {
			continue
		}
		w := WorkerProc{PID: pid, ID: -1, CPU: -1}
		for i := 2; i+1 < len(args); i++ {
			switch args[i] {
			case "--id":
				w.ID, _ = strconv.Atoi(args[i+1])
			case "--cpu":
				w.CPU, _ = strconv.Atoi(args[i+1])
			}
		}
		out = append(out, w)
	}
	return out
}

// WaitWorkers waits until the supervisor supPID has exactly n worker
// children, polling every 20 ms, and fails the test after timeout.
func WaitWorkers(t testing.TB, supPID, n int, timeout time.Duration) []WorkerProc {
	t.Helper()
	var ws []WorkerProc
	deadline := time.Now().Add(timeout)
	for {
		ws = Workers(t, supPID)
		if len(ws) == n {
			return ws
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %d worker processes (%v), want %d", timeout, len(ws), ws, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// ProcStat returns the fields of /proc/<pid>/stat after the command
// name: state, ppid, … (utime and stime are the 12th and 13th); nil when
// the process is gone. The name may hold spaces, so it cuts at the last ')'.
func ProcStat(pid int) []string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return nil
	}
	s := string(b)
	return strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
}

// Alive says whether pid is a process that has not exited (a zombie has).
func Alive(pid int) bool {
	f := ProcStat(pid)
	return len(f) > 0 && f[0] != "Z"
}

// Exited says whether pid has exited, reaped or not (gone, a zombie, or
// dead).
func Exited(pid int) bool {
	f := ProcStat(pid)
	return len(f) == 0 || f[0] == "Z" || f[0] == "X"
}

// KillAtEnd makes sure the processes whose pids *pids holds when the test
// ends are gone then: each one still alive fails the test and is ended
// with SIGKILL. They must be the test's own processes (a supervisor's
// workers, which outlive it).
func KillAtEnd(t testing.TB, pids *[]int) {
	t.Cleanup(func() {
		for _, pid := range *pids {
			if Alive(pid) {
				t.Errorf("worker %d still runs at the end", pid)
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	})
}

// WaitStopped waits up to 5 s until every thread of pid is stopped (state
// T), so that no connection dialed afterwards can be accepted by it.
func WaitStopped(t testing.TB, pid int) {
	t.Helper()
	Eventually(t, 5*time.Second, func() error {
		dir := fmt.Sprintf("/proc/%d/task", pid)
		tasks, err := os.ReadDir(dir)
		if err != nil {
			return err
		}
		for _, task := range tasks {
			stat, err := os.ReadFile(dir + "/" + task.Name() + "/stat")
			if err != nil {
				return err
			}
			st := string(stat)
			if f := strings.Fields(st[strings.LastIndexByte(st, ')')+1:]); len(f) == 0 || f[0] != "T" {
				return fmt.Errorf("thread %s of pid %d not stopped: %q", task.Name(), pid, f[:1])
			}
		}
		return nil
	})
}

// CPUTime returns the CPU time process pid has used, user and system, to
// the kernel's 10 ms tick.
func CPUTime(t testing.TB, pid int) time.Duration {
	t.Helper()
	f := ProcStat(pid)
	if len(f) < 13 {
		t.Fatalf("/proc/%d/stat: %q", pid, f)
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		t.Fatalf("/proc/%d/stat: %q", pid, f)
	}
	return time.Duration(utime+stime) * 10 * time.Millisecond
}

// FDs returns how many files process pid has open.
func FDs(pid int) (int, error) {
	ents, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/fd")
	return len(ents), err
}

// FDList names the open file descriptors of pid (fd->target), for a
// failure message.
func FDList(pid int) string {
	dir := "/proc/" + strconv.Itoa(pid) + "/fd/"
	ents, _ := os.ReadDir(dir)
	var out []string
	for _, e := range ents {
		l, _ := os.Readlink(dir + e.Name())
		out = append(out, e.Name()+"->"+l)
	}
	return strings.Join(out, " ")
}

// RSS returns the resident set size of process pid in bytes.
func RSS(pid int) (int64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			f := strings.Fields(v)
			if len(f) >= 1 {
				kb, err := strconv.ParseInt(f[0], 10, 64)
				return kb << 10, err
			}
		}
	}
	return 0, fmt.Errorf("no VmRSS for pid %d", pid)
}

// TreeRSS returns the resident set size of process pid and all its
// descendants (the gateway's worker processes), in bytes.
func TreeRSS(pid int) (int64, error) {
	total, err := RSS(pid)
	if err != nil {
		return 0, err
	}
	tasks, _ := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/task")
	for _, task := range tasks {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/task/" + task.Name() + "/children")
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(b)) {
			child, err := strconv.Atoi(f)
			if err != nil {
				continue
			}
			if r, err := TreeRSS(child); err == nil {
				total += r
			}
		}
	}
	return total, nil
}

// WaitExited waits up to timeout, polling every 20 ms, until pid is no
// longer alive (Alive), and says whether it is not.
func WaitExited(pid int, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for Alive(pid) && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	return !Alive(pid)
}

// Terminate ends cmd, a process the test started (cmd.Start, and not yet
// waited for): SIGTERM, then SIGKILL when it has not exited within grace.
// It returns once the process is reaped (cmd.Wait), whether it ended of
// itself or was killed; processes it started itself are its own to end.
func Terminate(cmd *exec.Cmd, grace time.Duration) {
	_ = cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(grace):
		_ = cmd.Process.Kill()
		<-done
	}
}
