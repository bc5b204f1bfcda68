package propagate

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/pprof"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestSample: the cold start's sampled routes are spread over every set
// in proportion to its size, each set's last route included.
func TestSample(t *testing.T) {
	got := sample([]routeSet{{"base", 100}, {"chg", 3}, {"bulk", 0}, {"again", 10}}, 10)
	want := []string{
		"/base/0", "/base/12", "/base/25", "/base/37", "/base/50", "/base/62", "/base/75", "/base/87", "/base/99", // 10×100/113 and the last
		"/chg/0", "/chg/2",
		"/again/0", "/again/9",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("sample (-want +got):\n%s", diff)
	}
}

func TestParseHeapInuse(t *testing.T) {
	prof := "heap profile: 1: 2 [3: 4] @ heap/1048576\n\n# runtime.MemStats\n# Alloc = 100\n# HeapAlloc = 100\n# HeapInuse = 876544\n# HeapIdle = 5\n"
	got, err := parseHeapInuse(strings.NewReader(prof))
	if err != nil || got != 876544 {
		t.Errorf("HeapInuse %d, %v; want 876544", got, err)
	}
	if _, err := parseHeapInuse(strings.NewReader("heap profile: 0\n")); err == nil {
		t.Error("a profile without HeapInuse: no error")
	}
}

// TestPerRoute: what a route adds beyond the gateway with none, the
// workers' mean, in bytes.
func TestPerRoute(t *testing.T) {
	m := &Memory{Routes: 1000,
		Empty:  Footprint{Supervisor: 40000, Workers: []uint64{30000, 32000}, HeapInuse: []uint64{4 << 20, 4 << 20}},
		Loaded: Footprint{Supervisor: 42000, Workers: []uint64{32000, 34000}, HeapInuse: []uint64{5 << 20, 5 << 20}},
	}
	wr, wh, sr := m.PerRoute()
	if wr != 2048 || wh != 1048.576 || sr != 2048 {
		t.Errorf("per route: worker RSS %v, heap %v, supervisor %v; want 2048, 1048.576, 2048", wr, wh, sr)
	}
	if wr, wh, sr := m.SettledPerRoute(); wr != 0 || wh != 0 || sr != 0 {
		t.Errorf("settled per route %v, %v, %v before it was read; want 0", wr, wh, sr)
	}
	m.Settled = Footprint{Supervisor: 42000, Workers: []uint64{31000, 33000}, HeapInuse: []uint64{5 << 20, 5 << 20}}
	if wr, wh, _ := m.SettledPerRoute(); wr != 1024 || wh != 1048.576 {
		t.Errorf("settled per route: worker RSS %v, heap %v; want 1024, 1048.576", wr, wh)
	}
	m.Empty.HeapInuse = []uint64{0, 0}
	if _, wh, _ := m.PerRoute(); wh != 0 {
		t.Errorf("heap per route %v without the empty worker's heap, want 0", wh)
	}
}

// TestReportSettled: at 50 000 routes the target is judged on the settled
// RSS where it was read, the reading a second after the load still
// shown; without a settled reading, on that one.
func TestReportSettled(t *testing.T) {
	m := &Memory{Routes: 50000,
		Empty:   Footprint{Supervisor: 40000, Workers: []uint64{30000}},
		Loaded:  Footprint{Supervisor: 200000, Workers: []uint64{30000 + 3000*50000/1024}},
		Settled: Footprint{Supervisor: 200000, Workers: []uint64{30000 + 1900*50000/1024}},
	}
	var b strings.Builder
	reportScale(&b, &Result{Memory: m})
	out := b.String()
	loaded, settled := rowOf(out, "1 s after the load"), rowOf(out, "settled")
	if loaded == "" || settled == "" {
		t.Fatalf("want both RSS rows:\n%s", out)
	}
	if strings.Contains(loaded, "target") || !strings.Contains(settled, "≤ 2 KiB: ok") {
		t.Errorf("the verdict is not the settled row's alone:\n%s", out)
	}
	m.Settled = Footprint{}
	b.Reset()
	reportScale(&b, &Result{Memory: m})
	if out := b.String(); rowOf(out, "settled") != "" || !strings.Contains(rowOf(out, "1 s after the load"), "over the target") {
		t.Errorf("without a settled reading:\n%s", out)
	}
}

