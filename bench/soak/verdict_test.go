package soak

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

func windows(rss []uint64, p99 []time.Duration) []Window {
	ws := make([]Window, len(rss))
	for i := range ws {
		ws[i] = Window{Start: time.Duration(i) * 10 * time.Second, Requests: 100, RSSKiB: rss[i], P99: p99[i]}
	}
	return ws
}

func flat(n int, v time.Duration) []time.Duration {
	out := make([]time.Duration, n)
	for i := range out {
		out[i] = v
	}
	return out
}

func TestJudgeSoakPasses(t *testing.T) {
	ws := windows([]uint64{1000, 1010, 990, 1020, 1000, 1030, 1010, 1040}, flat(8, time.Millisecond))
	v := JudgeSoak(ws, SoakTotals{Requests: 800, FDsBefore: 20, FDsAfter: 20})
	if !v.Passed() {
		t.Fatalf("failures: %v", v.Failures)
	}
	// first quarter {1000, 1010} → median 1005; last quarter {1010, 1040} → 1025.
	if v.RSSStart != 1005 || v.RSSEnd != 1025 {
		t.Errorf("RSS %d → %d, want 1005 → 1025", v.RSSStart, v.RSSEnd)
	}
}

func TestJudgeSoakFailures(t *testing.T) {
	for _, tc := range []struct {
		name string
		ws   []Window
		tot  SoakTotals
		want string
	}{
		{"rss drift", windows([]uint64{1000, 1000, 1000, 1060, 1060}, flat(5, time.Millisecond)), SoakTotals{Requests: 1}, "RSS drift +6.0 %"},
		{"p99 drift", windows([]uint64{1000, 1000, 1000, 1000}, []time.Duration{time.Millisecond, time.Millisecond, 1500 * time.Microsecond, 1700 * time.Microsecond}),
			SoakTotals{Requests: 1}, "p99 drift +60 %"},
		{"fd growth", windows([]uint64{1000, 1000}, flat(2, time.Millisecond)), SoakTotals{Requests: 1, FDsBefore: 20, FDsAfter: 21}, "fd growth: 20 open before the load, 21 after"},
		{"5xx", windows([]uint64{1000, 1000}, flat(2, time.Millisecond)), SoakTotals{Requests: 1, Status5xx: 3}, "3 answers with a 5xx"},
		{"unanswered", windows([]uint64{1000, 1000}, flat(2, time.Millisecond)), SoakTotals{Requests: 1, Unanswered: 2}, "2 requests not answered"},
		{"unexpected", windows([]uint64{1000, 1000}, flat(2, time.Millisecond)), SoakTotals{Requests: 1, Unexpected: 1}, "1 answers with an unexpected status"},
		{"too short", windows([]uint64{1000}, flat(1, time.Millisecond)), SoakTotals{Requests: 1}, "only 1 window"},
		{"no rss", windows([]uint64{0, 0}, flat(2, time.Millisecond)), SoakTotals{Requests: 1}, "RSS could not be read"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := JudgeSoak(tc.ws, tc.tot)
			if v.Passed() {
				t.Fatal("passed")
			}
			if len(v.Failures) != 1 || !strings.Contains(v.Failures[0], tc.want) {
				t.Errorf("failures %q, want one containing %q", v.Failures, tc.want)
			}
		})
	}
}

// One noisy window at either end does not move the verdict: medians.
func TestJudgeSoakMedians(t *testing.T) {
	p := flat(12, time.Millisecond)
	p[0], p[11] = 10*time.Millisecond, 10*time.Millisecond
	rss := []uint64{1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000, 2000}
	if v := JudgeSoak(windows(rss, p), SoakTotals{Requests: 1}); !v.Passed() {
		t.Fatalf("failures: %v", v.Failures)
	}
}

func TestSoakPlan(t *testing.T) {
	for _, tc := range []struct{ d, warm, win time.Duration }{
		{60 * time.Second, 10 * time.Second, 10 * time.Second},
		{2 * time.Minute, 20 * time.Second, 10 * time.Second},
		{30 * time.Minute, 2 * time.Minute, time.Minute},
	} {
		if w, n := SoakPlan(tc.d); w != tc.warm || n != tc.win {
			t.Errorf("SoakPlan(%v) = %v, %v; want %v, %v", tc.d, w, n, tc.warm, tc.win)
		}
	}
}

