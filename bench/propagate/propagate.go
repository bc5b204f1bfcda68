// Package propagate measures how a configuration change made through the
// Admin API reaches the traffic: the time from a PUT of a new route to the
// first request proxied on it, and the effect on steady traffic of a bulk
// load of thousands of routes. It drives a real gateway on embedded etcd
// (bin/coregate with a config.yaml it writes), an upstream, and the bench
// load generator at a fixed rate.
//
// The bulk load's steady traffic is measured beside four references in
// the same run, with the same rate, connections and paths: the gateway
// with no change, nginx with no change and nginx while the gateway takes a
// second bulk load (when an nginx binary is given), and the upstream
// alone; those with no change run as long as the bulk load's traffic. On a
// small, shared machine the tail of the load generator, the upstream and
// the scheduler is already milliseconds long; the references say how
// much of the bulk load's tail is the gateway's.
//
// The configuration's size has rows of its own: the supervisor's and the
// workers' memory with no route and with the routes loaded (Memory), the
// gateway stopped and started again on the same etcd data (ColdStart),
// and nginx with as many locations started and reloaded (NginxReload).
package propagate

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"coregate/bench/harness"
	"coregate/bench/hdr"
	"coregate/bench/load"
	"coregate/bench/procstat"
	"coregate/bench/scenario"
)

// AdminKey is the admin key the gateway is configured with: APISIX's
// documented key, which coregate accepts on a loopback Admin API.
const AdminKey = "edd1c9f034335f136f87ad84b625c8f1"

// Options of one measurement.
type Options struct {
	Coregate   string        // the gateway binary
	Self       string        // this program, run as "Self upstream" for the upstream; "" serves it in this process
	Workers    int           // worker processes; default 1
	CPUs       []int         // CPUs of the gateway; none: not pinned
	BaseRoutes int           // routes put before measuring, served during the bulk load; default 100
	Changes    int           // PUTs timed one by one; default 100
	Bulk       int           // routes of the bulk load; default 5000; 0 skips it
	Rate       float64       // steady traffic during the bulk load, req/s; default 2000
	Conns      int           // connections of the steady traffic; default 8
	Parallel   int           // concurrent PUTs of the bulk load; default 8
	Slow       time.Duration // a request slower than this counts as slow; default 10 ms
	Nginx      string        // nginx binary for the reference without the gateway; "" leaves it out
	Dir        string        // working directory (config, etcd data, logs)
	Log        io.Writer     // progress; nil for none
	// Trace, when set, is a file for worker 0's execution trace (Go's
	// runtime/trace, through its COREGATE_PPROF server) of the bulk
	// load's steady traffic: TraceFor long (default 15 s), from the start
	// of the traffic, 1 s before the first PUT. For go tool trace.
	Trace    string
	TraceFor time.Duration
	// AccessLog turns on the gateway's access log, Dir/access.log, with
	// each request's times (AccessLogFormat): which side a slow request
	// waited on.
	AccessLog bool
	// Upstreams, when set, are put before the routes, each route (base,
	// changed and bulk) referring to one of them by upstream_id in turn
	// instead of having an upstream of its own; Plugins gives every
	// route two plugins (proxy-rewrite and response-rewrite, each
	// setting a header): the configuration of a large gateway.
	Upstreams int
	Plugins   bool
	// Memory reads the supervisor's and the workers' RSS (and the
	// workers' Go heap, through COREGATE_PPROF) with no route, and twice
	// with the upstreams and the base routes loaded: a second after they
	// are served, and settled, SettleAfter after it (Result.Memory).
	Memory bool
	// ColdStart, at the end, stops the gateway and starts it again on the
	// same etcd data (Result.ColdStart); NginxReload then starts nginx
	// with BaseRoutes locations over Upstreams upstreams and reloads it
	// with one location more (Result.NginxReload; Nginx must be set).
	// Each step of both is bounded by StepTimeout (default 120 s).
	ColdStart, NginxReload bool
	StepTimeout            time.Duration
	// Heap, when set with Memory, is a file for worker 0's heap profile
	// (go tool pprof) taken with the loaded figures.
	Heap string
}

// AccessLogFormat is the access log of Options.AccessLog: when the
// response was sent, the request's time in the gateway, the upstream's
// connect and response times, the path and the status.
const AccessLogFormat = "$msec $request_time $upstream_connect_time $upstream_response_time $uri $status"

// Change is one timed PUT.
type Change struct {
	Put     time.Duration // the Admin API's answer
	Proxied time.Duration // from sending the PUT to the first 200 proxied on the new route
}

// Traffic is one phase of steady traffic as the load generator saw it;
// latency counts from when each request was due.
type Traffic struct {
	Name                string
	Time                time.Duration
	Requests            uint64
	Non2xx              uint64 // answers other than 2xx (in the bulk load: a 404 for a route that existed)
	Errors              uint64
	Slow                uint64 // responses slower than Options.Slow
	P50, P99, P999, Max time.Duration
	// SlowDue are when the slow responses' requests were due, in order
	// (at most load.MaxSlow per load generator).
	SlowDue []time.Time
}

