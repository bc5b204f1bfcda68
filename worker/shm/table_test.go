package shm

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

const sec = int64(time.Second)

func newTable(t *testing.T, slots int) *Segment {
	t.Helper()
	s, err := Create(slots)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func TestCounterLifecycle(t *testing.T) {
	s := newTable(t, 64)
	a, e := s.Counter([]byte("a"), 0, 10*sec)
	if a == nil || e != 10*sec || a.Load() != 0 {
		t.Fatalf("new counter: %v, %d", a, e)
	}
	a.Add(3)
	// Found again before it expires: same counter, same expiry.
	if got, e := s.Counter([]byte("a"), 5*sec, 20*sec); got != a || e != 10*sec || got.Load() != 3 {
		t.Fatalf("found: %p %d %d, want %p 3 expiring at 10s", got, got.Load(), e, a)
	}
	// Expiring at now is still live; after, a new window at zero.
	if got, _ := s.Counter([]byte("a"), 10*sec, 30*sec); got.Load() != 3 {
		t.Fatalf("at its expiry: %d", got.Load())
	}
	if got, e := s.Counter([]byte("a"), 10*sec+1, 30*sec); got != a || got.Load() != 0 || e != 30*sec {
		t.Fatalf("expired: %d, expiry %d", got.Load(), e)
	}
	b, _ := s.Counter([]byte("b"), 0, 10*sec)
	if b == a || b == nil {
		t.Fatal("two keys, one counter")
	}
	if live, expired, busy := s.Usage(11 * sec); live != 1 || expired != 1 || busy != 0 {
		t.Fatalf("usage: %d live, %d expired, %d busy", live, expired, busy)
	}
}

func TestLongKeys(t *testing.T) {
	s := newTable(t, 64)
	long := bytes.Repeat([]byte("k"), 300)
	other := append(bytes.Repeat([]byte("k"), 299), 'x')
	exact := bytes.Repeat([]byte("k"), KeyBytes)
	var cs []any
	for _, k := range [][]byte{long, other, exact, exact[:KeyBytes-1]} {
		c, _ := s.Counter(k, 0, sec)
		c.Add(1)
		cs = append(cs, c)
	}
	for i, k := range [][]byte{long, other, exact, exact[:KeyBytes-1]} {
		if c, _ := s.Counter(k, 0, sec); c != cs[i] || c.Load() != 1 {
			t.Fatalf("key %d (%d bytes): another counter or %d", i, len(k), c.Load())
		}
	}
}

// TestFull: with every slot of a chain live, a new key gets nothing; once
// one expires, the new key takes it, and nothing else moves.
func TestFull(t *testing.T) {
	s := newTable(t, 8)
	for i := range 8 {
		c, _ := s.Counter([]byte{byte('a' + i)}, 0, sec*int64(i+1))
		c.Add(int64(i + 1))
	}
	if c, _ := s.Counter([]byte("new"), 0, 10*sec); c != nil {
		t.Fatal("a full table made a counter")
	}
	// At 1.5 s only "a" (expiring at 1 s) has expired.
	c, e := s.Counter([]byte("new"), sec+sec/2, 10*sec)
	if c == nil || c.Load() != 0 || e != 10*sec {
		t.Fatalf("expired slot not reused: %v", c)
	}
	for i := 1; i < 8; i++ {
		if c, _ := s.Counter([]byte{byte('a' + i)}, sec+sec/2, 100*sec); c.Load() != int64(i+1) {
			t.Fatalf("key %c lost its count: %d", 'a'+i, c.Load())
		}
	}
	if c, _ := s.Counter([]byte("another"), sec+sec/2, 10*sec); c != nil {
		t.Fatal("full again, yet a counter")
	}
}

// TestExpiryReuse: keys that come and go in successive windows never fill
// a small table.
func TestExpiryReuse(t *testing.T) {
	s := newTable(t, 16)
	for w := range int64(200) {
		now := w * sec
		for k := range 10 {
			c, _ := s.Counter(fmt.Appendf(nil, "w%d-k%d", w, k), now, now+sec/2)
			if c == nil {
				t.Fatalf("window %d key %d: no counter", w, k)
			}
			if c.Add(1) != 1 {
				t.Fatalf("window %d key %d: not a fresh counter", w, k)
			}
		}
	}
}

// TestStuckSlot: a slot left busy by a process that died while inserting
// keeps its key waiting only StuckAfter seconds; then any process frees it.
func TestStuckSlot(t *testing.T) {
	s := newTable(t, 64)
	victim := []byte("victim")
	c, _ := s.Counter(victim, 0, 1000*sec)
	c.Add(7)
	var k key
	k.set(victim, s.seed)
	sl := s.at(&k, 0)
	if !sl.holds(&k) {
		t.Fatal("the key is not at the head of its chain")
	}
	// A claim at 100 s that never finishes.
	sl.ctl.Store(busyWord(k.tag, 100*sec))
	if c, _ := s.Counter(victim, 101*sec, 1000*sec); c != nil {
		t.Fatal("a key being inserted elsewhere got a second counter")
	}
	if _, _, busy := s.Usage(0); busy != 1 {
		t.Fatalf("busy slots: %d", busy)
	}
	c, e := s.Counter(victim, (100+StuckAfter+1)*sec, 1000*sec)
	if c == nil || c.Load() != 0 || e != 1000*sec {
		t.Fatalf("stuck slot not reclaimed: %v", c)
	}
	if live, _, busy := s.Usage(0); live != 1 || busy != 0 {
		t.Fatalf("after reclaim: %d live, %d busy", live, busy)
	}
}

// TestGoroutines: goroutines inserting and counting the same keys at once
// (the race detector watches this one).
func TestGoroutines(t *testing.T) {
	s := newTable(t, 1024)
	const gs, keys, rounds = 8, 300, 20
	var wg sync.WaitGroup
	for range gs {
		wg.Go(func() {
			for r := range rounds {
				for k := range keys {
					c, _ := s.Counter(fmt.Appendf(nil, "key-%d", (k+r)%keys), sec, 10*sec)
					c.Add(1)
				}
			}
		})
	}
	wg.Wait()
	for k := range keys {
		if c, _ := s.Counter(fmt.Appendf(nil, "key-%d", k), sec, 10*sec); c.Load() != gs*rounds {
			t.Fatalf("key %d: %d, want %d", k, c.Load(), gs*rounds)
		}
	}
	if live, _, busy := s.Usage(sec); live != keys || busy != 0 {
		t.Fatalf("%d live slots and %d busy for %d keys", live, busy, keys)
	}
}

func TestCreateRefuses(t *testing.T) {
	if _, err := Create(MaxSlots + 1); err == nil {
		t.Fatal("a segment over MaxSlots")
	}
	f, err := os.CreateTemp(t.TempDir(), "x")
	if err != nil {
		t.Fatal(err)
	}
	_ = f.Truncate(4096)
	if _, err := Open(f); err == nil {
		t.Fatal("a file of zeros opened as a segment")
	}
	_ = f.Close()
}

// Helper processes: TestMain runs child() instead of the tests when
// childEnv is set; the segment is fd 3 and fd 4 is a pipe that closes
// when all children may start.
const childEnv = "SHM_TEST_CHILD"

func TestMain(m *testing.M) {
	if v := os.Getenv(metricsChildEnv); v != "" {
		idx, _ := strconv.Atoi(v)
		if err := metricsChild(idx); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	if os.Getenv(ticketsChildEnv) != "" {
		if err := ticketsChild(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	if v := os.Getenv(healthChildEnv); v != "" {
		if err := healthChild(v); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	if os.Getenv(childEnv) != "" {
		if err := child(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

const (
	hotKeys, hotAdds = 4, 50000
	manyKeys         = 3000
	fillers          = 3000 // with the keys, 3/4 of the table's 8192 slots
)

func child() error {
	t, err := Open(os.NewFile(3, "segment"))
	if err != nil {
		return err
	}
	// Each child has its own clock, so that they disagree on which
	// fillers expired (1 s for the first, 2 s for the next...).
	idx, _ := strconv.Atoi(os.Getenv(childEnv))
	now := sec * int64(1+idx)
	var b [1]byte
	_, _ = os.NewFile(4, "start").Read(b[:]) // EOF: go
	// Many keys inserted by every process at once, in the same order.
	for k := range manyKeys {
		c := counter(t, fmt.Appendf(nil, "many-%d", k), now, 100*sec)
		if c == nil {
			return fmt.Errorf("many-%d: no counter", k)
		}
		c.Add(1)
	}
	// A few hot keys, hammered.
	var key [8]byte
	for i := range hotAdds * hotKeys {
		kb := strconv.AppendInt(append(key[:0], "hot-"...), int64(i%hotKeys), 10)
		c := counter(t, kb, now, 100*sec)
		if c == nil {
			return fmt.Errorf("%s: no counter", kb)
		}
		c.Add(1)
	}
	return nil
}

// counter is t.Counter, tried again for up to a second. A process
// preempted in the middle of an insertion holds its slot busy, and another
// waiting for that key gives up after maxWait (the gateway fails that one
// request rather than wait on its event loop); with this test's 2 to 4
// processes on a shared CPU, that happens. A key still without a counter
// after a second is a failure: the table is full, or a slot stuck.
func counter(t *Table, b []byte, now, expires int64) *atomic.Int64 {
	var deadline time.Time
	for {
		if c, _ := t.Counter(b, now, expires); c != nil {
			return c
		}
		if deadline.IsZero() {
			deadline = time.Now().Add(time.Second)
		} else if time.Now().After(deadline) {
			return nil
		}
		time.Sleep(time.Millisecond)
	}
}

// TestProcesses: several processes map one segment, insert the same keys
// at the same moment and count on them: every count is exact and every
// key has one slot. The table starts half full of counters that expire
// at 1.5 s, which some processes' clocks see as expired and reuse, others
// as live.
func TestProcesses(t *testing.T) {
	for _, procs := range []int{2, 4} {
		t.Run(strconv.Itoa(procs), func(t *testing.T) {
			s := newTable(t, 1<<13)
			for i := range fillers {
				if c, _ := s.Counter(fmt.Appendf(nil, "filler-%d", i), 0, sec+sec/2); c == nil {
					t.Fatal("no room for the fillers")
				}
			}
			r, w, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			var cmds []*exec.Cmd
			for i := range procs {
				cmd := exec.Command(os.Args[0], "-test.run=^$")
				cmd.Env = append(os.Environ(), childEnv+"="+strconv.Itoa(i))
				cmd.ExtraFiles = []*os.File{s.File(), r}
				cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
				if err := cmd.Start(); err != nil {
					t.Fatal(err)
				}
				cmds = append(cmds, cmd)
			}
			_ = r.Close()
			_ = w.Close() // go
			done := make(chan error, procs)
			for _, cmd := range cmds {
				go func() { done <- cmd.Wait() }()
			}
			deadline := time.After(3 * time.Minute)
			for range procs {
				select {
				case err := <-done:
					if err != nil {
						t.Fatalf("child: %v", err)
					}
				case <-deadline:
					for _, cmd := range cmds {
						_ = cmd.Process.Kill()
					}
					t.Fatal("children still running after 3 minutes")
				}
			}
			for k := range hotKeys {
				if c, _ := s.Counter(fmt.Appendf(nil, "hot-%d", k), sec, 100*sec); c.Load() != int64(procs*hotAdds) {
					t.Errorf("hot-%d: %d, want exactly %d", k, c.Load(), procs*hotAdds)
				}
			}
			for k := range manyKeys {
				if c, _ := s.Counter(fmt.Appendf(nil, "many-%d", k), sec, 100*sec); c.Load() != int64(procs) {
					t.Fatalf("many-%d: %d, want %d", k, c.Load(), procs)
				}
			}
			if live, _, busy := s.Usage(2 * sec); live != hotKeys+manyKeys || busy != 0 {
				t.Fatalf("%d live slots and %d busy for %d keys", live, busy, hotKeys+manyKeys)
			}
		})
	}
}
