package storesync

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"coregate/admin/spec"
	"coregate/internal/threadcpu"
)

// TestPaceLoneChanges: changes that come one at a time are published at
// once while their publications cost a tenth of the time between them on
// average, though one of them took longer than a tenth (the window
// before the pace held the change after such a one back), and only a burst is
// held: publications back to back hold the next one once their credit is
// spent, ten times their CPU time each.
func TestPaceLoneChanges(t *testing.T) {
	now := time.Now()
	quiet := now.Add(-time.Hour)
	if p := pace(quiet, now, coalesceCredit/10); p.After(now) {
		t.Errorf("after a quiet hour, a publication of %v holds the next %v", coalesceCredit/10, p.Sub(now))
	}
	// bench admin's changes one at a time at 50 000 routes: one every
	// 70 ms, each publication 4 to 9 ms of CPU (6.5 on average, under a
	// tenth of 70): ten times 9 ms from its start held the next one 20 ms
	const every = 70 * time.Millisecond
	p := quiet
	for i := range 200 {
		cpu := 4 * time.Millisecond
		if i%2 == 1 {
			cpu = 9 * time.Millisecond
		}
		at := now.Add(time.Duration(i) * every)
		p = pace(p, at, cpu)
		if next := at.Add(every); p.After(next) {
			t.Fatalf("change %d, %v after a publication of %v of CPU, is held %v", i+1, every, cpu, p.Sub(next))
		}
	}
	// a burst: publications back to back, each as soon as the pace lets
	// it start
	const b = 5 * time.Millisecond
	p, at := quiet, now
	n := 0
	for ; ; n++ {
		// the publications that start within the second
		if at = maxTime(at, p); !at.Before(now.Add(time.Second)) {
			break
		}
		p = pace(p, at, b)
		if n == 0 && p.After(at) {
			t.Errorf("the first publication of a burst holds the next %v", p.Sub(at))
		}
	}
	// in a second, its credit and a tenth of a CPU
	if max := int((time.Second+coalesceCredit)/(10*b)) + 1; n > max {
		t.Errorf("a burst of a second published %d Specs of %v of CPU, want at most %d", n, b, max)
	}
	if min := int(time.Second/(10*b)) - 1; n < min {
		t.Errorf("a burst of a second published %d Specs of %v of CPU, want at least %d", n, b, min)
	}
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// TestPaceBurstCoalesced: a burst of changes through etcd, whose every
// publication takes 5 ms of CPU, is published in few Specs, as the pace
// lets them start (its credit, then one per 50 ms), the last holding
// every change; a change that comes alone after it is published alone.
func TestPaceBurstCoalesced(t *testing.T) {
	e := newEnv(t)
	s := New(Options{Store: e.store, CachePath: e.cache, Retry: 200 * time.Millisecond, Log: testLog(t)})
	if _, err := s.Load(); err != nil {
		t.Fatal(err)
	}
	specs := make(chan *spec.Spec, 1000)
	var published atomic.Int64
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.Watch(ctx, func(sp *spec.Spec) {
			published.Add(1)
			specs <- sp
			burnCPU(5 * time.Millisecond)
		}, func(error) {})
	}()
	t.Cleanup(func() { cancel(); <-done })
	next := func(routes int) time.Time {
		t.Helper()
		for deadline := time.After(30 * time.Second); ; {
			select {
			case sp := <-specs:
				if len(sp.Routes) == routes {
					return time.Now()
				}
			case <-deadline:
				t.Fatalf("no Spec of %d routes within 30 s", routes)
			}
		}
	}

	// 200 puts from 8 clients at once
	const n, clients = 200, 8
	start := time.Now()
	var wg sync.WaitGroup
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := c; i < n; i += clients {
				e.put(fmt.Sprintf("routes/r%03d", i), route(fmt.Sprintf("/r%d", i)))
			}
		}()
	}
	wg.Wait()
	next(n)
	took := time.Since(start)
	got := int(published.Load())
	// the credit's five, then one per 50 ms of the burst
	if max := int((took+coalesceCredit)/(50*time.Millisecond)) + 2; got > max {
		t.Errorf("a burst of %d changes in %v was published in %d Specs, want at most %d", n, took, got, max)
	}
	t.Logf("%d changes in %v: %d Specs", n, took, got)

	time.Sleep(100 * time.Millisecond)
	before := published.Load()
	put := time.Now()
	e.put("routes/lone", route("/lone"))
	at := next(n + 1)
	if got := published.Load() - before; got != 1 {
		t.Errorf("a lone change was published in %d Specs, want 1", got)
	}
	t.Logf("a lone change after the burst: published %v after its put", at.Sub(put))
}

// burnCPU spins the calling goroutine for d of its thread's CPU time.
func burnCPU(d time.Duration) {
	start := threadcpu.Now()
	for threadcpu.Now()-start < d {
	}
}
