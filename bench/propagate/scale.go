package propagate

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"coregate/bench/harness"
	"coregate/bench/procstat"
)

// Footprint is the memory of the gateway's processes at one moment.
type Footprint struct {
	Supervisor uint64   // the supervisor's VmRSS, KiB (embedded etcd and the Admin API included)
	Workers    []uint64 // each worker's VmRSS, KiB
	// HeapInuse is each worker's Go heap in use right after a collection
	// (runtime.MemStats.HeapInuse from its net/http/pprof heap profile,
	// asked with gc=1), bytes; 0 where it could not be read.
	HeapInuse []uint64
}

// WorkerRSS is the workers' mean VmRSS, KiB.
func (f Footprint) WorkerRSS() float64 { return mean(f.Workers) }

// WorkerHeap is the workers' mean Go heap in use, bytes.
func (f Footprint) WorkerHeap() float64 { return mean(f.HeapInuse) }

func mean(v []uint64) float64 {
	if len(v) == 0 {
		return 0
	}
	var s uint64
	for _, x := range v {
		s += x
	}
	return float64(s) / float64(len(v))
}

// SettleAfter is how long after the last change Memory.Settled is first read:
// past the second of quiet (5 s, node/workerproc's releaseQuiet) after
// which a worker hands the heap its builds left unused back to the system.
// A second after the load, a worker's RSS still holds that heap: at
// 50 000 routes, 3 337 bytes a route against about 2 380 once released.
// The settled figure is the one a gateway serving an unchanging
// configuration shows, and the one the target names.
const SettleAfter = 6 * time.Second

// settleReads is how many times, a second apart from SettleAfter on, the
// settled footprint is read: a worker slower to build the last change
// than the one that served it first starts its quiet period later, by
// seconds on a loaded machine.
const settleReads = 5

// settled reads the footprint settleReads times, a second apart, from
// SettleAfter after served, and keeps each worker's least RSS with its
// heap of that reading, and the supervisor's least RSS: each worker
// once it has handed its unused heap back.
func (e *env) settled(ctx context.Context, served time.Time) (Footprint, error) {
	var f Footprint
	for i := range settleReads {
		time.Sleep(time.Until(served.Add(SettleAfter + time.Duration(i)*time.Second)))
		g, err := e.footprint(ctx)
		if err != nil {
			return f, err
		}
		f = lowest(f, g)
	}
	return f, nil
}

// lowest is, worker by worker, the reading of f or g with the lesser RSS
// (g's where f has none), and the lesser of their supervisor's RSS.
func lowest(f, g Footprint) Footprint {
	if len(f.Workers) != len(g.Workers) {
		return g
	}
	out := Footprint{Supervisor: min(f.Supervisor, g.Supervisor)}
	for i := range g.Workers {
		from := g
		if f.Workers[i] <= g.Workers[i] {
			from = f
		}
		out.Workers = append(out.Workers, from.Workers[i])
		if i < len(from.HeapInuse) {
			out.HeapInuse = append(out.HeapInuse, from.HeapInuse[i])
		}
	}
	return out
}

// Memory is the gateway's memory with no route and with the base routes
// (and the upstreams) loaded: a second after they are served (Loaded),
// and settled, each worker's least over settleReads readings a second
// apart from SettleAfter after it on (Settled; zero when not read).
type Memory struct {
	Routes, Upstreams int
	Empty, Loaded     Footprint
	Settled           Footprint
}

// PerRoute returns what a route adds, in bytes, beyond the gateway with
// none, a second after the load: to a worker's RSS (mean over the
// workers), to a worker's Go heap in use (0 when not read), and to the
// supervisor's RSS.
func (m *Memory) PerRoute() (workerRSS, workerHeap, supervisorRSS float64) {
	return m.perRoute(m.Loaded)
}

// SettledPerRoute is PerRoute of the settled figures; all 0 when they
// were not read.
func (m *Memory) SettledPerRoute() (workerRSS, workerHeap, supervisorRSS float64) {
	if len(m.Settled.Workers) == 0 {
		return 0, 0, 0
	}
	return m.perRoute(m.Settled)
}

