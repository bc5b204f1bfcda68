//go:build linux && !race

package bpf

import "testing"

func TestAllocs(t *testing.T) {
	s := newTestSelector(t, ModeLeastConn, 2, nil)
	m, err := OpenMember(s.Files(), 1)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	tests := []struct {
		name string
		fn   func()
	}{
		{"Member.AddConns", func() { m.AddConns(1); m.AddConns(-1) }},
		{"Member.Conns", func() { _ = m.Conns() }},
		{"Selector.Conns", func() { _ = s.Conns(1) }},
	}
	for _, tt := range tests {
		if got := testing.AllocsPerRun(1000, tt.fn); got != 0 {
			t.Errorf("%s: %v allocs per run, want 0", tt.name, got)
		}
	}
}
