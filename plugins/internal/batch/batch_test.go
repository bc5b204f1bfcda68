package batch

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// recorder records the batches sent, and when.
type recorder struct {
	mu      sync.Mutex
	start   time.Time
	batches []string
	at      []time.Duration
	fail    int // calls to fail before succeeding
	partial int // entries a failing call still sends
	calls   int
	got     chan struct{}
}

func newRecorder() *recorder { return &recorder{start: time.Now(), got: make(chan struct{}, 100)} }

func (r *recorder) send(entries [][]byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls++
	var parts []string
	for _, e := range entries {
		parts = append(parts, string(e))
	}
	if r.fail > 0 {
		r.fail--
		if r.partial > 0 {
			r.batches = append(r.batches, strings.Join(parts[:r.partial], ","))
			r.at = append(r.at, time.Since(r.start))
		}
		return r.partial, errors.New("down")
	}
	r.batches = append(r.batches, strings.Join(parts, ","))
	r.at = append(r.at, time.Since(r.start))
	r.got <- struct{}{}
	return len(entries), nil
}

func (r *recorder) wait(t *testing.T, n int) ([]string, []time.Duration) {
	t.Helper()
	for i := 0; i < n; i++ {
		select {
		case <-r.got:
		case <-time.After(10 * time.Second):
			t.Fatalf("batch %d of %d not sent", i+1, n)
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.batches...), append([]time.Duration(nil), r.at...)
}

func start(t *testing.T, cfg Config, r *recorder, n int) *Processor {
	t.Helper()
	p, err := New(cfg, r.send, n, quiet)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

func push(t *testing.T, p *Processor, entries ...string) {
	t.Helper()
	for _, e := range entries {
		if !p.Push([]byte(e)) {
			t.Fatalf("Push(%s) dropped", e)
		}
	}
}

// TestBatchMaxSize: full batches go at once, the rest once no entry came
// for inactive_timeout.
func TestBatchMaxSize(t *testing.T) {
	r := newRecorder()
	cfg := Defaults
	cfg.BatchMaxSize, cfg.InactiveTimeout = 2, 1
	p := start(t, cfg, r, 16)
	push(t, p, "a", "b", "c", "d", "e")
	got, at := r.wait(t, 3)
	if strings.Join(got, "|") != "a,b|c,d|e" {
		t.Fatalf("batches %q", got)
	}
	if at[1] > 500*time.Millisecond || at[2] < 900*time.Millisecond || at[2] > 3*time.Second {
		t.Fatalf("sent at %v: the full ones at once, the last after 1 s", at)
	}
}

// TestBufferDuration: entries that keep coming go out once the first is
// buffer_duration old, without waiting for inactive_timeout.
func TestBufferDuration(t *testing.T) {
	r := newRecorder()
	cfg := Defaults
	cfg.BufferDuration, cfg.InactiveTimeout = 1, 5
	p := start(t, cfg, r, 64)
	for i := range 8 {
		push(t, p, fmt.Sprint(i))
		time.Sleep(200 * time.Millisecond)
	}
	got, at := r.wait(t, 1)
	if !strings.HasPrefix(got[0], "0,1,2,3") || at[0] < 900*time.Millisecond || at[0] > 2500*time.Millisecond {
		t.Fatalf("first batch %q at %v, want entries 0 to 4 or 5 at about 1 s", got[0], at[0])
	}
}

// TestRetries: a failing batch is sent again retry_delay apart, at most
// max_retry_count times, the entries already sent left out; past that it
// is dropped and counted.
func TestRetries(t *testing.T) {
	r := newRecorder()
	r.fail, r.partial = 2, 1
	cfg := Defaults
	cfg.BatchMaxSize, cfg.MaxRetryCount, cfg.RetryDelay = 3, 2, 1
	p := start(t, cfg, r, 16)
	push(t, p, "a", "b", "c")
	got, at := r.wait(t, 1)
	if strings.Join(got, "|") != "a|b|c" || r.calls != 3 {
		t.Fatalf("batches %q in %d calls, want a|b|c in 3", got, r.calls)
	}
	if at[2]-at[0] < 1900*time.Millisecond {
		t.Fatalf("sent at %v: retries not 1 s apart", at)
	}
	if sent, dropped, failed := p.Stats(); sent != 3 || dropped != 0 || failed != 0 {
		t.Fatalf("stats %d %d %d", sent, dropped, failed)
	}

	r2 := newRecorder()
	r2.fail = 2
	cfg.MaxRetryCount, cfg.RetryDelay = 1, 0
	p2 := start(t, cfg, r2, 16)
	push(t, p2, "x", "y", "z")
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, _, failed := p2.Stats(); failed == 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the batch was not dropped after its retry")
		}
		time.Sleep(10 * time.Millisecond)
	}
	r2.mu.Lock()
	defer r2.mu.Unlock()
	if r2.calls != 2 || len(r2.batches) != 0 {
		t.Fatalf("%d calls, batches %q; want 2 calls, none sent", r2.calls, r2.batches)
	}
}