func TestSoakCollector(t *testing.T) {
	c := newSoakCollector(10*time.Second, 10*time.Second)
	add := func(end time.Duration, k Kind, o Outcome, status int, lat time.Duration) {
		c.add(&Record{Kind: k, Outcome: o, Status: status, Due: end - lat, Start: end - lat, End: end})
	}
	add(time.Second, KeepAlive, BadStatus, 502, time.Millisecond) // warm-up: totals only
	for i := range 100 {
		add(11*time.Second, KeepAlive, OK, 200, time.Duration(i+1)*time.Millisecond)
	}
	add(12*time.Second, Upload, OK, 200, time.Second) // large: not in the p99
	add(21*time.Second, NotFound, OK, 404, time.Millisecond)
	add(22*time.Second, KeepAlive, Broken, 0, time.Millisecond)
	add(23*time.Second, NotFound, BadStatus, 200, time.Millisecond)
	add(35*time.Second, KeepAlive, OK, 200, time.Millisecond) // partial window past d
	c.close()
	ws := c.windows(30 * time.Second)
	if len(ws) != 2 {
		t.Fatalf("%d windows, want 2: %+v", len(ws), ws)
	}
	if ws[0].Start != 10*time.Second || ws[0].Requests != 101 || ws[0].P99 < 98*time.Millisecond || ws[0].P99 > 100*time.Millisecond {
		t.Errorf("window 0: %+v", ws[0])
	}
	if ws[1].Requests != 3 || ws[1].Failed != 2 || ws[1].P99 > 2*time.Millisecond {
		t.Errorf("window 1: %+v", ws[1])
	}
	want := SoakTotals{Requests: 106, Status5xx: 1, Unanswered: 1, Unexpected: 1}
	if c.totals != want {
		t.Errorf("totals %+v, want %+v", c.totals, want)
	}
}

func TestRules(t *testing.T) {
	s := time.Second
	owned := map[uint16]bool{1000: true}
	kill := KillRule(owned, 9*s, 10*s) // its fds read at 9 s, gone at 10 s
	stop := StopRule(owned, 9*s, 10*s, 1500*time.Millisecond)
	down := UpstreamDownRule(10*s, 12*s, s/2)
	fail := Upstream503Rule(10*s, 15*s, s/2)
	for _, tc := range []struct {
		name                    string
		r                       Record
		kill, stop, down, fail_ bool
	}{
		{"ok on owned conn", Record{Outcome: OK, Port: 1000, Dialed: s, Start: 11 * s, End: 11 * s}, false, false, false, false},
		{"broken on owned conn", Record{Outcome: Broken, Port: 1000, Dialed: s, Start: 11 * s, End: 11 * s}, true, true, false, false},
		{"broken, other conn", Record{Outcome: Broken, Port: 2000, Dialed: s, Start: 11 * s, End: 11 * s}, false, false, false, false},
		{"opened while the fds were read", Record{Outcome: Broken, Port: 4000, Dialed: 9*s + s/2, Start: 11 * s, End: 11 * s}, true, true, false, false},
		{"same port, opened after the fault", Record{Outcome: Broken, Port: 1000, Dialed: 11 * s, Start: 11 * s, End: 11 * s}, false, true, false, false},
		{"SYN dropped before the exit", Record{Outcome: ConnectTimeout, Dialed: 10*s - 1, Start: 10*s - 1, End: 11 * s}, true, true, false, false},
		{"SYN dropped after the exit", Record{Outcome: ConnectTimeout, Dialed: 10 * s, Start: 10 * s, End: 11 * s}, false, true, false, false},
		{"refused after the exit", Record{Outcome: ConnectErr, Dialed: 10 * s, Start: 10 * s, End: 10 * s}, false, true, false, false},
		{"broken, opened after grace", Record{Outcome: Broken, Port: 1000, Dialed: 12 * s, Start: 12 * s, End: 12 * s}, false, false, false, false},
		{"timeout, opened in grace", Record{Outcome: Timeout, Port: 3000, Dialed: 11 * s, Start: 11 * s, End: 12 * s}, false, true, false, false},
		{"timeout, opened after grace", Record{Outcome: Timeout, Port: 3000, Dialed: 12 * s, Start: 12 * s, End: 13 * s}, false, false, false, false},
		{"502 while down", Record{Outcome: BadStatus, Status: 502, Start: 11 * s, End: 11 * s}, false, false, true, false},
		{"502 in flight at the kill", Record{Outcome: BadStatus, Status: 502, Start: 9 * s, End: 10 * s}, false, false, true, false},
		{"502 in the slack", Record{Outcome: BadStatus, Status: 502, Start: 12*s + s/4, End: 12*s + s/4}, false, false, true, false},
		{"502 after the slack", Record{Outcome: BadStatus, Status: 502, Start: 13 * s, End: 13 * s}, false, false, false, false},
		{"truncated while down", Record{Outcome: Truncated, Status: 200, Start: 9 * s, End: 10 * s}, false, false, true, false},
		{"reset while down", Record{Outcome: Broken, Start: 11 * s, End: 11 * s}, false, false, false, false},
		{"503 while failing", Record{Outcome: BadStatus, Status: 503, Start: 14 * s, End: 14 * s}, false, false, false, true},
		{"503 while down", Record{Outcome: BadStatus, Status: 503, Start: 11 * s, End: 11 * s}, false, false, true, true},
		{"503 after failing", Record{Outcome: BadStatus, Status: 503, Start: 16 * s, End: 16 * s}, false, false, false, false},
		{"502 while failing", Record{Outcome: BadStatus, Status: 502, Start: 14 * s, End: 14 * s}, false, false, false, false},
	} {
		r := tc.r
		got := [4]bool{kill(&r), stop(&r), down(&r), fail(&r)}
		if want := [4]bool{tc.kill, tc.stop, tc.down, tc.fail_}; got != want {
			t.Errorf("%s: kill, stop, down, 503 = %v, want %v", tc.name, got, want)
		}
		if ExplainsNothing(&r) {
			t.Errorf("%s: ExplainsNothing explains it", tc.name)
		}
	}
}

