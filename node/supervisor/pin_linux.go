package supervisor

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"

	"golang.org/x/sys/unix"
)

// startPinned starts a process whose every thread runs on cpu: the mask is
// set on the forking thread, which the child inherits from its first
// instruction (sched_setaffinity(0) alone pins only the calling thread, so
// pinning after start would miss the runtime's other threads).
func startPinned(cpu int, start func() error) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var old, set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &old); err != nil {
		return fmt.Errorf("supervisor: sched_getaffinity: %w", err)
	}
	set.Set(cpu)
	if err := unix.SchedSetaffinity(0, &set); err != nil {
		return fmt.Errorf("supervisor: pin to cpu %d: %w", cpu, err)
	}
	err := start()
	if rerr := unix.SchedSetaffinity(0, &old); rerr != nil && err == nil {
		err = fmt.Errorf("supervisor: restore affinity: %w", rerr)
	}
	return err
}

// PinAllThreads pins every thread of this process to cpu, for a worker that
// was not started pinned (and as a check that it was).
func PinAllThreads(cpu int) error { return PinAllThreadsTo([]int{cpu}) }

// PinAllThreadsTo confines every thread of this process to cpus. Threads
// made later inherit the mask of the thread that makes them.
func PinAllThreadsTo(cpus []int) error {
	var set unix.CPUSet
	for _, c := range cpus {
		set.Set(c)
	}
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return err
	}
	for _, t := range tasks {
		tid, err := strconv.Atoi(t.Name())
		if err != nil {
			continue
		}
		if err := unix.SchedSetaffinity(tid, &set); err != nil && err != unix.ESRCH {
			return fmt.Errorf("supervisor: pin thread %d to %s: %w", tid, FormatCPUList(cpus), err)
		}
	}
	return nil
}

// ThreadCPUs reads the Cpus_allowed_list of every thread of pid.
func ThreadCPUs(pid int) (map[int]string, error) {
	dir := filepath.Join("/proc", strconv.Itoa(pid), "task")
	tasks, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	out := map[int]string{}
	for _, t := range tasks {
		tid, err := strconv.Atoi(t.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, t.Name(), "status"))
		if err != nil {
			continue // the thread ended
		}
		out[tid] = field(string(b), "Cpus_allowed_list:")
	}
	return out, nil
}

func field(status, name string) string {
	for i := 0; i < len(status); {
		j := i
		for j < len(status) && status[j] != '\n' {
			j++
		}
		line := status[i:j]
		if len(line) > len(name) && line[:len(name)] == name {
			v := line[len(name):]
			for len(v) > 0 && (v[0] == ' ' || v[0] == '\t') {
				v = v[1:]
			}
			return v
		}
		i = j + 1
	}
	return ""
}
