// Package procstat reads what the benchmark needs from Linux /proc: CPU time
// of a process (all of its threads) from /proc/<pid>/stat, its resident set
// from /proc/<pid>/status, the descendants of a process, and the busy time of
// every CPU from /proc/stat. It also pins processes to CPUs and times a fixed
// compute loop per CPU to spot a host that slows a vCPU down.
//
// Every function reads the files afresh and is safe for concurrent use.
// CPU times are in clock ticks of 1/Hz seconds (USER_HZ, 100 on Linux).
package procstat