func TestTally(t *testing.T) {
	s := time.Second
	ms := time.Millisecond
	var recs []Record
	ok := func(due, service time.Duration) {
		recs = append(recs, Record{Kind: KeepAlive, Due: due, Start: due, End: due + service})
	}
	for t := time.Duration(0); t < 20*s; t += ms { // 100 a bin
		ok(t, ms)
	}
	recs = append(recs,
		Record{Kind: KeepAlive, Outcome: Broken, Port: 1, Dialed: 0, Due: 10 * s, Start: 10 * s, End: 10*s + 50*ms},
		Record{Kind: KeepAlive, Outcome: Broken, Port: 2, Dialed: 0, Due: 10 * s, Start: 10 * s, End: 10*s + 50*ms},
		Record{Kind: Fresh, Outcome: BadStatus, Status: 502, Port: 3, Dialed: 11 * s, Due: 11 * s, Start: 11 * s, End: 11*s + 200*ms},
		// slowly served, 2 in their 100 ms (over 1 %): counts for recovery
		Record{Kind: KeepAlive, Due: 12 * s, Start: 12 * s, End: 12*s + 350*ms},
		Record{Kind: KeepAlive, Due: 12 * s, Start: 12 * s, End: 12*s + 350*ms},
		// due outside the phase: not counted
		Record{Kind: KeepAlive, Outcome: Broken, Due: 25 * s, Start: 25 * s, End: 25 * s},
	)
	f := Fault{Name: "kill", From: 5 * s, To: 20 * s, At: 10 * s, Explains: KillRule(map[uint16]bool{1: true}, 10*s, 10*s)}
	row := Tally(recs, f, 100*ms, s)
	if row.Sent != 15000+5 || row.Failed != 3 || row.Explained != 1 || row.Unexplained() != 2 {
		t.Errorf("sent %d failed %d explained %d, want 15005 3 1", row.Sent, row.Failed, row.Explained)
	}
	if !row.Recovered || row.Recovery != 2400*ms {
		t.Errorf("recovery %v (recovered %v), want 2.4s", row.Recovery, row.Recovered)
	}
	if row.ByOutcome["broken"] != 2 || row.ByOutcome["502"] != 1 {
		t.Errorf("by outcome %v", row.ByOutcome)
	}
	// The unexplained ones are listed, their times from the fault.
	var b bytes.Buffer
	ListStray(&b, []Row{row})
	want := `Unexplained under "kill" (times from the fault; the first 2 of 2):
- keep-alive, broken: client port 2, connection opened at -10000.0 ms, sent at +0.0 ms, ended at +50.0 ms
- new connection, status 502: client port 3, connection opened at +1000.0 ms, sent at +1000.0 ms, ended at +1200.0 ms
`
	if b.String() != want {
		t.Errorf("ListStray:\n%s\nwant:\n%s", b.String(), want)
	}
	// A stray slow request among 100 in its 100 ms is noise.
	recs = append(recs, Record{Kind: KeepAlive, Due: 15 * s, Start: 15 * s, End: 15*s + 120*ms})
	if row := Tally(recs, f, 100*ms, s); row.Recovery != 2400*ms {
		t.Errorf("a stray slow request moved recovery to %v", row.Recovery)
	}
	// Still failing at the end of the phase: not recovered.
	recs = append(recs, Record{Kind: KeepAlive, Outcome: Timeout, Due: 19*s + 500*ms, Start: 19*s + 500*ms, End: 19*s + 600*ms})
	if row := Tally(recs, f, 100*ms, s); row.Recovered {
		t.Errorf("recovered at %v though failing at the end", row.Recovery)
	}
	// The baseline has no recovery time, whatever its requests did.
	if row := Tally(recs, Fault{Name: "steady", From: 0, To: 20 * s, Baseline: true}, 100*ms, s); row.Recovery != 0 || !row.Recovered || !row.Baseline {
		t.Errorf("baseline: %+v", row)
	}
	// Nothing bad after the fault: 0.
	if row := Tally(recs[:20000], Fault{Name: "none", From: 0, To: 5 * s, At: 0}, 100*ms, s); row.Recovery != 0 || !row.Recovered || row.Failed != 0 {
		t.Errorf("clean phase: %+v", row)
	}
}

