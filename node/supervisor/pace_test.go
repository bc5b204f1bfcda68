package supervisor

import (
	"testing"
	"time"
)

// TestPaceLoneChange: a change that comes after a quiet BuildBurst is
// pushed at once whatever its build took up to BuildBurst/BuildGap, and
// only a burst is held back: builds applied one after another move the
// earliest push on by BuildGap times each once their BuildBurst of credit
// is spent.
func TestPaceLoneChange(t *testing.T) {
	now := time.Now()
	quiet := now.Add(-time.Hour)
	if p := nextPace(quiet, now, BuildBurst/BuildGap); p.After(now) {
		t.Errorf("after a quiet hour, a build of %v holds the next push %v", BuildBurst/BuildGap, p.Sub(now))
	}
	// builds of b applied back to back, each as the one before was: the
	// pace runs BuildGap-1 times b ahead of the clock per build, from a
	// credit of BuildBurst, which the first build takes whole
	const b = BuildBurst / BuildGap
	const n = 20
	p, last := quiet, time.Duration(0)
	for i := range n {
		at := now.Add(time.Duration(i) * b)
		p = nextPace(p, at, b)
		hold := max(p.Sub(at), 0)
		if i == 0 && hold > 0 {
			t.Errorf("the first build of a burst holds the next push %v", hold)
		}
		if hold < last {
			t.Errorf("build %d holds the next push %v, less than the one before it (%v)", i, hold, last)
		}
		last = hold
	}
	if want := (BuildGap-1)*b*n - BuildBurst - b; last < want {
		t.Errorf("after a burst of %d builds of %v the next push is held %v, want %v or more", n, b, last, want)
	}
}

// TestPaceByCPU: the pace is made of the CPU time a worker reported for
// its build, not of the build's wall clock (mostly time waiting for the
// CPU on a busy machine); a worker that reported none is paced by the
// wall clock.
func TestPaceByCPU(t *testing.T) {
	r := &pendingReload{build: 400 * time.Millisecond, buildCPU: 3 * time.Millisecond}
	if got := r.paceBy(); got != 3*time.Millisecond {
		t.Errorf("paced by %v, want the CPU time 3ms", got)
	}
	now := time.Now()
	if p := nextPace(now.Add(-time.Hour), now, r.paceBy()); p.After(now) {
		t.Errorf("a build of 400 ms of wall clock and 3 ms of CPU holds the next push %v", p.Sub(now))
	}
	r.buildCPU = 0
	if got := r.paceBy(); got != 400*time.Millisecond {
		t.Errorf("paced by %v without a CPU time, want the wall clock 400ms", got)
	}
}

// TestPaceByGC: a build's pace counts the collector's CPU time its
// garbage costs the workers (the most one reported), beside its own.
func TestPaceByGC(t *testing.T) {
	r := &pendingReload{build: 400 * time.Millisecond, buildCPU: 3 * time.Millisecond, gcCPU: 4 * time.Millisecond}
	if got := r.paceBy(); got != 7*time.Millisecond {
		t.Errorf("paced by %v, want the build's and the collector's CPU time, 7ms", got)
	}
	now := time.Now()
	if p, want := nextPace(now.Add(-BuildBurst), now, r.paceBy()), now.Add(BuildGap*7*time.Millisecond-BuildBurst); !p.Equal(want) {
		t.Errorf("after a quiet time the next push may come %v from now, want %v", p.Sub(now), want.Sub(now))
	}
}
