package procstat

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestParseStat(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want Stat
		err  error
	}{
		{
			name: "plain",
			in:   "4242 (nginx) S 4241 4242 4242 0 -1 4194560 120 0 0 0 37 12 0 0 20 0 1 0 999 1000 200",
			want: Stat{PID: 4242, Comm: "nginx", State: 'S', PPID: 4241, UTime: 37, STime: 12},
		},
		{
			name: "comm with spaces and parens",
			in:   "7 (a (b) c) R 1 7 7 0 -1 0 0 0 0 0 5 6 0 0 20 0 1 0 1 1 1\n",
			want: Stat{PID: 7, Comm: "a (b) c", State: 'R', PPID: 1, UTime: 5, STime: 6},
		},
		{name: "truncated", in: "7 (x) R 1 7", err: ErrFormat},
		{name: "no comm", in: "7 x R 1", err: ErrFormat},
		{name: "bad utime", in: "7 (x) R 1 7 7 0 -1 0 0 0 0 0 z 6 0", err: ErrFormat},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseStat([]byte(tc.in))
			if !errors.Is(err, tc.err) {
				t.Fatalf("error = %v, want %v", err, tc.err)
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("(-want +got):\n%s", d)
			}
		})
	}
}

func TestParseRSS(t *testing.T) {
	tests := []struct {
		in   string
		want uint64
		err  error
	}{
		{in: "Name:\tnginx\nVmPeak:\t  9999 kB\nVmRSS:\t    5120 kB\nRssAnon: 1 kB\n", want: 5120},
		{in: "Name:\tzombie\nState:\tZ\n", want: 0},
		{in: "VmRSS:\t12 MB\n", err: ErrFormat},
	}
	for _, tc := range tests {
		got, err := ParseRSS([]byte(tc.in))
		if !errors.Is(err, tc.err) || got != tc.want {
			t.Errorf("ParseRSS(%q) = %d, %v; want %d, %v", tc.in, got, err, tc.want, tc.err)
		}
	}
}

