package supervisor

import (
	"fmt"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// ParseCPUList parses a Linux CPU list such as "0-3,6" (as taskset and
// /sys/devices/system/cpu/online write them).
func ParseCPUList(s string) ([]int, error) {
	var out []int
	seen := map[int]bool{}
	for _, part := range strings.Split(strings.TrimSpace(s), ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			return nil, fmt.Errorf("%w: empty item in %q", ErrBadCPUList, s)
		}
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		if err != nil || a < 0 {
			return nil, fmt.Errorf("%w: bad cpu %q in %q", ErrBadCPUList, lo, s)
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil || b < a {
				return nil, fmt.Errorf("%w: bad range %q in %q", ErrBadCPUList, part, s)
			}
		}
		for c := a; c <= b; c++ {
			if c >= 1024 {
				return nil, fmt.Errorf("%w: cpu %d out of range", ErrBadCPUList, c)
			}
			if !seen[c] {
				seen[c] = true
				out = append(out, c)
			}
		}
	}
	return out, nil
}

// AllowedCPUs returns the CPUs in this process's affinity mask, ascending:
// what worker_processes: auto means.
func AllowedCPUs() ([]int, error) {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return nil, fmt.Errorf("supervisor: sched_getaffinity: %w", err)
	}
	var out []int
	for c := 0; c < len(set)*64; c++ {
		if set.IsSet(c) {
			out = append(out, c)
		}
	}
	return out, nil
}

// FormatCPUList is the inverse of ParseCPUList for logs.
func FormatCPUList(cpus []int) string {
	var b strings.Builder
	for i := 0; i < len(cpus); {
		j := i
		for j+1 < len(cpus) && cpus[j+1] == cpus[j]+1 {
			j++
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(cpus[i]))
		if j > i {
			b.WriteByte('-')
			b.WriteString(strconv.Itoa(cpus[j]))
		}
		i = j + 1
	}
	return b.String()
}