// Bulk is the outcome of the bulk load.
type Bulk struct {
	Routes int
	Put    time.Duration // all PUTs answered
	Live   time.Duration // from the first PUT until the last route proxies
	// Traffic is the steady traffic during the load, and 1 s either side;
	// References are the same traffic for as long without the load: the
	// gateway, nginx (when given) and the upstream alone, in that order.
	Traffic    Traffic
	References []Traffic
	// CPU time during the load (from its first PUT until the last route
	// proxies): the supervisor (Admin API, embedded etcd, watch and
	// encoding) and the workers (traffic and snapshot builds).
	SupervisorCPU, WorkersCPU time.Duration
	// Start is the first PUT. Reloads are the configurations pushed
	// meanwhile, from the supervisor's log: each from its push to the
	// last worker's answer, which spans the workers' builds.
	Start   time.Time
	Reloads []Window
}

// Window is a span of time.
type Window struct{ From, To time.Time }

// SlowTimeline sorts the bulk load's slow requests by when they were due:
// during the PUTs, after them until the last route was proxied, and
// before the first PUT or after the last route; and counts those whose
// wait overlaps a reload in its first slow (the part that made it slow).
// covered is the share of the time from the first PUT to the last route
// that reloads span.
func (b *Bulk) SlowTimeline(slow time.Duration) (before, puts, building, after, inReload int, covered float64) {
	put, live := b.Start.Add(b.Put), b.Start.Add(b.Live)
	for _, d := range b.Traffic.SlowDue {
		switch {
		case d.Before(b.Start):
			before++
		case d.Before(put):
			puts++
		case d.Before(live):
			building++
		default:
			after++
		}
		end := d.Add(slow)
		for _, r := range b.Reloads {
			if r.From.Before(end) && d.Before(r.To) {
				inReload++
				break
			}
		}
	}
	var span time.Duration
	for _, r := range b.Reloads {
		from, to := maxTime(r.From, b.Start), minTime(r.To, live)
		if to.After(from) {
			span += to.Sub(from)
		}
	}
	if b.Live > 0 {
		covered = float64(span) / float64(b.Live)
	}
	return
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// reloadLine is the supervisor's log line for an applied configuration.
var reloadLine = regexp.MustCompile(`time=(\S+) level=INFO msg="config reloaded" proc=supervisor .*took=(\S+) `)

// parseReloads returns the reloads the supervisor logged, each from its
// push to its end (the log's times are to the millisecond).
func parseReloads(log []byte) []Window {
	var out []Window
	for _, m := range reloadLine.FindAllSubmatch(log, -1) {
		end, err := time.Parse(time.RFC3339Nano, string(m[1]))
		took, err2 := time.ParseDuration(string(m[2]))
		if err != nil || err2 != nil {
			continue
		}
		out = append(out, Window{From: end.Add(-took), To: end})
	}
	return out
}

// Result of Run.
type Result struct {
	Workers    int
	BaseRoutes int
	Changes    []Change
	Bulk       *Bulk
	// Memory, ColdStart and NginxReload are those of the Options of the
	// same names; nil when not asked for.
	Memory      *Memory
	ColdStart   *ColdStart
	NginxReload *NginxReload
}

// ProxiedQuantile is the q-quantile of the changes' PUT-to-proxied times.
func (r *Result) ProxiedQuantile(q float64) time.Duration {
	d := make([]time.Duration, len(r.Changes))
	for i, c := range r.Changes {
		d[i] = c.Proxied
	}
	return hdr.ExactQuantile(d, q)
}

// PutQuantile is the q-quantile of the Admin API's answer times.
func (r *Result) PutQuantile(q float64) time.Duration {
	d := make([]time.Duration, len(r.Changes))
	for i, c := range r.Changes {
		d[i] = c.Put
	}
	return hdr.ExactQuantile(d, q)
}

type env struct {
	o        Options
	gw       *harness.Proc
	up       *http.Server
	upProc   *harness.Proc
	upAddr   string
	gwAddr   string
	adminURL string
	client   *http.Client
	pprof    string    // worker 0's net/http/pprof address when Options.Trace is set
	traced   time.Time // when the trace was asked for
}

// Run starts the upstream and the gateway, puts the base routes, times
// the changes one at a time, then runs the bulk load under steady
// traffic; it stops what it started before returning.
func Run(ctx context.Context, o Options) (*Result, error) {
	o = defaults(o)
	e := &env{o: o, client: &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64}}}
	defer e.close()
	if err := e.start(); err != nil {
		return nil, err
	}
	res := &Result{Workers: o.Workers, BaseRoutes: o.BaseRoutes}
	if o.Memory {
		// the workers are up once the proxy answers; their figures with
		// no route are read after they settle
		if err := e.waitProxy(ctx, time.Minute); err != nil {
			return nil, err
		}
		time.Sleep(time.Second)
		f, err := e.footprint(ctx)
		if err != nil {
			return nil, err
		}
		res.Memory = &Memory{Routes: o.BaseRoutes, Upstreams: o.Upstreams, Empty: f}
	}
	if o.Upstreams > 0 {
		e.logf("putting %d upstreams", o.Upstreams)
		if err := e.putAll(ctx, "upstreams", "u", o.Upstreams, func(int) []byte {
			return fmt.Appendf(nil, `{"type":"roundrobin","nodes":{%q:1}}`, e.upAddr)
		}); err != nil {
			return nil, err
		}
	}
	e.logf("putting %d base routes", o.BaseRoutes)
	if _, err := e.putRoutes(ctx, "base", o.BaseRoutes); err != nil {
		return nil, err
	}
	if err := e.waitServed(ctx, "/base/"+strconv.Itoa(o.BaseRoutes-1), time.Minute); err != nil {
		return nil, err
	}
	served := time.Now()
	sets := []routeSet{{"base", o.BaseRoutes}}
	if o.Memory {
		time.Sleep(time.Second)
		f, err := e.footprint(ctx)
		if err != nil {
			return nil, err
		}
		res.Memory.Loaded = f
		if o.Heap != "" {
			if err := e.heapProfile(ctx, o.Heap); err != nil {
				return nil, err
			}
		}
		// again once the workers have handed back what their builds
		// left unused, SettleAfter past the last change
		if res.Memory.Settled, err = e.settled(ctx, served); err != nil {
			return nil, err
		}
	}
	e.logf("timing %d changes", o.Changes)
	for i := range o.Changes {
		c, err := e.change(ctx, i)
		if err != nil {
			return nil, err
		}
		res.Changes = append(res.Changes, c)
		// changes apart, so that each is timed alone
		time.Sleep(20 * time.Millisecond)
	}
	sets = append(sets, routeSet{"chg", o.Changes})
	if o.Bulk > 0 {
		e.logf("bulk load of %d routes under %.0f req/s", o.Bulk, o.Rate)
		b, err := e.bulk(ctx)
		if err != nil {
			return nil, err
		}
		res.Bulk = b
		sets = append(sets, routeSet{"bulk", o.Bulk})
		if o.Nginx != "" {
			sets = append(sets, routeSet{"again", o.Bulk})
		}
	}
	if o.ColdStart {
		e.logf("cold start: the gateway stopped and started again")
		c, err := e.coldStart(ctx, sets, o.StepTimeout)
		if err != nil {
			return nil, err
		}
		res.ColdStart = c
	}
	if o.NginxReload && o.Nginx != "" {
		e.logf("nginx with %d locations: start, then a reload after one location more", o.BaseRoutes)
		r, err := e.nginxReload(ctx, o.StepTimeout)
		if err != nil {
			return nil, err
		}
		res.NginxReload = r
	}
	return res, nil
}

