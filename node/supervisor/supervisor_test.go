package supervisor

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"coregate/admin/spec"
	"coregate/internal/syncbuf"
)

func TestParseCPUList(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    []int
		wantErr bool
	}{
		{in: "0", want: []int{0}},
		{in: "0-3,6", want: []int{0, 1, 2, 3, 6}},
		{in: " 2 , 0-1 ", want: []int{2, 0, 1}},
		{in: "1,1,0-1", want: []int{1, 0}},
		{in: "", wantErr: true},
		{in: "0,,1", wantErr: true},
		{in: "3-1", wantErr: true},
		{in: "-1", wantErr: true},
		{in: "a", wantErr: true},
		{in: "1023-1024", wantErr: true},
	} {
		got, err := ParseCPUList(tc.in)
		if (err != nil) != tc.wantErr || (err != nil && !errors.Is(err, ErrBadCPUList)) {
			t.Errorf("ParseCPUList(%q) error %v, want ErrBadCPUList: %v", tc.in, err, tc.wantErr)
			continue
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("ParseCPUList(%q) (-want +got):\n%s", tc.in, diff)
		}
	}
}

func TestFormatCPUList(t *testing.T) {
	for _, tc := range []struct {
		in   []int
		want string
	}{
		{nil, ""},
		{[]int{0}, "0"},
		{[]int{0, 1, 2, 3, 6}, "0-3,6"},
		{[]int{1, 3, 4, 5, 9, 10}, "1,3-5,9-10"},
	} {
		if got := FormatCPUList(tc.in); got != tc.want {
			t.Errorf("FormatCPUList(%v) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestAllowedCPUs(t *testing.T) {
	cpus, err := AllowedCPUs()
	if err != nil {
		t.Fatal(err)
	}
	if len(cpus) == 0 {
		t.Fatal("no CPU in the affinity mask")
	}
	for i := 1; i < len(cpus); i++ {
		if cpus[i] <= cpus[i-1] {
			t.Fatalf("not ascending: %v", cpus)
		}
	}
}

// TestStartPinned starts a real process pinned to the last allowed CPU and
// reads every thread's mask back from /proc; the caller's mask is restored.
func TestStartPinned(t *testing.T) {
	cpus, err := AllowedCPUs()
	if err != nil {
		t.Fatal(err)
	}
	cpu := cpus[len(cpus)-1]
	cmd := exec.Command("sleep", "5")
	if err := startPinned(cpu, cmd.Start); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	got, err := ThreadCPUs(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	want := map[int]string{cmd.Process.Pid: strconv.Itoa(cpu)}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("child threads (-want +got):\n%s", diff)
	}
	after, err := AllowedCPUs()
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(cpus, after); diff != "" {
		t.Errorf("the caller's mask changed (-before +after):\n%s", diff)
	}
}

func TestExitReason(t *testing.T) {
	run := func(args ...string) error {
		cmd := exec.Command(args[0], args[1:]...)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			return err
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill()
			t.Fatalf("%v did not end", args)
			return nil
		}
	}
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"ok", run("true"), "exit status 0"},
		{"status", run("sh", "-c", "exit 3"), "exit status 3"},
		{"signal", run("sh", "-c", "kill -KILL $$"), "signal: killed"},
		{"other", errors.New("wait: no child"), "wait: no child"},
	} {
		if got := exitReason(tc.err); got != tc.want {
			t.Errorf("%s: exitReason = %q, want %q", tc.name, got, tc.want)
		}
	}
}

// fixedSource serves one empty configuration.
type fixedSource struct{}

func (fixedSource) Load() (*spec.Spec, error) { return &spec.Spec{}, nil }
func (fixedSource) Watch(ctx context.Context, _ func(*spec.Spec), _ func(error)) {
	<-ctx.Done()
}

// TestStartFailureBackoff: a worker binary that cannot be started is retried
// with growing delays, not in a loop, and a stop still ends Run.
func TestStartFailureBackoff(t *testing.T) {
	opts := Options{Exe: filepath.Join(t.TempDir(), "missing")}
	lines := runFor(t, opts, 600*time.Millisecond, 5*time.Second)
	var starts int
	var delays []string
	for _, l := range lines {
		if strings.Contains(l, `msg="worker: start"`) {
			starts++
		}
		if i := strings.Index(l, "after="); i >= 0 && strings.Contains(l, "restart delayed") {
			delays = append(delays, strings.Fields(l[i+len("after="):])[0])
		}
	}
	// Start, immediate retry, then after 100 and 200 ms (at 100 and 300
	// ms); the next waits 400 ms, past the stop at 600 ms.
	if diff := cmp.Diff([]string{"100ms", "200ms", "400ms"}, delays); diff != "" {
		t.Errorf("restart delays (-want +got):\n%s\nlog:\n%s", diff, strings.Join(lines, "\n"))
	}
	if starts != 4 {
		t.Errorf("%d start attempts in 600 ms, want 4", starts)
	}
}

// TestStartTimeout: a worker that never gets ready (here a program that
// ignores its control socket and sleeps) is killed after StartTimeout and
// restarted, with the backoff of a worker that never ran.
func TestStartTimeout(t *testing.T) {
	exe := filepath.Join(t.TempDir(), "stuck")
	if err := os.WriteFile(exe, []byte("#!/bin/sh\nexec sleep 60\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	opts := Options{Exe: exe, StartTimeout: 300 * time.Millisecond, DrainTimeout: 100 * time.Millisecond}
	lines := runFor(t, opts, 1500*time.Millisecond, 10*time.Second)
	var timedOut, died []string
	for _, l := range lines {
		if strings.Contains(l, `msg="worker not ready in time: killing it"`) {
			timedOut = append(timedOut, l)
		}
		if strings.Contains(l, `msg="worker died"`) && strings.Contains(l, `why="signal: killed"`) {
			died = append(died, l)
		}
	}
	// Killed at 0.3-0.4 s and restarted at once, killed again at 0.6-0.8 s
	// and restarted 100 ms later, killed again by 1.2 s; then the stop.
	if len(timedOut) < 2 || len(died) < 2 {
		t.Errorf("%d start timeouts and %d deaths by SIGKILL in 1.5 s, want at least 2 each; log:\n%s",
			len(timedOut), len(died), strings.Join(lines, "\n"))
	}
	if len(timedOut) > 4 {
		t.Errorf("%d start timeouts in 1.5 s at 300 ms each: restarted without backoff", len(timedOut))
	}
}

// runFor runs a supervisor of opts with one worker on CPU 0 and an empty
// configuration for d, and returns its log lines; Run must return within
// limit of its start.
func runFor(t *testing.T, opts Options, d, limit time.Duration) []string {
	t.Helper()
	_, log := runSupervisor(t, opts, d, limit)
	return strings.Split(log, "\n")
}

// runSupervisor is runFor returning the supervisor, once Run has returned,
// and its log.
func runSupervisor(t *testing.T, opts Options, d, limit time.Duration) (*Supervisor, string) {
	t.Helper()
	var logBuf syncbuf.Buffer
	opts.Workers, opts.CPUs, opts.Source = 1, []int{0}, fixedSource{}
	opts.Log = slog.New(slog.NewTextHandler(&logBuf, nil))
	s, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx, nil) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(limit):
		t.Fatal("Run did not return after its context ended")
	}
	return s, logBuf.String()
}