// TestDropWhenFull: with every buffer taken (the destination stuck), Push
// drops and counts without blocking; once it is back the buffers are
// free again.
func TestDropWhenFull(t *testing.T) {
	release := make(chan struct{})
	var mu sync.Mutex
	var sent []string
	send := func(entries [][]byte) (int, error) {
		<-release
		mu.Lock()
		defer mu.Unlock()
		for _, e := range entries {
			sent = append(sent, string(e))
		}
		return len(entries), nil
	}
	cfg := Defaults
	cfg.BatchMaxSize = 1
	p, err := New(cfg, send, 2, quiet)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	push(t, p, "a", "b")
	if p.Push([]byte("c")) {
		t.Fatal("a third entry was taken with two buffers, both out")
	}
	if _, dropped, _ := p.Stats(); dropped != 1 {
		t.Fatalf("dropped %d, want 1", dropped)
	}
	close(release)
	deadline := time.Now().Add(10 * time.Second)
	for !p.Push([]byte("d")) {
		if time.Now().After(deadline) {
			t.Fatal("no buffer came back")
		}
		time.Sleep(10 * time.Millisecond)
	}
	p.Close()
	if strings.Join(sent, ",") != "a,b,d" {
		t.Fatalf("sent %q", sent)
	}
}

// TestCloseFlushes: Close sends what is gathered without waiting for the
// timers.
func TestCloseFlushes(t *testing.T) {
	r := newRecorder()
	p := start(t, Defaults, r, 16)
	push(t, p, "a", "b")
	t0 := time.Now()
	p.Close()
	if time.Since(t0) > 2*time.Second {
		t.Fatal("Close waited for the timers")
	}
	if got, _ := r.wait(t, 1); strings.Join(got, "|") != "a,b" {
		t.Fatalf("batches %q", got)
	}
}

// TestNew: the settings APISIX's schema refuses are refused.
func TestNew(t *testing.T) {
	for _, cfg := range []Config{{BatchMaxSize: 0, InactiveTimeout: 1, BufferDuration: 1}, {BatchMaxSize: 1, InactiveTimeout: 0, BufferDuration: 1},
		{BatchMaxSize: 1, InactiveTimeout: 1, BufferDuration: 1, MaxRetryCount: -1}} {
		if _, err := New(cfg, newRecorder().send, 1, quiet); err == nil {
			t.Errorf("%+v accepted", cfg)
		}
	}
}

// TestRegistryReleases: a Registry gives the instances of one key the
// same processor; once nothing holds the Shared of a key (N configuration
// changes, each dropping the one before), its processor sends what it
// gathered and stops: the processors and goroutines do not grow with the
// changes, no entry is lost, and the counts of the closed ones stay in
// Stats.
func TestRegistryReleases(t *testing.T) {
	var r Registry
	rec := newRecorder()
	cfg := Defaults
	cfg.InactiveTimeout, cfg.BufferDuration = 3600, 3600 // only Close sends
	mk := func() (*Processor, error) { return New(cfg, rec.send, 16, quiet) }
	a, err := r.Get("a", mk)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := r.Get("a", mk); b != a {
		t.Fatal("a second Get of a key made another processor")
	}
	a.Push([]byte("kept"))
	base, goroutines := Open(), runtime.NumGoroutine()
	const changes = 20
	for i := range changes {
		s, err := r.Get(fmt.Sprint("change ", i), mk)
		if err != nil {
			t.Fatal(err)
		}
		s.Push(fmt.Appendf(nil, "entry %d", i))
		runtime.KeepAlive(s) // the configuration's instances go with the next change
	}
	deadline := time.Now().Add(10 * time.Second)
	for Open() > base || r.Len() > 1 {
		if time.Now().After(deadline) {
			t.Fatalf("%d processors open (%d before the changes), %d in the registry, after %d changes", Open(), base, r.Len(), changes)
		}
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
	got, _ := rec.wait(t, changes)
	slices.Sort(got)
	var want []string
	for i := range changes {
		want = append(want, fmt.Sprint("entry ", i))
	}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("sent %q, want %q", got, want)
	}
	// The goroutines that closed them end once the counts are added.
	for n := runtime.NumGoroutine(); n > goroutines; n = runtime.NumGoroutine() {
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines after the changes, %d before", n, goroutines)
		}
		time.Sleep(10 * time.Millisecond)
	}
	eventuallyStats := time.Now().Add(5 * time.Second)
	for {
		if sent, _, _ := r.Stats(); sent == changes {
			break
		}
		if time.Now().After(eventuallyStats) {
			sent, _, _ := r.Stats()
			t.Fatalf("Stats counts %d sent, want %d", sent, changes)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if b, _ := r.Get("a", mk); b != a {
		t.Error("the Shared still held was forgotten")
	}
	a.Close()
	if got, _ := rec.wait(t, 1); got[len(got)-1] != "kept" {
		t.Errorf("the held processor's entry: sent %q", got)
	}
}