func defaults(o Options) Options {
	if o.Workers <= 0 {
		o.Workers = 1
	}
	if o.BaseRoutes <= 0 {
		o.BaseRoutes = 100
	}
	if o.Changes < 0 {
		o.Changes = 0
	}
	if o.Rate <= 0 {
		o.Rate = 2000
	}
	if o.Conns <= 0 {
		o.Conns = 8
	}
	if o.Parallel <= 0 {
		o.Parallel = 8
	}
	if o.Slow <= 0 {
		o.Slow = 10 * time.Millisecond
	}
	if o.TraceFor <= 0 {
		o.TraceFor = 15 * time.Second
	}
	if o.StepTimeout <= 0 {
		o.StepTimeout = 120 * time.Second
	}
	return o
}

func (e *env) logf(format string, a ...any) {
	if e.o.Log != nil {
		fmt.Fprintf(e.o.Log, "propagate: "+format+"\n", a...)
	}
}

// start runs the upstream (every path answers 200 with 1 KiB; its own
// process, the benchmark's event-loop upstream, when Self is set, so that
// its garbage collections do not pause the load generator's measurements)
// and the gateway on embedded etcd.
func (e *env) start() error {
	if e.o.Self != "" {
		p, addr, err := harness.StartUpstream(e.o.Self, nil, 1024, e.o.Dir)
		if err != nil {
			return err
		}
		e.upProc, e.upAddr = p, addr
	} else {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return err
		}
		e.upAddr = ln.Addr().String()
		body := bytes.Repeat([]byte("x"), 1024)
		e.up = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			w.Header().Set("Content-Length", "1024")
			_, _ = w.Write(body)
		}), ReadHeaderTimeout: 30 * time.Second}
		go func() { _ = e.up.Serve(ln) }()
	}

	gwPort, err := harness.FreePort()
	if err != nil {
		return err
	}
	adminPort, err := harness.FreePort()
	if err != nil {
		return err
	}
	e.gwAddr = "127.0.0.1:" + strconv.Itoa(gwPort)
	e.adminURL = "http://127.0.0.1:" + strconv.Itoa(adminPort) + "/apisix/admin"
	conf := e.config(gwPort, adminPort)
	if err := os.WriteFile(filepath.Join(e.o.Dir, "config.yaml"), []byte(conf), 0o644); err != nil {
		return err
	}
	if e.o.Trace != "" || e.o.Memory {
		port, err := harness.FreePort()
		if err != nil {
			return err
		}
		e.pprof = "127.0.0.1:" + strconv.Itoa(port)
	}
	if err := e.startGateway("coregate.log"); err != nil {
		return err
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		st, _, err := e.admin(context.Background(), "GET", "/routes", nil)
		if err == nil && st == 200 {
			return nil
		}
		if e.gw.Exited() || time.Now().After(deadline) {
			return fmt.Errorf("propagate: Admin API not ready (%d, %v):\n%s", st, err, e.gw.Tail(20))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// startGateway runs the gateway on Dir's config.yaml (and the embedded
// etcd's data beside it), its output in Dir/logName, with COREGATE_PPROF
// on the pprof address when there is one.
func (e *env) startGateway(logName string) error {
	var env []string
	if e.pprof != "" {
		env = append(env, "COREGATE_PPROF="+e.pprof)
	}
	gw, _, err := harness.Start("coregate", e.o.CPUs, env, filepath.Join(e.o.Dir, logName), false,
		e.o.Coregate, "-c", filepath.Join(e.o.Dir, "config.yaml"))
	if err != nil {
		return err
	}
	e.gw = gw
	return nil
}

// config is the gateway's config.yaml: the proxy on gwPort, the Admin API
// on adminPort with AdminKey, embedded etcd, and the access log when
// Options.AccessLog asks for it; no TLS listener (apisix.ssl, on APISIX's
// fixed 9443 by default), as the nginx reference has none.
func (e *env) config(gwPort, adminPort int) string {
	accessLog := "    enable_access_log: false"
	if e.o.AccessLog {
		accessLog = fmt.Sprintf("    enable_access_log: true\n    access_log: %s\n    access_log_format: %q",
			filepath.Join(e.o.Dir, "access.log"), AccessLogFormat)
	}
	return fmt.Sprintf(`apisix:
  node_listen: [%d]
  ssl:
    enable: false
  enable_control: false
nginx_config:
  worker_processes: %d
  error_log_level: info
  http:
%[5]s
deployment:
  role: traditional
  role_traditional:
    config_provider: etcd
  admin:
    admin_key:
      - name: admin
        key: %[3]s
        role: admin
    admin_listen:
      ip: 127.0.0.1
      port: %[4]d
plugin_attr:
  prometheus:
    enable_export_server: false
`, gwPort, e.o.Workers, AdminKey, adminPort, accessLog)
}

func (e *env) close() {
	if e.gw != nil {
		e.gw.Stop(10 * time.Second)
	}
	if e.up != nil {
		_ = e.up.Close()
	}
	if e.upProc != nil {
		e.upProc.Stop(5 * time.Second)
	}
}

// admin sends one Admin API request and returns its status and body.
func (e *env) admin(ctx context.Context, method, path string, body []byte) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, e.adminURL+path, bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("X-API-KEY", AdminKey)
	resp, err := e.client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// routeBody is the route on uri, the i-th of its kind (which of
// Options.Upstreams it takes).
func (e *env) routeBody(uri string, i int) []byte {
	b := fmt.Appendf(nil, `{"uri":%q,`, uri)
	if e.o.Plugins {
		b = fmt.Appendf(b, `"plugins":{"proxy-rewrite":{"headers":{"set":{"X-Bench":"1"}}},"response-rewrite":{"headers":{"set":{"X-Route":%q}}}},`, uri)
	}
	if e.o.Upstreams > 0 {
		return fmt.Appendf(b, `"upstream_id":"u-%d"}`, i%e.o.Upstreams)
	}
	return fmt.Appendf(b, `"upstream":{"type":"roundrobin","nodes":{%q:1}}}`, e.upAddr)
}

// putRoutes puts routes <prefix>-<i> on /<prefix>/<i>, i < n, Parallel at
// a time, and returns how long that took.
func (e *env) putRoutes(ctx context.Context, prefix string, n int) (time.Duration, error) {
	start := time.Now()
	err := e.putAll(ctx, "routes", prefix, n, func(i int) []byte { return e.routeBody("/"+prefix+"/"+strconv.Itoa(i), i) })
	return time.Since(start), err
}

// putAll puts the objects <prefix>-<i> of resource res, i < n, bodies
// made by body, Parallel at a time.
func (e *env) putAll(ctx context.Context, res, prefix string, n int, body func(i int) []byte) error {
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, e.o.Parallel)
	for range e.o.Parallel {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n || ctx.Err() != nil {
					return
				}
				id := prefix + "-" + strconv.Itoa(i)
				st, b, err := e.admin(ctx, "PUT", "/"+res+"/"+id, body(i))
				if err == nil && st != 201 && st != 200 {
					err = fmt.Errorf("status %d: %s", st, b)
				}
				if err != nil {
					errs <- fmt.Errorf("propagate: PUT %s %s: %w", res, id, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return err
	}
	return ctx.Err()
}

// prober sends GETs on one kept-alive connection to the gateway.
type prober struct {
	addr string
	c    net.Conn
	r    *bufio.Reader
}

// get sends GET path and returns the status; the body is read and dropped.
func (p *prober) get(path string) (int, error) {
	if p.c == nil {
		c, err := net.DialTimeout("tcp", p.addr, 2*time.Second)
		if err != nil {
			return 0, err
		}
		p.c, p.r = c, bufio.NewReader(c)
	}
	_ = p.c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := fmt.Fprintf(p.c, "GET %s HTTP/1.1\r\nHost: bench\r\n\r\n", path); err != nil {
		p.reset()
		return 0, err
	}
	resp, err := http.ReadResponse(p.r, nil)
	if err != nil {
		p.reset()
		return 0, err
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if err != nil || resp.Close {
		p.reset()
	}
	return resp.StatusCode, err
}

func (p *prober) reset() {
	if p.c != nil {
		p.c.Close()
		p.c = nil
	}
}

// waitServed polls path until the gateway proxies it.
func (e *env) waitServed(ctx context.Context, path string, timeout time.Duration) error {
	p := &prober{addr: e.gwAddr}
	defer p.reset()
	deadline := time.Now().Add(timeout)
	for {
		st, err := p.get(path)
		if err == nil && st == 200 {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil || e.gw.Exited() {
			return fmt.Errorf("propagate: %s not served after %v (status %d, %v):\n%s", path, timeout, st, err, e.gw.Tail(20))
		}
		time.Sleep(200 * time.Microsecond)
	}
}

// change puts route chg-<i> and polls its path on a kept-alive connection
// (opened before the PUT) until it is proxied.
func (e *env) change(ctx context.Context, i int) (Change, error) {
	path := "/chg/" + strconv.Itoa(i)
	p := &prober{addr: e.gwAddr}
	defer p.reset()
	if st, err := p.get(path); err != nil || st != 404 {
		return Change{}, fmt.Errorf("propagate: %s before its PUT: status %d, %v", path, st, err)
	}
	body := e.routeBody(path, i)
	start := time.Now()
	st, b, err := e.admin(ctx, "PUT", "/routes/chg-"+strconv.Itoa(i), body)
	put := time.Since(start)
	if err == nil && st != 201 {
		err = fmt.Errorf("status %d: %s", st, b)
	}
	if err != nil {
		return Change{}, fmt.Errorf("propagate: PUT %s: %w", path, err)
	}
	deadline := start.Add(10 * time.Second)
	for {
		st, err := p.get(path)
		if err == nil && st == 200 {
			return Change{Put: put, Proxied: time.Since(start)}, nil
		}
		if err == nil && st != 404 {
			return Change{}, fmt.Errorf("propagate: %s: status %d", path, st)
		}
		if time.Now().After(deadline) {
			return Change{}, fmt.Errorf("propagate: %s not proxied 10 s after its PUT (%v)", path, err)
		}
	}
}

// steadyLoads is the number of load generators of the steady traffic,
// each on a path of its own (steadyPaths), with its share of the rate and
// the connections.
const steadyLoads = 3

// steadyPaths are the base routes the steady traffic requests, one load
// generator each.
func (e *env) steadyPaths() [steadyLoads]string {
	return [steadyLoads]string{"/base/0", "/base/" + strconv.Itoa(e.o.BaseRoutes/2), "/base/" + strconv.Itoa(e.o.BaseRoutes-1)}
}

// steady starts the steady traffic (Rate in all, spread over the paths)
// on addr, one load generator per path; the function it returns stops it and returns what it saw.
func (e *env) steady(name, addr string, paths [steadyLoads]string) func() (Traffic, error) {
	var stop atomic.Bool
	type out struct {
		res load.Result
		err error
	}
	outs := make([]out, len(paths))
	// Each load loop gets a P of its own beside the Admin API client's
	// goroutines: a loop that came back from epoll_wait to find every P
	// taken by the PUTs would wait in the run queue, and since latency
	// counts from when each request was due, that wait would be charged
	// to the gateway.
	procs := runtime.GOMAXPROCS(runtime.GOMAXPROCS(0) + len(paths))
	var wg sync.WaitGroup
	start := time.Now()
	for i, p := range paths {
		wg.Add(1)
		go func() {
			defer wg.Done()
			outs[i].res, outs[i].err = load.Run(load.Config{
				Addr: addr, Path: p, Conns: max(1, e.o.Conns/steadyLoads), Rate: e.o.Rate / steadyLoads,
				Duration: 30 * time.Minute, Timeout: 5 * time.Second, Stop: &stop, SlowOver: e.o.Slow,
			})
		}()
	}
	return func() (Traffic, error) {
		stop.Store(true)
		wg.Wait()
		runtime.GOMAXPROCS(procs)
		t := Traffic{Name: name, Time: time.Since(start)}
		all := load.Result{Latency: hdr.New()}
		for _, o := range outs {
			if o.err != nil {
				return t, o.err
			}
			all.Add(o.res)
		}
		t.Requests, t.Non2xx, t.Errors = all.Requests, all.Non2xx, all.Errors
		lat := all.Latency
		if lat.Count() == 0 {
			return t, fmt.Errorf("propagate: %s: no steady traffic was answered", name)
		}
		t.Slow = lat.CountAbove(uint64(e.o.Slow))
		for _, sl := range all.Slow {
			t.SlowDue = append(t.SlowDue, sl.Due)
		}
		slices.SortFunc(t.SlowDue, time.Time.Compare)
		t.P50 = time.Duration(lat.MustQuantile(0.5))
		t.P99 = time.Duration(lat.MustQuantile(0.99))
		t.P999 = time.Duration(lat.MustQuantile(0.999))
		t.Max = time.Duration(lat.Max())
		return t, nil
	}
}

// settle is the pause between the bulk load and its references.
const settle = 5 * time.Second

// bulk runs steady traffic on the base routes, waits 1 s, puts Bulk
// routes, waits until the last is served and 1 s more, and stops the
// traffic; then, after settle, it runs the references, each for as long.
func (e *env) bulk(ctx context.Context) (*Bulk, error) {
	b := &Bulk{Routes: e.o.Bulk}
	traced := e.trace(ctx)
	l, err := e.duringBulkLoad(ctx, "coregate, during the bulk load", e.gwAddr, e.steadyPaths(), "bulk")
	if terr := traced(); err == nil {
		err = terr
	}
	if err != nil {
		return nil, err
	}
	if e.o.Trace != "" {
		e.logf("trace: first PUT at %v, last route at %v; slow requests due at (from the trace's request):",
			l.start.Sub(e.traced).Round(time.Microsecond), l.start.Add(l.live).Sub(e.traced).Round(time.Microsecond))
		for _, d := range l.traffic.SlowDue {
			e.logf("  %v", d.Sub(e.traced).Round(time.Microsecond))
		}
	}
	t := l.traffic
	b.Put, b.Live, b.SupervisorCPU, b.WorkersCPU = l.put, l.live, l.supervisorCPU, l.workersCPU
	b.Traffic, b.Start = t, l.start
	if log, err := os.ReadFile(filepath.Join(e.o.Dir, "coregate.log")); err == nil {
		for _, r := range parseReloads(log) {
			if r.To.After(l.start) && r.From.Before(l.start.Add(l.live)) {
				b.Reloads = append(b.Reloads, r)
			}
		}
	}
	// The phase right after the bulk load measured a longer tail than
	// the same phase later in the run, whichever target it had (coregate
	// with no change, or nginx when it came first): the machine is still
	// settling from the load (the harness's own garbage, memory handed
	// back). The references start after a pause.
	select {
	case <-time.After(settle):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	rest := func(name, addr string, paths [steadyLoads]string) error {
		e.logf("reference: %s, %.1f s", name, t.Time.Seconds())
		done := e.steady(name, addr, paths)
		select {
		case <-time.After(t.Time):
		case <-ctx.Done():
		}
		r, err := done()
		if err != nil {
			return err
		}
		b.References = append(b.References, r)
		return ctx.Err()
	}
	if err := rest(fmt.Sprintf("coregate, %d routes, no change", e.o.BaseRoutes+e.o.Changes+e.o.Bulk), e.gwAddr, e.steadyPaths()); err != nil {
		return nil, err
	}
	if e.o.Nginx != "" {
		ng, addr, err := e.startNginx()
		if err != nil {
			return nil, err
		}
		u := scenario.URI(1, 1)
		err = rest("nginx, no change", addr, [steadyLoads]string{u, u, u})
		if err == nil {
			err = e.beside(ctx, b, addr, [steadyLoads]string{u, u, u})
		}
		ng.Stop(5 * time.Second)
		if err != nil {
			return nil, err
		}
	}
	if err := rest("the upstream alone, no gateway", e.upAddr, e.steadyPaths()); err != nil {
		return nil, err
	}
	return b, nil
}

// trace starts fetching worker 0's execution trace into Options.Trace
// when it is set, and returns a function that waits for the trace to end.
// The trace's clock starts about when this returns: the progress log
// says when, in the wall-clock time of the slow requests' due times.
func (e *env) trace(ctx context.Context) func() error {
	if e.o.Trace == "" {
		return func() error { return nil }
	}
	url := fmt.Sprintf("http://%s/debug/pprof/trace?seconds=%g", e.pprof, e.o.TraceFor.Seconds())
	errc := make(chan error, 1)
	go func() {
		errc <- func() error {
			body, err := pprofGet(ctx, url, "trace", 0)
			if err != nil {
				return err
			}
			defer body.Close()
			return writeFile(e.o.Trace, body)
		}()
	}()
	e.traced = time.Now()
	e.logf("tracing worker 0 for %v", e.o.TraceFor)
	return func() error { return <-errc }
}

// beside measures the steady traffic through nginx while the gateway
// takes a second bulk load of as many routes ("again-<i>"): the same
// supervisor, etcd and worker builds competing for the same CPUs, and a
// proxy that has nothing to do with them. What nginx's tail gains there is
// the machine's; what coregate's own bulk load shows beyond it is the
// gateway's.
func (e *env) beside(ctx context.Context, b *Bulk, addr string, paths [steadyLoads]string) error {
	e.logf("reference: nginx, during a second bulk load of the gateway")
	l, err := e.duringBulkLoad(ctx, "nginx, during a bulk load of coregate", addr, paths, "again")
	if err != nil {
		return err
	}
	b.References = append(b.References, l.traffic)
	return nil
}

// bulkLoad is what duringBulkLoad saw.
type bulkLoad struct {
	traffic                   Traffic
	start                     time.Time     // the first PUT
	put, live                 time.Duration // all PUTs answered; the last route proxied, from the first PUT
	supervisorCPU, workersCPU time.Duration // from the first PUT to the last route proxied
}

// duringBulkLoad runs steady traffic (named name) on addr's paths, waits
// 1 s, puts Bulk routes <prefix>-<i> on /<prefix>/<i>, waits until the
// last is proxied and 1 s more, and stops the traffic.
func (e *env) duringBulkLoad(ctx context.Context, name, addr string, paths [steadyLoads]string, prefix string) (bulkLoad, error) {
	var l bulkLoad
	done := e.steady(name, addr, paths)
	err := func() error {
		time.Sleep(time.Second)
		sup0, wk0 := e.cpu()
		start := time.Now()
		l.start = start
		var err error
		if l.put, err = e.putRoutes(ctx, prefix, e.o.Bulk); err != nil {
			return err
		}
		if err := e.waitServed(ctx, "/"+prefix+"/"+strconv.Itoa(e.o.Bulk-1), 5*time.Minute); err != nil {
			return err
		}
		l.live = time.Since(start)
		sup1, wk1 := e.cpu()
		l.supervisorCPU, l.workersCPU = sup1-sup0, wk1-wk0
		time.Sleep(time.Second)
		return nil
	}()
	var terr error
	l.traffic, terr = done()
	if err != nil {
		return l, err
	}
	return l, terr
}

// nginxScenario is the reference nginx of the steady traffic: make bench's
// nginx for one route without plugins (scenario.NginxConfig), on
// scenario.URI(1, 1), to the same upstream.
var nginxScenario = scenario.Scenario{Name: "admin-reference", Routes: 1, Upstream: true}

// startNginx starts the reference nginx (nginxScenario) with the gateway's
// worker count and CPUs, and returns it and its address once it proxies
// its route.
func (e *env) startNginx() (*harness.Proc, string, error) {
	port, err := harness.FreePort()
	if err != nil {
		return nil, "", err
	}
	dir := filepath.Join(e.o.Dir, "nginx")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, "", err
	}
	conf := scenario.NginxConfig(nginxScenario, dir, port, e.o.Workers, e.upAddr)
	path := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(path, conf, 0o644); err != nil {
		return nil, "", err
	}
	p, _, err := harness.Start("nginx", e.o.CPUs, nil, filepath.Join(dir, "nginx.log"), false,
		e.o.Nginx, "-p", dir+"/", "-c", path, "-e", filepath.Join(dir, "error.log"))
	if err != nil {
		return nil, "", err
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	if err := harness.WaitReady(p, addr, scenario.URI(1, 1), "", 10*time.Second); err != nil {
		p.Stop(time.Second)
		return nil, "", err
	}
	return p, addr, nil
}

// cpu reads the CPU time used so far by the supervisor and by its
// workers.
func (e *env) cpu() (sup, workers time.Duration) {
	tick := time.Second / procstat.Hz
	pid := e.gw.PID()
	sup = time.Duration(procstat.Measure([]int{pid}).Ticks) * tick
	var rest []int
	for _, p := range e.gw.PIDs() {
		if p != pid {
			rest = append(rest, p)
		}
	}
	return sup, time.Duration(procstat.Measure(rest).Ticks) * tick
}

// Report writes r as the benchmark's table.
func Report(w io.Writer, r *Result, o Options) {
	o = defaults(o)
	// Under a millisecond, two places: a p99 of 0.1 ms and one of 0.14
	// are a ratio of 1.4, which the target on the bulk load's tail reads.
	ms := func(d time.Duration) string {
		if d < time.Millisecond {
			return strconv.FormatFloat(float64(d)/1e6, 'f', 2, 64) + " ms"
		}
		return strconv.FormatFloat(float64(d)/1e6, 'f', 1, 64) + " ms"
	}
	fmt.Fprintf(w, "Admin API propagation: %d worker(s), %d routes before\n\n", r.Workers, r.BaseRoutes)
	if len(r.Changes) > 0 {
		verdict := "ok"
		if r.ProxiedQuantile(1) > 50*time.Millisecond {
			verdict = "over the 50 ms target"
		}
		fmt.Fprintf(w, "| %d changes, PUT to first proxied request | median | p90 | max | target |\n|---|---:|---:|---:|---|\n", len(r.Changes))
		fmt.Fprintf(w, "| PUT answered | %s | %s | %s | |\n", ms(r.PutQuantile(0.5)), ms(r.PutQuantile(0.9)), ms(r.PutQuantile(1)))
		fmt.Fprintf(w, "| first request proxied | %s | %s | %s | max ≤ 50 ms: %s |\n\n", ms(r.ProxiedQuantile(0.5)), ms(r.ProxiedQuantile(0.9)), ms(r.ProxiedQuantile(1)), verdict)
	}
	reportScale(w, r)
	if b := r.Bulk; b != nil {
		t := b.Traffic
		verdict := "ok"
		var why []string
		if t.Slow > 0 {
			why = append(why, fmt.Sprintf("%d requests slower than %v", t.Slow, o.Slow))
		}
		if t.Non2xx > 0 || t.Errors > 0 {
			why = append(why, fmt.Sprintf("%d non-2xx, %d errors", t.Non2xx, t.Errors))
		}
		if len(why) > 0 {
			verdict = strings.Join(why, "; ")
		}
		for _, ref := range b.References[min(1, len(b.References)):] {
			verdict += fmt.Sprintf(" (%s: %d slower)", ref.Name, ref.Slow)
		}
		fmt.Fprintf(w, "| bulk load of %d routes under %.0f req/s | |\n|---|---:|\n", b.Routes, o.Rate)
		fmt.Fprintf(w, "| all PUTs answered (%d at a time) | %s |\n", o.Parallel, ms(b.Put))
		fmt.Fprintf(w, "| last route proxied | %s |\n", ms(b.Live))
		fmt.Fprintf(w, "| CPU: supervisor / workers, per route | %s / %s |\n",
			ms(b.SupervisorCPU/time.Duration(b.Routes)), ms(b.WorkersCPU/time.Duration(b.Routes)))
		fmt.Fprintf(w, "| steady requests (non-2xx, errors) | %d (%d, %d) |\n", t.Requests, t.Non2xx, t.Errors)
		fmt.Fprintf(w, "| latency p50 / p99 / p99.9 / max | %s / %s / %s / %s |\n", ms(t.P50), ms(t.P99), ms(t.P999), ms(t.Max))
		if len(b.References) > 0 && b.References[0].P99 > 0 {
			ref := b.References[0]
			ratio := float64(t.P99) / float64(ref.P99)
			tail := "ok"
			if ratio > 1.2 {
				tail = "over the target"
			}
			fmt.Fprintf(w, "| p99 against %s | %.2f× (%s / %s; ≤ 1.2×: %s) |\n", ref.Name, ratio, ms(t.P99), ms(ref.P99), tail)
		}
		fmt.Fprintf(w, "| no request over %v, no 404 | %s |\n", o.Slow, verdict)
		if t.Slow > 0 {
			before, puts, building, after, inReload, covered := b.SlowTimeline(o.Slow)
			fmt.Fprintf(w, "| slow requests due before the first PUT / during the PUTs / until the last route / after | %d / %d / %d / %d |\n",
				before, puts, building, after)
			fmt.Fprintf(w, "| slow requests waiting across a reload (%d reloads, %.0f %% of the load's time) | %d of %d |\n",
				len(b.Reloads), 100*covered, inReload, len(t.SlowDue))
		}
		fmt.Fprintln(w)
		fmt.Fprintf(w, "| steady traffic, %.0f req/s on %d connections | time | requests | non-2xx | errors | p50 | p99 | p99.9 | max | over %v |\n",
			o.Rate, max(1, o.Conns/steadyLoads)*steadyLoads, o.Slow)
		fmt.Fprintf(w, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
		for _, x := range append([]Traffic{t}, b.References...) {
			fmt.Fprintf(w, "| %s | %.1f s | %d | %d | %d | %s | %s | %s | %s | %d |\n",
				x.Name, x.Time.Seconds(), x.Requests, x.Non2xx, x.Errors, ms(x.P50), ms(x.P99), ms(x.P999), ms(x.Max), x.Slow)
		}
	}
}