func (m *Memory) perRoute(loaded Footprint) (workerRSS, workerHeap, supervisorRSS float64) {
	if m.Routes == 0 {
		return 0, 0, 0
	}
	n := float64(m.Routes)
	workerRSS = (loaded.WorkerRSS() - m.Empty.WorkerRSS()) * 1024 / n
	if loaded.WorkerHeap() > 0 && m.Empty.WorkerHeap() > 0 {
		workerHeap = (loaded.WorkerHeap() - m.Empty.WorkerHeap()) / n
	}
	supervisorRSS = (float64(loaded.Supervisor) - float64(m.Empty.Supervisor)) * 1024 / n
	return workerRSS, workerHeap, supervisorRSS
}

// footprint reads the supervisor's and each worker's VmRSS, then each
// worker's Go heap in use after a collection when the workers serve
// net/http/pprof (worker i on the pprof port + i).
func (e *env) footprint(ctx context.Context) (Footprint, error) {
	var f Footprint
	pid := e.gw.PID()
	rss, err := procstat.ReadRSS(pid)
	if err != nil {
		return f, err
	}
	f.Supervisor = rss
	workers := e.workerPIDs()
	for _, w := range workers {
		rss, err := procstat.ReadRSS(w)
		if err != nil {
			return f, err
		}
		f.Workers = append(f.Workers, rss)
	}
	if e.pprof == "" {
		return f, nil
	}
	host, port, _ := strings.Cut(e.pprof, ":")
	p0, _ := strconv.Atoi(port)
	for i := range workers {
		h, err := heapInuse(ctx, host+":"+strconv.Itoa(p0+i))
		if err != nil {
			e.logf("worker %d's heap: %v", i, err)
		}
		f.HeapInuse = append(f.HeapInuse, h)
	}
	return f, nil
}

