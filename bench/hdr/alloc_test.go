//go:build !race

package hdr

import "testing"

func TestRecordAllocs(t *testing.T) {
	h := New()
	v := uint64(1)
	if n := testing.AllocsPerRun(1000, func() { h.Record(v); v = v*7 + 13 }); n != 0 {
		t.Fatalf("Record allocates %v times per call", n)
	}
}
