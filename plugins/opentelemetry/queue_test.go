package opentelemetry

import (
	"bytes"
	"fmt"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"
)

// TestSpanText: a span's name and attributes read back as written; an
// attribute past MaxAttrs is dropped, text past the room cut, both
// reported.
func TestSpanText(t *testing.T) {
	var s Span
	s.Reset()
	s.SetName([]byte("GET"), []byte(" "), []byte("/hello*"))
	s.AddAttr([]byte("http.route"), []byte("/hello*"))
	s.AddAttr([]byte("empty"), nil)
	if string(s.Name()) != "GET /hello*" || s.NumAttrs() != 2 || s.Truncated() {
		t.Fatalf("name %q, %d attributes, truncated %v", s.Name(), s.NumAttrs(), s.Truncated())
	}
	if k, v := s.Attr(0); string(k) != "http.route" || string(v) != "/hello*" {
		t.Errorf("attribute 0: %q=%q", k, v)
	}
	if k, v := s.Attr(1); string(k) != "empty" || len(v) != 0 {
		t.Errorf("attribute 1: %q=%q", k, v)
	}
	for i := s.NumAttrs(); i < MaxAttrs; i++ {
		if !s.AddAttr([]byte("k"+strconv.Itoa(i)), []byte("v")) {
			t.Fatalf("attribute %d refused", i)
		}
	}
	if s.AddAttr([]byte("one"), []byte("more")) || !s.Truncated() || s.NumAttrs() != MaxAttrs {
		t.Errorf("attribute past MaxAttrs: %d attributes, truncated %v", s.NumAttrs(), s.Truncated())
	}

	s.Reset()
	long := bytes.Repeat([]byte("x"), spanData+10)
	s.SetName([]byte("n"))
	s.AddAttr([]byte("big"), long)
	if k, v := s.Attr(0); string(k) != "big" || len(v) != spanData-4 || !s.Truncated() {
		t.Errorf("a long value: key %q, %d bytes kept, truncated %v", k, len(v), s.Truncated())
	}
	if s.AddAttr([]byte("after"), []byte("x")) || s.NumAttrs() != 1 {
		t.Errorf("an attribute with no room left: %d attributes", s.NumAttrs())
	}
	s.Reset()
	if len(s.Name()) != 0 || s.NumAttrs() != 0 || s.Truncated() {
		t.Errorf("after Reset: %q, %d, %v", s.Name(), s.NumAttrs(), s.Truncated())
	}
}

// TestQueueFull: a full queue drops and counts, and takes spans again
// once the consumer gave slots back.
func TestQueueFull(t *testing.T) {
	q := NewQueue(3, 2) // 4 slots
	for i := range 6 {
		s := q.Reserve()
		if i >= 4 {
			if s != nil {
				t.Fatalf("span %d: a slot in a full queue", i)
			}
			continue
		}
		s.Status = uint16(200 + i)
		q.Commit(s)
	}
	if q.Len() != 4 || q.Dropped() != 2 {
		t.Fatalf("len %d, dropped %d; want 4, 2", q.Len(), q.Dropped())
	}
	select {
	case <-q.Ready():
	default:
		t.Error("a batch queued, not signalled")
	}
	for i := range 2 {
		if s := q.Next(); s == nil || s.Status != uint16(200+i) {
			t.Fatalf("span %d: %+v", i, s)
		}
		q.Done()
	}
	s := q.Reserve()
	if s == nil || s.Status != 0 {
		t.Fatalf("a slot given back: %+v", s)
	}
	q.Commit(s)
	if q.Len() != 3 || q.Dropped() != 2 {
		t.Errorf("len %d, dropped %d; want 3, 2", q.Len(), q.Dropped())
	}
}

// TestQueueConcurrent: producers and a consumer at once (run with
// -race): every span committed is read once, whole and in its
// producer's order, or counted dropped.
func TestQueueConcurrent(t *testing.T) {
	q := NewQueue(64, 16)
	const n = 200000
	var wg sync.WaitGroup
	wg.Add(1)
	var got []int
	done := make(chan struct{})
	go func() {
		defer wg.Done()
		for {
			s := q.Next()
			if s == nil {
				select {
				case <-done:
					if q.Next() == nil {
						return
					}
				case <-q.Ready():
				case <-time.After(time.Millisecond):
				}
				continue
			}
			i, err := strconv.Atoi(string(s.Name()))
			if k, v := s.Attr(0); err != nil || string(k) != "i" || string(v) != string(s.Name()) || s.Start != int64(i) {
				panic(fmt.Sprintf("span torn: %q %q=%q start %d", s.Name(), k, v, s.Start))
			}
			got = append(got, i)
			q.Done()
		}
	}()
	// Producers numbering their spans p, p+producers, ...: each one's
	// spans arrive in its order.
	const producers = 3
	deadline := time.Now().Add(20 * time.Second)
	var pw sync.WaitGroup
	for p := range producers {
		pw.Add(1)
		go func() {
			defer pw.Done()
			var buf []byte
			for i := p; i < n && time.Now().Before(deadline); i += producers {
				s := q.Reserve()
				if s == nil {
					runtime.Gosched() // dropped; let the consumer catch up
					continue
				}
				buf = strconv.AppendInt(buf[:0], int64(i), 10)
				s.SetName(buf)
				s.AddAttr([]byte("i"), buf)
				s.Start = int64(i)
				q.Commit(s)
			}
		}()
	}
	pw.Wait()
	close(done)
	wg.Wait()
	if uint64(len(got))+q.Dropped() != n {
		t.Fatalf("%d read, %d dropped, of %d", len(got), q.Dropped(), n)
	}
	last := [producers]int{-1, -1, -1}
	seen := map[int]bool{}
	for _, i := range got {
		if seen[i] || i <= last[i%producers] {
			t.Fatalf("span %d: again or out of its producer's order", i)
		}
		seen[i], last[i%producers] = true, i
	}
	t.Logf("%d read, %d dropped", len(got), q.Dropped())
}
