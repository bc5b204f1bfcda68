//go:build !race

package shm

import (
	"bytes"
	"strconv"
	"testing"
)

// TestAllocCounter: finding a counter, making one (the key is copied into
// the segment) and a long key's digest allocate nothing.
func TestAllocCounter(t *testing.T) {
	s := newTable(t, 1<<12)
	key := []byte("limit-count\x00route\x001:0123456789abcdef:127.0.0.1")
	s.Counter(key, 0, 10*sec)
	if n := testing.AllocsPerRun(200, func() { c, _ := s.Counter(key, sec, 10*sec); c.Add(1) }); n != 0 {
		t.Fatalf("finding a counter allocates %.1f times", n)
	}
	long := bytes.Repeat([]byte("x"), 200)
	if n := testing.AllocsPerRun(200, func() { c, _ := s.Counter(long, sec, 10*sec); c.Add(1) }); n != 0 {
		t.Fatalf("finding a long key's counter allocates %.1f times", n)
	}
	buf := make([]byte, 0, 32)
	i := 0
	if n := testing.AllocsPerRun(200, func() {
		i++
		buf = strconv.AppendInt(append(buf[:0], "new-"...), int64(i), 10)
		s.Counter(buf, sec, 10*sec)
	}); n != 0 {
		t.Fatalf("making a counter allocates %.1f times", n)
	}
}

// TestAllocTicketKeys: a worker's tick reads the generation and the
// ticket keys without allocating.
func TestAllocTicketKeys(t *testing.T) {
	s, err := CreateTicketKeys()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	dst := make([][32]byte, 0, TicketKeyCount)
	if n := testing.AllocsPerRun(200, func() {
		if s.Gen() != 0 {
			dst, _, _ = s.Load(dst)
		}
	}); n != 0 {
		t.Fatalf("Gen and Load allocate %.1f times", n)
	}
}
