package shm

import (
	"strconv"
	"testing"
)

// BenchmarkCounter is what limit-count pays per request: find the
// counter of a present key and add one.
func BenchmarkCounter(b *testing.B) {
	s, err := Create(DefaultSlots)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	keys := make([][]byte, 1000)
	for i := range keys {
		keys[i] = strconv.AppendInt([]byte("limit-count\x00route\x001:0123456789abcdef:10.0.0."), int64(i), 10)
		s.Counter(keys[i], 0, 1000*sec)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		c, _ := s.Counter(keys[i%len(keys)], sec, 1000*sec)
		c.Add(1)
	}
}