// TestLowest: each worker's settled reading is its least RSS with the
// heap read beside it; the first reading is taken whole.
func TestLowest(t *testing.T) {
	a := Footprint{Supervisor: 500, Workers: []uint64{100, 90}, HeapInuse: []uint64{10, 9}}
	b := Footprint{Supervisor: 400, Workers: []uint64{80, 95}, HeapInuse: []uint64{8, 11}}
	got := lowest(lowest(Footprint{}, a), b)
	want := Footprint{Supervisor: 400, Workers: []uint64{80, 90}, HeapInuse: []uint64{8, 9}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("lowest (-want +got):\n%s", diff)
	}
}

// rowOf is the first line of out that has s.
func rowOf(out, s string) string {
	for l := range strings.Lines(out) {
		if strings.Contains(l, s) {
			return l
		}
	}
	return ""
}

// TestNginxReload starts nginx with 30 locations over 7 upstreams (the
// harness's upstream a local server), then reloads it with one location
// more: the new location answers, and the figures are read.
func TestNginxReload(t *testing.T) {
	bin, err := exec.LookPath("nginx")
	if err != nil {
		if _, err := os.Stat("/usr/sbin/nginx"); err != nil {
			t.Skip("no nginx")
		}
		bin = "/usr/sbin/nginx"
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	paths := make(chan string, 100)
	up := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		select {
		case paths <- r.URL.Path:
		default:
		}
	}), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = up.Serve(ln) }()
	defer up.Close()
	e := &env{o: defaults(Options{Nginx: bin, BaseRoutes: 30, Upstreams: 7, Dir: t.TempDir()}), upAddr: ln.Addr().String()}
	r, err := e.nginxReload(context.Background(), 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if r.Locations != 30 || r.Upstreams != 7 {
		t.Errorf("%d locations over %d upstreams, want 30 over 7", r.Locations, r.Upstreams)
	}
	if r.Start <= 0 || r.Reload <= 0 || r.RSSStarted == 0 || r.MasterRSS == 0 || r.RSSAfter == 0 || r.MasterRSS >= r.RSSStarted {
		t.Errorf("figures not read: %+v", r)
	}
	seen := map[string]bool{}
	for len(paths) > 0 {
		seen[<-paths] = true
	}
	if !seen["/base/29"] || !seen["/reload/0"] {
		t.Errorf("upstream saw %v, want /base/29 and /reload/0 proxied", seen)
	}
}

// TestPprofFetch: heapInuse and heapProfile read a real net/http/pprof
// server's heap profile (the HeapInuse of this process, a profile file
// that says what it is); a path it does not serve is an error that names
// what was asked.
func TestPprofFetch(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	srv := httptest.NewServer(mux)
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")
	ctx := context.Background()
	if inuse, err := heapInuse(ctx, addr); err != nil || inuse == 0 {
		t.Fatalf("heapInuse: %d, %v", inuse, err)
	}
	file := filepath.Join(t.TempDir(), "heap.pb.gz")
	if err := (&env{pprof: addr}).heapProfile(ctx, file); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(file); err != nil || len(b) < 2 || b[0] != 0x1f || b[1] != 0x8b {
		t.Fatalf("heap profile file: %d bytes, %v; want a gzipped profile", len(b), err)
	}
	if _, err := pprofGet(ctx, srv.URL+"/nothing", "nothing here", 0); err == nil || !strings.Contains(err.Error(), "nothing here: 404") {
		t.Fatalf("a path not served: %v", err)
	}
}
