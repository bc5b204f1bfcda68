package shm

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"coregate/plugins"
)

var _ plugins.Metrics = (*Region)(nil)

func newMetrics(t *testing.T, regions, series int) *MetricsSegment {
	t.Helper()
	s, err := CreateMetrics(regions, series)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// sums reads every region of m and sums the values by series, as the
// supervisor's collector does.
func sums(m *MetricsMap) map[string]uint64 {
	out := map[string]uint64{}
	var buf []byte
	for i := range m.Regions() {
		buf = m.Each(i, buf, func(key []byte, v uint64) {
			name, labels, ok := SplitKey(key)
			if !ok {
				panic("bad key")
			}
			out[fmt.Sprint(name, labels)] += v
		})
	}
	return out
}

// TestSeriesRegistration: a series has one slot in its region, found again
// by its name and labels; other label values are other series; a reader
// sees every registered series with its value; a new writer of the region
// (a respawned worker) gets the same slots.
func TestSeriesRegistration(t *testing.T) {
	s := newMetrics(t, 2, 64)
	r, err := s.Region(1)
	if err != nil {
		t.Fatal(err)
	}
	a := r.Slot("apisix_http_status", "200", "r1", "")
	if a == nil || r.Slot("apisix_http_status", "200", "r1", "") != a {
		t.Fatal("a series did not keep its slot")
	}
	b := r.Slot("apisix_http_status", "404", "r1", "")
	c := r.Slot("apisix_http_status", "200", "r1x", "")
	// the same bytes, another split: another series
	d := r.Slot("apisix_http_status", "200", "r", "1")
	if b == a || c == a || d == a || c == d {
		t.Fatal("two series share a slot")
	}
	a.Add(3)
	b.Add(1)
	c.Add(7)
	long := string(make([]byte, 300))
	r.Slot("long", long).Add(2)
	want := map[string]uint64{
		fmt.Sprint("apisix_http_status", []string{"200", "r1", ""}):  3,
		fmt.Sprint("apisix_http_status", []string{"404", "r1", ""}):  1,
		fmt.Sprint("apisix_http_status", []string{"200", "r1x", ""}): 7,
		fmt.Sprint("apisix_http_status", []string{"200", "r", "1"}):  0,
		fmt.Sprint("long", []string{long}):                           2,
	}
	if diff := cmp.Diff(want, sums(s.MetricsMap)); diff != "" {
		t.Fatalf("sums (-want +got):\n%s", diff)
	}
	if n, dropped := s.Usage(1); n != 5 || dropped != 0 {
		t.Fatalf("usage %d series, %d dropped; want 5, 0", n, dropped)
	}
	if n, _ := s.Usage(0); n != 0 {
		t.Fatalf("region 0 has %d series", n)
	}
	r2, err := s.Region(1)
	if err != nil {
		t.Fatal(err)
	}
	if r2.Slot("apisix_http_status", "200", "r1", "") != a {
		t.Fatal("a new writer of the region did not find the series")
	}
	if _, err := s.Region(2); err == nil {
		t.Fatal("region 2 of 2")
	}
	r.Node().Requests.Add(5)
	if s.Node(1).Requests.Load() != 5 || s.Node(0).Requests.Load() != 0 || s.Node(2) != nil {
		t.Fatal("node counters not per region")
	}
}

// TestRegionFull: a full region refuses new series (nil) and counts each
// refusal, while its series keep counting; the other regions are not
// affected.
func TestRegionFull(t *testing.T) {
	s := newMetrics(t, 2, 4)
	r, _ := s.Region(0)
	var slots []*atomic.Uint64
	for i := range 4 {
		sl := r.Slot("m", strconv.Itoa(i))
		if sl == nil {
			t.Fatalf("series %d refused", i)
		}
		slots = append(slots, sl)
	}
	for i := range 3 {
		if r.Slot("m", "new", strconv.Itoa(i)) != nil {
			t.Fatal("a full region took a series")
		}
	}
	if r.Slot("m", "2") != slots[2] {
		t.Fatal("a full region lost a series")
	}
	if n, dropped := s.Usage(0); n != 4 || dropped != 3 {
		t.Fatalf("usage %d series, %d dropped; want 4, 3", n, dropped)
	}
	r1, _ := s.Region(1)
	if r1.Slot("m", "new") == nil {
		t.Fatal("region 1 full with region 0")
	}
	// The arena bounds keys too: a region of one series has 128 bytes of
	// key.
	s2 := newMetrics(t, 1, 1)
	r2, _ := s2.Region(0)
	if r2.Slot("m", string(make([]byte, 200))) != nil {
		t.Fatal("a key past the arena took a series")
	}
	if n, dropped := s2.Usage(0); n != 0 || dropped != 1 {
		t.Fatalf("usage %d series, %d dropped; want 0, 1", n, dropped)
	}
}

func TestOpenMetricsRefuses(t *testing.T) {
	f, err := os.CreateTemp(t.TempDir(), "zero")
	if err != nil {
		t.Fatal(err)
	}
	_ = f.Truncate(4096)
	if _, err := OpenMetrics(f); err == nil {
		t.Fatal("a file of zeros opened as a metrics segment")
	}
	_ = f.Close()
}

const metricsChildEnv = "SHM_TEST_METRICS_CHILD"

const (
	childSeries = 50
	childAdds   = 20000
)

// metricsChild writes region (its index / 2, so that two processes share
// each region, as a worker and its replacement do): it registers
// childSeries series, all processes the same, and adds to them.
func metricsChild(idx int) error {
	m, err := OpenMetrics(os.NewFile(3, "segment"))
	if err != nil {
		return err
	}
	r, err := m.Region(idx / 2)
	if err != nil {
		return err
	}
	var b [1]byte
	_, _ = os.NewFile(4, "start").Read(b[:]) // EOF: go
	for i := range childAdds {
		k := i % childSeries
		sl := r.Slot("apisix_http_status", strconv.Itoa(200+k), "route")
		if sl == nil {
			return fmt.Errorf("series %d refused", k)
		}
		sl.Add(1)
		r.Node().Requests.Add(1)
	}
	return nil
}

// TestMetricsProcesses: four processes, two per region, register the same
// series at once and count: the sums over regions are exact, and a
// process killed afterwards loses nothing it counted.
func TestMetricsProcesses(t *testing.T) {
	const procs = 4
	s := newMetrics(t, 2, 4*childSeries)
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	var cmds []*exec.Cmd
	for i := range procs {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), metricsChildEnv+"="+strconv.Itoa(i))
		cmd.ExtraFiles = []*os.File{s.File(), r}
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds = append(cmds, cmd)
	}
	_ = r.Close()
	_ = w.Close()
	done := make(chan error, procs)
	for _, cmd := range cmds {
		go func() { done <- cmd.Wait() }()
	}
	deadline := time.After(2 * time.Minute)
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
			t.Fatal("children still running after 2 minutes")
		}
	}
	got := sums(s.MetricsMap)
	if len(got) != childSeries {
		t.Fatalf("%d series, want %d", len(got), childSeries)
	}
	for k := range childSeries {
		key := fmt.Sprint("apisix_http_status", []string{strconv.Itoa(200 + k), "route"})
		if got[key] != procs*childAdds/childSeries {
			t.Errorf("%s: %d, want %d", key, got[key], procs*childAdds/childSeries)
		}
	}
	var req uint64
	for i := range s.Regions() {
		req += s.Node(i).Requests.Load()
		if _, dropped := s.Usage(i); dropped != 0 {
			t.Errorf("region %d dropped %d series", i, dropped)
		}
	}
	if req != procs*childAdds {
		t.Fatalf("requests %d, want %d", req, procs*childAdds)
	}
}