func TestParseSystem(t *testing.T) {
	in := "cpu  100 5 50 1000 20 3 2 1 0 0\ncpu0 60 5 30 500 10 3 2 1 7 0\ncpu1 40 0 20 500 10 0 0 0 0 0\nintr 1 2 3\nctxt 9\n"
	got, err := ParseSystem([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	want := []CPUTimes{
		{CPU: -1, Busy: 161, Idle: 1020},
		{CPU: 0, Busy: 101, Idle: 510},
		{CPU: 1, Busy: 60, Idle: 510},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
	if _, err := ParseSystem([]byte("intr 1\n")); !errors.Is(err, ErrFormat) {
		t.Errorf("no cpu lines: error = %v, want ErrFormat", err)
	}
}

func TestParsePSS(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want uint64
		err  error
	}{
		{in: "55d0a000-7ffd0000 ---p 00000000 00:00 0 [rollup]\nRss:\t   30000 kB\nPss:\t   12345 kB\nPss_Dirty: 5 kB\n", want: 12345},
		{in: "Rss: 10 kB\n", want: 0},
		{in: "Pss:\t12 MB\n", err: ErrFormat},
	} {
		got, err := ParsePSS([]byte(tc.in))
		if got != tc.want || !errors.Is(err, tc.err) {
			t.Errorf("ParsePSS(%q) = %d, %v; want %d, %v", tc.in, got, err, tc.want, tc.err)
		}
	}
}

func TestCPUList(t *testing.T) {
	tests := []struct {
		in   string
		want []int
		out  string
		err  error
	}{
		{in: "0", want: []int{0}, out: "0"},
		{in: "0-3", want: []int{0, 1, 2, 3}, out: "0-3"},
		{in: "4,0-1,1", want: []int{0, 1, 4}, out: "0-1,4"},
		{in: "3-1", err: ErrCPUList},
		{in: "a", err: ErrCPUList},
		{in: "", err: ErrCPUList},
	}
	for _, tc := range tests {
		got, err := ParseCPUList(tc.in)
		if !errors.Is(err, tc.err) {
			t.Errorf("ParseCPUList(%q) error = %v, want %v", tc.in, err, tc.err)
			continue
		}
		if d := cmp.Diff(tc.want, got); d != "" {
			t.Errorf("ParseCPUList(%q) (-want +got):\n%s", tc.in, d)
		}
		if err == nil && FormatCPUList(got) != tc.out {
			t.Errorf("FormatCPUList(%v) = %q, want %q", got, FormatCPUList(got), tc.out)
		}
	}
}

func TestTreeAndMeasure(t *testing.T) {
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Skip("no sleep binary:", err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	pids, err := Tree(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if pids[0] != os.Getpid() || !slices.Contains(pids, cmd.Process.Pid) {
		t.Fatalf("Tree(self) = %v, want self first and child %d", pids, cmd.Process.Pid)
	}
	before := Measure([]int{os.Getpid()})
	// Spin until the process has had 300 ms of CPU (30 ticks), by
	// getrusage's count, however busy the machine (10 s at most).
	cpu := func() time.Duration {
		var ru syscall.Rusage
		if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
			t.Fatal(err)
		}
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	cpu0, deadline := cpu(), time.Now().Add(10*time.Second)
	x := 0
	for cpu()-cpu0 < 300*time.Millisecond && time.Now().Before(deadline) {
		for range 100000 {
			x++
		}
	}
	runtime.KeepAlive(x)
	after := Measure([]int{os.Getpid(), 1 << 30})
	if after.Procs != 1 || after.RSSKiB == 0 || after.PSSKiB == 0 {
		t.Fatalf("Measure = %+v, want 1 readable process with RSS and PSS", after)
	}
	// Two sleeps map the same binary and libc pages: summed, PSS counts
	// those once and comes out below RSS, which counts them twice.
	cmd2 := exec.Command("sleep", "30")
	if err := cmd2.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd2.Process.Kill(); _ = cmd2.Wait() }()
	time.Sleep(100 * time.Millisecond) // both have run past exec
	if two := Measure([]int{cmd.Process.Pid, cmd2.Process.Pid}); two.Procs != 2 || two.PSSKiB == 0 || two.PSSKiB >= two.RSSKiB {
		t.Errorf("two sleeps: %+v; want PSS above 0 and below RSS", two)
	}
	if after.Ticks < before.Ticks+20 {
		t.Errorf("CPU ticks went from %d to %d after %v of CPU by getrusage", before.Ticks, after.Ticks, cpu()-cpu0)
	}
}

func TestAffinity(t *testing.T) {
	cpus, err := Online()
	if err != nil || len(cpus) == 0 {
		t.Fatalf("Online() = %v, %v", cpus, err)
	}
	last := cpus[len(cpus)-1]
	cmd := exec.Command("sleep", "30")
	err = OnCPUs([]int{last}, cmd.Start)
	if err != nil {
		t.Skip("cannot start sleep:", err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(cmd.Process.Pid) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	want := "Cpus_allowed_list:\t" + FormatCPUList([]int{last}) + "\n"
	if !bytes.Contains(b, []byte(want)) {
		t.Errorf("child status lacks %q", want)
	}
	mine, _ := Online()
	if d := cmp.Diff(cpus, mine); d != "" {
		t.Errorf("own mask changed (-before +after):\n%s", d)
	}
	p, err := Probe(cpus)
	if err != nil || len(p) != len(cpus) {
		t.Fatalf("Probe = %v, %v", p, err)
	}
}

func TestParseSchedstat(t *testing.T) {
	if ns, err := ParseSchedstat([]byte("123456789 4242 17\n")); err != nil || ns != 123456789 {
		t.Errorf("got %d, %v; want 123456789", ns, err)
	}
	for _, bad := range []string{"", "1 2", "x 2 3", "1 2 3 4"} {
		if _, err := ParseSchedstat([]byte(bad)); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

// TestRunNS: this process's threads run while it spins, and RunNS sees
// it: it grows by about the CPU time the kernel accounted to the process
// meanwhile (getrusage), however much of the 20 ms of spinning other
// processes had the CPU for.
func TestRunNS(t *testing.T) {
	pid := []int{os.Getpid()}
	cpu := func() int64 {
		var ru syscall.Rusage
		if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
			t.Fatal(err)
		}
		return ru.Utime.Nano() + ru.Stime.Nano()
	}
	before, cpuBefore := RunNS(pid), cpu()
	for end := time.Now().Add(20 * time.Millisecond); time.Now().Before(end); {
	}
	after, spent := RunNS(pid), cpu()-cpuBefore
	if spent <= 0 || int64(after-before) < spent/2 {
		t.Errorf("RunNS went from %d to %d over 20 ms of spinning, in which the process had %d ns of CPU", before, after, spent)
	}
	if n := RunNS([]int{-1}); n != 0 {
		t.Errorf("RunNS of no process: %d", n)
	}
}