func TestTabulate(t *testing.T) {
	var b bytes.Buffer
	Tabulate(&b, []Row{
		{Fault: "steady", Sent: 100, Recovered: true, Baseline: true, ByOutcome: map[string]int{}},
		{Fault: "clean", Sent: 100, Recovered: true, ByOutcome: map[string]int{}},
		{Fault: "kill -9 of a worker", Sent: 1000, Failed: 5, Explained: 4, Recovery: 1250 * time.Millisecond, Recovered: true,
			ByOutcome: map[string]int{"broken": 4, "502": 1}},
		{Fault: "reloads", Sent: 10, Failed: 1, Recovery: 3 * time.Second, ByOutcome: map[string]int{"timeout": 1}},
	})
	want := `| fault | requests sent | failed | failed that the fault explains | unexplained | time to full recovery | failures by kind |
|---|---:|---:|---:|---:|---:|---|
| steady | 100 | 0 | 0 | 0 | – | – |
| clean | 100 | 0 | 0 | 0 | 0 s | – |
| kill -9 of a worker | 1000 | 5 | 4 | 1 | 1.25 s | 502 1, broken 4 |
| reloads | 10 | 1 | 0 | 1 | not within 3.0 s | timeout 1 |
`
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
}

func TestRenderSoak(t *testing.T) {
	var b bytes.Buffer
	ws := windows([]uint64{2048, 2048}, flat(2, 1500*time.Microsecond))
	RenderWindows(&b, ws)
	tot := SoakTotals{Requests: 200, FDsBefore: 30, FDsAfter: 30}
	RenderSoakVerdict(&b, JudgeSoak(ws, tot), tot)
	for _, s := range []string{"| 0s | 100 | 0 | 0 | 1.50 ms | 0.00 ms | 2.0 | 0 | 0 |", "| 10s |", "drift +0.0 %", "soak: PASS"} {
		if !strings.Contains(b.String(), s) {
			t.Errorf("output lacks %q:\n%s", s, b.String())
		}
	}
	b.Reset()
	tot.Status5xx = 1
	RenderSoakVerdict(&b, JudgeSoak(ws, tot), tot)
	if !strings.Contains(b.String(), "soak: FAIL: 1 answers with a 5xx") {
		t.Errorf("no failure line:\n%s", b.String())
	}
}

