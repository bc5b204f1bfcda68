// Package harness runs the benchmark: it starts the upstream, coregate and
// the nginx reference as child processes pinned to their CPUs, drives load
// at each in interleaved rounds, reads CPU time and RSS of every gateway
// process from /proc, flags rounds disturbed by other CPU use or by a CPU
// running slower than usual (and redoes them), and fills a report.Run.
//
// Every process it starts is recorded and stopped by its PID (and those of
// its descendants) when the run ends, fails or is interrupted: see StopAll.
// A Runner is used by one goroutine; StopAll may be called from any.
package harness
