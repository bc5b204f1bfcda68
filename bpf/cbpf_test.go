//go:build linux

package bpf

import (
	"errors"
	"testing"
)

// TestCBPFSteerCPU: with the classic program in cpu mode, a client on CPU c
// lands on the c-th listener of the group (listen order); switching the
// group to hash mode spreads connections again.
func TestCBPFSteerCPU(t *testing.T) {
	if err := probeCBPF(); err != nil {
		skipUnsupported(t, "classic BPF", err)
	}
	cpus := allowedCPUs(t)
	if len(cpus) > 4 {
		cpus = cpus[:4]
	}
	n := min(cpus[len(cpus)-1]+1, 64)
	if n < 2 {
		n = 2
	}
	ls := listenGroup(t, n)
	if err := AttachCBPF(ls[0].fd, ModeCPU); err != nil {
		t.Fatal(err)
	}
	const dials = 100
	for _, c := range cpus {
		if c >= n {
			continue
		}
		counts := steer(t, ls, c, dials)
		t.Logf("cbpf cpu mode, client on cpu %d: %v", c, counts)
		if counts[c]*100 < 99*dials {
			t.Errorf("client on cpu %d: counts %v, want >= 99%% on listener %d", c, counts, c)
		}
	}
	if err := AttachCBPF(ls[1].fd, ModeHash); err != nil {
		t.Fatal(err)
	}
	counts := steer(t, ls, cpus[0], 2*dials)
	used := 0
	for _, v := range counts {
		if v > 0 {
			used++
		}
	}
	t.Logf("cbpf hash mode, client on cpu %d: %v", cpus[0], counts)
	if used < 2 {
		t.Errorf("hash mode from one cpu: counts %v, want several listeners", counts)
	}
	if err := AttachCBPF(ls[0].fd, Mode(9)); !errors.Is(err, ErrBadMode) {
		t.Errorf("AttachCBPF(bad mode) = %v, want ErrBadMode", err)
	}
	if err := AttachCBPF(-1, ModeCPU); err == nil || errors.Is(err, ErrNotSupported) {
		t.Errorf("AttachCBPF(-1) = %v, want a plain error", err)
	}
}