func TestMix(t *testing.T) {
	var n [numKinds]int
	reqs := 0
	for i := range 200 {
		k := MixOf(i)
		n[k]++
		reqs += Requests(k)
	}
	want := [numKinds]int{KeepAlive: 174, Fresh: 10, Pipelined: 10, NotFound: 4, Upload: 1, Download: 1}
	if n != want || reqs != 230 {
		t.Errorf("mix %v (%d requests), want %v (230)", n, reqs, want)
	}
}

func TestParseNetTCP(t *testing.T) {
	in := `  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 12345 1 0000000000000000 100 0 0 10 0
   1: 0100007F:1F90 0100007F:D431 01 00000000:00000000 00:00000000 00000000  1000        0 23456 1 0000000000000000 20 4 30 10 -1
   2: 0100007F:D431 0100007F:1F90 01 00000000:00000000 00:00000000 00000000  1000        0 0 1
   3: garbage
`
	m := map[uint64]Socket{}
	ParseNetTCP([]byte(in), m)
	if len(m) != 2 {
		t.Fatalf("%d sockets, want 2: %v", len(m), m)
	}
	if s := m[23456]; s.LocalPort != 8080 || s.RemotePort != 0xD431 {
		t.Errorf("socket 23456: %+v", s)
	}
	if s := m[12345]; s.LocalPort != 8080 || s.RemotePort != 0 {
		t.Errorf("socket 12345: %+v", s)
	}
	if ino, ok := socketInode("socket:[23456]"); !ok || ino != 23456 {
		t.Errorf("socketInode = %d, %v", ino, ok)
	}
	if _, ok := socketInode("pipe:[1]"); ok {
		t.Error("a pipe read as a socket")
	}
}

func TestDescribeFDs(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	port := l.Addr().(*net.TCPAddr).Port
	got := DescribeFDs([]int{os.Getpid()})
	if len(got) != 1 || !strings.Contains(got[0], fmt.Sprintf("tcp LISTEN %d→0 ×1;", port)) {
		t.Errorf("DescribeFDs = %q, want this process's listener on %d", got, port)
	}
}

// TestExited: a child is not exited while it runs, and is once it is a
// zombie (killed, not yet reaped) and once reaped.
func TestExited(t *testing.T) {
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	if Exited(pid) {
		t.Fatalf("pid %d: exited while it runs", pid)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for !Exited(pid) { // a zombie: this process has not waited for it
		if time.Now().After(deadline) {
			t.Fatalf("pid %d: not exited 5 s after SIGKILL", pid)
		}
		time.Sleep(time.Millisecond)
	}
	if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); err != nil {
		t.Errorf("pid %d: reaped before Wait: %v", pid, err)
	}
	_ = cmd.Wait()
	if !Exited(pid) {
		t.Errorf("pid %d: not exited once reaped", pid)
	}
}

// A fixed rate (-rate) is used as given, with no probe of the gateway (the
// Env is never touched), and reported as fixed; a share of a probed
// maximum says both.
func TestLoadRateFixed(t *testing.T) {
	var out bytes.Buffer
	o := Options{Rate: 12000, Share: 0.7, Out: &out}
	rate, peak, err := loadRate(&o, nil)
	if err != nil || rate != 12000 || peak != 0 {
		t.Fatalf("loadRate with Rate 12000: %v, %v, %v; want 12000, 0, nil", rate, peak, err)
	}
	if got := o.of(peak); got != "fixed" {
		t.Errorf("of(0) = %q, want fixed", got)
	}
	if got := o.of(17143); got != "70 % of 17143" {
		t.Errorf("of(17143) = %q, want 70 %% of 17143", got)
	}
	if !strings.Contains(out.String(), "fixed rate 12000 req/s") {
		t.Errorf("log %q does not say the rate is fixed", out.String())
	}
}