// workerPIDs are the gateway's processes other than the supervisor, in
// the order they were started.
func (e *env) workerPIDs() []int {
	pid := e.gw.PID()
	var out []int
	for _, p := range e.gw.PIDs() {
		if p != pid {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return out
}

// heapInuse asks the net/http/pprof server at addr for its heap profile
// after a collection and returns the HeapInuse it reports.
func heapInuse(ctx context.Context, addr string) (uint64, error) {
	body, err := pprofGet(ctx, "http://"+addr+"/debug/pprof/heap?debug=1&gc=1", "heap profile", 30*time.Second)
	if err != nil {
		return 0, err
	}
	defer body.Close()
	return parseHeapInuse(body)
}

// heapProfile writes worker 0's heap profile, after a collection, to
// file.
func (e *env) heapProfile(ctx context.Context, file string) error {
	body, err := pprofGet(ctx, "http://"+e.pprof+"/debug/pprof/heap?gc=1", "heap profile", 30*time.Second)
	if err != nil {
		return err
	}
	defer body.Close()
	return writeFile(file, body)
}

// pprofGet asks a net/http/pprof server for url, within timeout (0: as
// long as ctx lets it), and returns the body of its 200 answer, for the
// caller to close; an error names what was asked.
func pprofGet(ctx context.Context, url, what string, timeout time.Duration) (io.ReadCloser, error) {
	req, err := http.NewRequestWithContext(ctx, "GET", url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := (&http.Client{Timeout: timeout}).Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != 200 {
		resp.Body.Close()
		return nil, fmt.Errorf("propagate: %s: %s", what, resp.Status)
	}
	return resp.Body, nil
}

// writeFile writes what r reads to file, created or truncated.
func writeFile(file string, r io.Reader) error {
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, r); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// parseHeapInuse reads the "# HeapInuse = N" line of a debug=1 heap
// profile.
func parseHeapInuse(r io.Reader) (uint64, error) {
	s := bufio.NewScanner(r)
	s.Buffer(make([]byte, 64<<10), 1<<20)
	for s.Scan() {
		if v, ok := strings.CutPrefix(s.Text(), "# HeapInuse = "); ok {
			return strconv.ParseUint(strings.TrimSpace(v), 10, 64)
		}
	}
	if err := s.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("propagate: no HeapInuse in the heap profile")
}

// waitProxy waits until the gateway's proxy answers (any status) on a
// path no route has.
func (e *env) waitProxy(ctx context.Context, timeout time.Duration) error {
	p := &prober{addr: e.gwAddr}
	defer p.reset()
	deadline := time.Now().Add(timeout)
	for {
		if _, err := p.get("/no-route"); err == nil {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil || e.gw.Exited() {
			return fmt.Errorf("propagate: the proxy does not answer after %v:\n%s", timeout, e.gw.Tail(20))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// ColdStart is the gateway's start on the data of the run: stopped, then
// started again on the same embedded etcd data directory.
type ColdStart struct {
	Routes int           // routes in etcd
	First  time.Duration // process start to the first request proxied on a route
	All    time.Duration // process start to every sampled route proxied
	// Sampled is the number of routes polled for All, spread over every
	// kind put (base, changes, bulk loads), the last of each included.
	Sampled int
	// CPU is what the supervisor and the workers spent from their start
	// until the first request was proxied.
	SupervisorCPU, WorkersCPU time.Duration
}

// routeSet is routes put on /<prefix>/<i>, i < n.
type routeSet struct {
	prefix string
	n      int
}

// sample returns about k paths spread over the sets, in proportion to
// their sizes, the last route of each included.
func sample(sets []routeSet, k int) []string {
	total := 0
	for _, s := range sets {
		total += s.n
	}
	var out []string
	for _, s := range sets {
		if s.n == 0 {
			continue
		}
		m := max(1, k*s.n/max(1, total))
		for j := range m {
			out = append(out, "/"+s.prefix+"/"+strconv.Itoa(j*s.n/m))
		}
		if last := "/" + s.prefix + "/" + strconv.Itoa(s.n-1); out[len(out)-1] != last {
			out = append(out, last)
		}
	}
	return out
}

// coldStart stops the gateway, starts it again on the same configuration
// and etcd data, and times the first request proxied on a route and the
// sampled routes all proxied.
func (e *env) coldStart(ctx context.Context, sets []routeSet, timeout time.Duration) (*ColdStart, error) {
	paths := sample(sets, 200)
	c := &ColdStart{Sampled: len(paths)}
	for _, s := range sets {
		c.Routes += s.n
	}
	e.gw.Stop(30 * time.Second)
	start := time.Now()
	if err := e.startGateway("coregate-restart.log"); err != nil {
		return nil, err
	}
	p := &prober{addr: e.gwAddr}
	defer p.reset()
	deadline := start.Add(timeout)
	for i, path := range paths {
		for {
			st, err := p.get(path)
			if err == nil && st == 200 {
				break
			}
			if time.Now().After(deadline) || ctx.Err() != nil || e.gw.Exited() {
				return nil, fmt.Errorf("propagate: cold start: %s not proxied %v after the start (status %d, %v):\n%s",
					path, timeout, st, err, e.gw.Tail(20))
			}
			if err != nil {
				time.Sleep(time.Millisecond) // not listening yet
			}
		}
		if i == 0 {
			c.First = time.Since(start)
			c.SupervisorCPU, c.WorkersCPU = e.cpu()
		}
	}
	c.All = time.Since(start)
	return c, nil
}

// NginxReload is nginx with as many locations (`location =` blocks) and
// upstreams (`upstream` blocks) as the gateway has routes and upstreams:
// its start, and a reload (SIGHUP to its master) after one location is
// added.
type NginxReload struct {
	Locations, Upstreams int
	Start                time.Duration // process start to a location answering
	StartCPU             time.Duration // the master's and the workers' CPU meanwhile
	RSSStarted           uint64        // the master's and the workers' VmRSS once started, KiB
	MasterRSS            uint64        // the master's VmRSS once started, KiB
	Reload               time.Duration // SIGHUP to the new location answering
	// ReloadCPU is the master's CPU over the reload and the new workers'
	// until the new location answered.
	ReloadCPU time.Duration
	RSSAfter  uint64 // the master's and the new workers' VmRSS once the old workers left, KiB
}

// nginxLocations is the nginx.conf of NginxReload: n locations /base/<i>
// (and /reload/0 with extra), each proxied to one of ups upstream blocks
// in turn (its own when ups is 0), every upstream the benchmark's.
func nginxLocations(dir string, port, workers, n, ups int, upAddr string, extra bool) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, `worker_processes %d;
daemon off;
master_process on;
pid %[2]s/nginx.pid;
error_log %[2]s/error.log warn;
events {
    worker_connections 1024;
}
http {
    access_log off;
    client_body_temp_path %[2]s/body;
    proxy_temp_path %[2]s/proxy;
    fastcgi_temp_path %[2]s/fastcgi;
    uwsgi_temp_path %[2]s/uwsgi;
    scgi_temp_path %[2]s/scgi;
`, workers, dir)
	nu := ups
	if nu <= 0 {
		nu = n + 1
	}
	for i := range nu {
		fmt.Fprintf(&b, "    upstream u%d {\n        server %s;\n    }\n", i, upAddr)
	}
	fmt.Fprintf(&b, "    server {\n        listen 127.0.0.1:%d;\n", port)
	loc := func(path string, i int) {
		fmt.Fprintf(&b, "        location = %s {\n            proxy_pass http://u%d;\n        }\n", path, i%nu)
	}
	for i := range n {
		loc("/base/"+strconv.Itoa(i), i)
	}
	if extra {
		loc("/reload/0", n)
	}
	b.WriteString("    }\n}\n")
	return []byte(b.String())
}

// rssOf sums the VmRSS of pids, KiB; those gone are left out.
func rssOf(pids []int) uint64 {
	var s uint64
	for _, p := range pids {
		if r, err := procstat.ReadRSS(p); err == nil {
			s += r
		}
	}
	return s
}

func ticks(pids []int) time.Duration {
	return time.Duration(procstat.Measure(pids).Ticks) * (time.Second / procstat.Hz)
}

// nginxReload starts nginx with BaseRoutes locations over Upstreams
// upstreams (nginxLocations), times its start, adds a location, sends its
// master SIGHUP and times the reload; each step bounded by timeout. It
// stops nginx before returning.
func (e *env) nginxReload(ctx context.Context, timeout time.Duration) (*NginxReload, error) {
	r := &NginxReload{Locations: e.o.BaseRoutes, Upstreams: e.o.Upstreams}
	if r.Upstreams <= 0 {
		r.Upstreams = r.Locations + 1
	}
	port, err := harness.FreePort()
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(e.o.Dir, "nginx-reload")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	conf := filepath.Join(dir, "nginx.conf")
	write := func(extra bool) error {
		return os.WriteFile(conf, nginxLocations(dir, port, e.o.Workers, e.o.BaseRoutes, e.o.Upstreams, e.upAddr, extra), 0o644)
	}
	if err := write(false); err != nil {
		return nil, err
	}
	start := time.Now()
	ng, _, err := harness.Start("nginx", e.o.CPUs, nil, filepath.Join(dir, "nginx.log"), false,
		e.o.Nginx, "-p", dir+"/", "-c", conf, "-e", filepath.Join(dir, "error.log"))
	if err != nil {
		return nil, err
	}
	defer ng.Stop(30 * time.Second)
	addr := "127.0.0.1:" + strconv.Itoa(port)
	wait := func(path string, from time.Time) error {
		p := &prober{addr: addr}
		defer p.reset()
		for {
			st, err := p.get(path)
			if err == nil && st == 200 {
				return nil
			}
			if time.Since(from) > timeout || ctx.Err() != nil || ng.Exited() {
				return fmt.Errorf("propagate: nginx at %d locations: %s not answered %v after the start of the step (status %d, %v):\n%s",
					r.Locations, path, timeout, st, err, ng.Tail(10))
			}
			time.Sleep(time.Millisecond)
		}
	}
	if err := wait("/base/"+strconv.Itoa(max(0, r.Locations-1)), start); err != nil {
		return nil, err
	}
	r.Start = time.Since(start)
	old := ng.PIDs()
	r.StartCPU = ticks(old)
	r.RSSStarted, r.MasterRSS = rssOf(old), rssOf(old[:1])
	if err := write(true); err != nil {
		return nil, err
	}
	master := ng.PID()
	cpu0 := ticks([]int{master})
	start = time.Now()
	if err := syscall.Kill(master, syscall.SIGHUP); err != nil {
		return nil, err
	}
	if err := wait("/reload/0", start); err != nil {
		return nil, err
	}
	r.Reload = time.Since(start)
	var fresh []int
	for _, p := range ng.PIDs()[1:] {
		if !slices.Contains(old, p) {
			fresh = append(fresh, p)
		}
	}
	r.ReloadCPU = ticks([]int{master}) - cpu0 + ticks(fresh)
	// the old workers leave once their connections are closed
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		gone := true
		for _, p := range old[1:] {
			if st, err := procstat.ReadStat(p); err == nil && st.State != 'Z' {
				gone = false
			}
		}
		if gone {
			break
		}
	}
	r.RSSAfter = rssOf(ng.PIDs())
	return r, nil
}

// reportScale writes the rows of Memory, ColdStart and NginxReload that r
// has.
func reportScale(w io.Writer, r *Result) {
	ms := func(d time.Duration) string { return strconv.FormatFloat(float64(d)/1e6, 'f', 1, 64) + " ms" }
	mib := func(kib float64) string { return strconv.FormatFloat(kib/1024, 'f', 1, 64) + " MiB" }
	if m := r.Memory; m != nil {
		wr, wh, sr := m.PerRoute()
		swr, swh, _ := m.SettledPerRoute()
		// The target is the issue's, at 50 000 routes: below a few
		// thousand, the runtime's fixed costs weigh on each route. It
		// is judged on the settled RSS where it was read, what a
		// gateway shows once its configuration stops changing.
		verdict := func(b float64) string {
			if m.Routes < 50000 {
				return ""
			}
			if b > 2048 {
				return " (≤ 2 KiB: over the target)"
			}
			return " (≤ 2 KiB: ok)"
		}
		settled := len(m.Settled.Workers) > 0
		fmt.Fprintf(w, "| memory, %d routes over %d upstreams | no route | loaded | per route |\n|---|---:|---:|---:|\n", m.Routes, m.Upstreams)
		v := verdict(wr)
		if settled {
			v = ""
		}
		fmt.Fprintf(w, "| worker RSS (mean of %d), 1 s after the load | %s | %s | %.0f B%s |\n", len(m.Loaded.Workers),
			mib(m.Empty.WorkerRSS()), mib(m.Loaded.WorkerRSS()), wr, v)
		if settled {
			fmt.Fprintf(w, "| worker RSS (mean of %d), settled: least of %v to %v after the load, unused heap released | %s | %s | %.0f B%s |\n",
				len(m.Settled.Workers), SettleAfter, SettleAfter+(settleReads-1)*time.Second, mib(m.Empty.WorkerRSS()), mib(m.Settled.WorkerRSS()), swr, verdict(swr))
		}
		if wh > 0 {
			fmt.Fprintf(w, "| worker Go heap in use after a GC, 1 s after the load | %s | %s | %.0f B |\n",
				mib(m.Empty.WorkerHeap()/1024), mib(m.Loaded.WorkerHeap()/1024), wh)
		}
		if swh > 0 {
			fmt.Fprintf(w, "| worker Go heap in use after a GC, settled | %s | %s | %.0f B |\n",
				mib(m.Empty.WorkerHeap()/1024), mib(m.Settled.WorkerHeap()/1024), swh)
		}
		fmt.Fprintf(w, "| supervisor RSS (embedded etcd included) | %s | %s | %.0f B |\n\n",
			mib(float64(m.Empty.Supervisor)), mib(float64(m.Loaded.Supervisor)), sr)
	}
	if c := r.ColdStart; c != nil {
		verdict := "ok"
		if c.First > 3*time.Second {
			verdict = "over the 3 s target"
		}
		fmt.Fprintf(w, "| cold start on %d routes in etcd | |\n|---|---:|\n", c.Routes)
		fmt.Fprintf(w, "| process start to the first request proxied | %s (≤ 3 s: %s) |\n", ms(c.First), verdict)
		fmt.Fprintf(w, "| process start to %d sampled routes proxied | %s |\n", c.Sampled, ms(c.All))
		fmt.Fprintf(w, "| CPU until the first request: supervisor / workers | %s / %s |\n\n", ms(c.SupervisorCPU), ms(c.WorkersCPU))
	}
	if n := r.NginxReload; n != nil {
		fmt.Fprintf(w, "| nginx, %d locations over %d upstreams | time | CPU | RSS, master and workers |\n|---|---:|---:|---:|\n", n.Locations, n.Upstreams)
		fmt.Fprintf(w, "| start to a location answering | %s | %s | %s (master %s) |\n", ms(n.Start), ms(n.StartCPU),
			mib(float64(n.RSSStarted)), mib(float64(n.MasterRSS)))
		fmt.Fprintf(w, "| reload (SIGHUP) with one location more, to it answering | %s | %s | %s |\n\n", ms(n.Reload), ms(n.ReloadCPU),
			mib(float64(n.RSSAfter)))
	}
}
