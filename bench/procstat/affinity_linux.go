package procstat

import (
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"time"

	"golang.org/x/sys/unix"
)

func cpuSet(cpus []int) *unix.CPUSet {
	var set unix.CPUSet
	for _, c := range cpus {
		set.Set(c)
	}
	return &set
}

// Online returns the CPUs this process may run on.
func Online() ([]int, error) {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return nil, err
	}
	var out []int
	for c := 0; c < 1024 && len(out) < set.Count(); c++ {
		if set.IsSet(c) {
			out = append(out, c)
		}
	}
	return out, nil
}

// PinSelf pins every thread of the calling process to cpus. Threads created
// later inherit the mask from their creator.
func PinSelf(cpus []int) error {
	ents, err := os.ReadDir(filepath.Join(Root, "self", "task"))
	if err != nil {
		return err
	}
	set := cpuSet(cpus)
	for _, e := range ents {
		tid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if err := unix.SchedSetaffinity(tid, set); err != nil {
			return err
		}
	}
	return nil
}

// OnCPUs runs fn on an OS thread pinned to cpus, so that a process fn starts
// (fork and exec) inherits that mask. The thread's previous mask is restored
// afterwards and the thread returns to the runtime's pool, which keeps a
// parent-death signal set on such a child meaningful.
func OnCPUs(cpus []int, fn func() error) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var old unix.CPUSet
	if err := unix.SchedGetaffinity(0, &old); err != nil {
		return err
	}
	if err := unix.SchedSetaffinity(0, cpuSet(cpus)); err != nil {
		return err
	}
	defer unix.SchedSetaffinity(0, &old)
	return fn()
}

// Probe times a fixed compute loop on each of cpus and returns the time per
// CPU. A host that slows a vCPU down without reporting steal shows up as a
// longer time than that CPU's usual one.
func Probe(cpus []int) (map[int]time.Duration, error) {
	out := make(map[int]time.Duration, len(cpus))
	for _, c := range cpus {
		var d time.Duration
		err := OnCPUs([]int{c}, func() error {
			d = spin()
			return nil
		})
		if err != nil {
			return nil, err
		}
		out[c] = d
	}
	return out, nil
}

// spin runs a fixed integer loop three times and keeps the fastest.
func spin() time.Duration {
	best := time.Duration(1 << 62)
	for range 3 {
		t0 := time.Now()
		x := uint64(88172645463325252)
		for range 400_000 {
			x ^= x << 13
			x ^= x >> 7
			x ^= x << 17
		}
		runtime.KeepAlive(x)
		if d := time.Since(t0); d < best {
			best = d
		}
	}
	return best
}
