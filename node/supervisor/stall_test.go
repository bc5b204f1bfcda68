package supervisor

import (
	"os"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"coregate/admin/spec"
)

// TestCheckDue: the supervisor's next look at its workers is the earliest
// deadline among them (a running worker's last beat plus StallAfter, a
// starting one's start plus StartTimeout, a held configuration's maxHold,
// and stallCheckEvery while one is stalled), never sooner than
// stallCheckEvery after its last look; with nothing on a clock it does not
// look at all.
func TestCheckDue(t *testing.T) {
	now := time.Now()
	s := &Supervisor{epoch: now.Add(-10 * time.Second)}
	s.opts.StallAfter, s.opts.StartTimeout = time.Second, time.Minute
	beat := func(at time.Duration) *atomic.Int64 {
		b := new(atomic.Int64)
		b.Store(int64(at))
		return b
	}
	running := &proc{ps: new(os.Process), ready: true, beat: beat(9500 * time.Millisecond)}
	starting := &proc{ps: new(os.Process), started: now.Add(-59800 * time.Millisecond), beat: beat(0)}
	stalled := &proc{ps: new(os.Process), ready: true, stalled: true, beat: beat(0)}
	killed := &proc{ps: new(os.Process), ready: true, stalled: true, killed: true, beat: beat(0)}
	retired := &proc{ps: new(os.Process), ready: true, retired: true, beat: beat(0)}
	dead := &proc{ready: true, beat: beat(0)}
	cases := []struct {
		name    string
		workers []*proc
		held    time.Duration // since the pending reload's start, with one held; 0: none
		want    time.Duration // from now; 0: none
	}{
		{"running", []*proc{running, killed, retired, dead}, 0, 500 * time.Millisecond},
		{"starting", []*proc{running, starting}, 0, 200 * time.Millisecond},
		{"stalled", []*proc{running, starting, stalled}, 0, stallCheckEvery},
		{"held", []*proc{running}, 1700 * time.Millisecond, 300 * time.Millisecond},
		{"nothing", []*proc{killed, retired, dead}, 0, 0},
	}
	for _, c := range cases {
		s.workers, s.next, s.reload = c.workers, nil, nil
		if c.held > 0 {
			s.next, s.reload = &spec.Spec{}, &pendingReload{start: now.Add(-c.held)}
		}
		due, ok := s.checkDue(now)
		if c.want == 0 {
			if ok {
				t.Errorf("%s: due in %v, want no check", c.name, due.Sub(now))
			}
			continue
		}
		if !ok || due.Sub(now) != c.want {
			t.Errorf("%s: due in %v (%v), want %v", c.name, due.Sub(now), ok, c.want)
		}
	}

	// armCheck: not sooner than stallCheckEvery after the last look.
	s.check = time.NewTimer(time.Hour)
	defer s.check.Stop()
	s.workers, s.next, s.reload = []*proc{stalled}, nil, nil
	s.checked = time.Now().Add(50 * time.Millisecond)
	s.armCheck()
	if want := s.checked.Add(stallCheckEvery); !s.checkAt.Equal(want) {
		t.Errorf("armed for %v after the last look, want %v", s.checkAt.Sub(s.checked), stallCheckEvery)
	}
	s.workers = nil
	s.armCheck()
	if !s.checkAt.IsZero() {
		t.Errorf("armed with no worker to watch")
	}
}

// TestChecksFollowBeats: with one worker beating every StatsEvery, the
// supervisor looks at the beats about once a StallAfter, not ten times a
// second; and it finds a worker that fell silent within stallCheckEvery
// of StallAfter.
func TestChecksFollowBeats(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	run := func(t *testing.T, opts Options, d time.Duration) (*Supervisor, string) {
		t.Helper()
		t.Setenv(fakeWorkerEnv, t.TempDir()+"/frames")
		opts.Exe = exe
		return runSupervisor(t, opts, d, d+15*time.Second)
	}

	t.Run("beating", func(t *testing.T) {
		s, log := run(t, Options{}, 2600*time.Millisecond)
		if strings.Contains(log, "worker stalled") {
			t.Fatalf("a beating worker was called stalled; log:\n%s", log)
		}
		// Due at the first beat plus a second, then at most every 750 ms.
		if s.checks < 1 || s.checks > 4 {
			t.Errorf("%d looks at the beats in 2.6 s, want 1 to 4 (a ticker of %v made 26); log:\n%s", s.checks, stallCheckEvery, log)
		}
	})

	t.Run("silent", func(t *testing.T) {
		t.Setenv(fakeWorkerBeats, "2")
		const after = 400 * time.Millisecond
		_, log := run(t, Options{StallAfter: after, StallRestart: time.Minute}, 1600*time.Millisecond)
		m := regexp.MustCompile(`msg="worker stalled[^"]*".* silent=(\S+)`).FindStringSubmatch(log)
		if m == nil {
			t.Fatalf("the worker fell silent after two beats and was not called stalled; log:\n%s", log)
		}
		silent, err := time.ParseDuration(m[1])
		if err != nil {
			t.Fatal(err)
		}
		// The look is due at the last beat plus StallAfter; the timer may
		// be late on a busy machine, so some slack past stallCheckEvery.
		if silent < after || silent > after+stallCheckEvery+150*time.Millisecond {
			t.Errorf("called stalled after %v of silence, want %v to %v; log:\n%s", silent, after, after+stallCheckEvery, log)
		}
	})
}
