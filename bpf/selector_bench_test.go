//go:build linux

package bpf

import (
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"
)

func BenchmarkAddConns(b *testing.B) {
	s := newTestSelector(b, ModeLeastConn, 2, nil)
	m, err := OpenMember(s.Files(), 0)
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	b.ReportAllocs()
	for b.Loop() {
		m.AddConns(1)
	}
}

// BenchmarkConnect measures a loopback connect + accept + close through a
// two-listener group, without a program and with each mode's program, so
// the program's share of connection setup shows as the difference.
func BenchmarkConnect(b *testing.B) {
	cases := []struct {
		name string
		mode Mode
		prog bool
	}{
		{"kernel_hash", ModeHash, false},
		{"ebpf_hash", ModeHash, true},
		{"ebpf_cpu", ModeCPU, true},
		{"ebpf_least_conn", ModeLeastConn, true},
	}
	for _, bc := range cases {
		b.Run(bc.name, func(b *testing.B) {
			ls := listenGroup(b, 2)
			var s *Selector
			if bc.prog {
				s = newTestSelector(b, bc.mode, 2, nil)
				joinAll(b, s, ls)
				// Kernel run-time statistics give the program's own cost.
				if st, err := ebpf.EnableStats(unix.BPF_STATS_RUN_TIME); err == nil {
					b.Cleanup(func() { st.Close() })
				} else {
					s = nil
				}
			}
			lfds := fds(ls)
			var err error
			onCPU(b, -1, func() {
				for b.Loop() {
					var cfd, afd int
					if cfd, err = dial(ls[0].port); err != nil {
						return
					}
					_, afd, err = acceptAny(lfds, 2*time.Second)
					closeReset(cfd)
					if err != nil {
						return
					}
					unix.Close(afd)
				}
			})
			if err != nil {
				b.Fatal(err)
			}
			if s != nil {
				if st, err := s.prog.Stats(); err == nil && st.RunCount > 0 {
					b.ReportMetric(float64(st.Runtime.Nanoseconds())/float64(st.RunCount), "prog-ns/conn")
				}
			}
		})
	}
}
