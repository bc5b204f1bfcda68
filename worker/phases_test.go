package worker

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"coregate/admin/spec"
	"coregate/httpvar"
	"coregate/plugins"
	"coregate/worker/router"
)

// probe is a test plugin that runs in every request-path phase but
// body_filter and does what its configuration says; each instance records
// the phases it ran in, in the order they ran, into the registry's
// recorder (without allocating: the recorder's capacity is reserved).
type probe struct {
	name string
	rec  *recorder
}

// recorder is the phases run, "name:phase", and what log phases saw.
type recorder struct {
	events []string
	seen   []byte
}

func (r *recorder) reset() {
	r.events = r.events[:0]
	r.seen = r.seen[:0]
}

type probeConf struct {
	ExitAt     string            `json:"exit_at"` // rewrite, access, before_proxy
	Exit       int               `json:"exit"`
	Body       *string           `json:"body"`
	DelayMS    int               `json:"delay_ms"`
	HoldMS     int               `json:"hold_ms"`     // Delay in access
	Keep       uint64            `json:"keep"`        // Keep in access, with a K-Keep header
	LogKept    bool              `json:"log_kept"`    // record what Kept says in log
	RespHeader map[string]string `json:"resp_header"` // in access
	HFHeader   map[string]string `json:"hf_header"`   // in header_filter
	HFAdd      []string          `json:"hf_add"`      // name=value, added in header_filter
	HFRead     []string          `json:"hf_read"`     // record ResponseHeader of these in header_filter, first
	HFRemove   []string          `json:"hf_remove"`   // removed in header_filter, after hf_header and hf_add
	HFStatus   int               `json:"hf_status"`   // SetStatus in header_filter
	ReadFields bool              `json:"read_fields"` // record every RequestHeaderAt in rewrite
	UpURI      string            `json:"up_uri"`
	UpMethod   string            `json:"up_method"`
	UpHost     string            `json:"up_host"`
	ReqSet     map[string]string `json:"req_set"`
	ReqAdd     []string          `json:"req_add"` // name=value
	ReqDel     []string          `json:"req_del"`
	Log        bool              `json:"log"`         // record what the log phase sees
	LogFigures bool              `json:"log_figures"` // record the log phase's route variables and figures
	Key        string            `json:"key"`         // the credential, for p-auth's consumers
	Await      int               `json:"await"`       // Awaits in access, one after the other, each woken at once
	AwaitExit  int               `json:"await_exit"`  // Exit after the last Await's Resume
	AllUA      bool              `json:"all_ua"`      // record every User-Agent value (HeaderAt) in log
	AllHeaders bool              `json:"all_headers"` // record every request header (RequestHeaderAt) in log
	RespFields bool              `json:"resp_fields"` // read the response head (ResponseHeadReader), record every ResponseHeaderAt but Date in log
	RespProbe  bool              `json:"resp_probe"`  // record whether ResponseHeaderAt(0) answers in log, without being a reader
	RespBody   int64             `json:"resp_body"`   // read that much of the response body (ResponseBodyReader), recorded in log
	SetVars    map[string]string `json:"set_vars"`    // SetVar in rewrite
	LogVars    []string          `json:"log_vars"`    // record these variables (Var) in log
	ClientAddr string            `json:"client_addr"` // SetClientAddr in rewrite, ip:port
	LogAddr    bool              `json:"log_addr"`    // record remote_addr:remote_port in log, before and after a SetClientAddr there
}

func (probe) Schema() []byte { return []byte(`{"type":"object"}`) }

func (probe) Check(raw json.RawMessage) error {
	var c probeConf
	return json.Unmarshal(raw, &c)
}

// Credential makes every probe an authentication plugin to the index; the
// compile asks isAuth, which only p-auth passes (authProbe).
func (p probe) Build(raw json.RawMessage, env plugins.Env) (plugins.Instance, error) {
	var c probeConf
	err := json.Unmarshal(raw, &c)
	if err != nil {
		return nil, err
	}
	in := &probeInst{name: p.name, rec: p.rec, c: c, env: env}
	for _, ph := range []string{"rewrite", "access", "before_proxy", "header_filter", "log"} {
		in.ev = append(in.ev, p.name+":"+ph)
	}
	if c.Body != nil {
		in.body = []byte(*c.Body)
	}
	if c.ClientAddr != "" {
		if in.addr, err = netip.ParseAddrPort(c.ClientAddr); err != nil {
			return nil, err
		}
	}
	if c.UpURI != "" {
		in.uri = []byte(c.UpURI)
	}
	if c.UpMethod != "" {
		in.meth = []byte(c.UpMethod)
	}
	if c.UpHost != "" {
		in.hst = []byte(c.UpHost)
	}
	for _, k := range slices.Sorted(maps.Keys(c.SetVars)) {
		in.setVars = append(in.setVars, struct {
			v   httpvar.Var
			val []byte
		}{httpvar.Parse(k), []byte(c.SetVars[k])})
	}
	for _, name := range c.LogVars {
		in.logVars = append(in.logVars, httpvar.Parse(name))
	}
	for _, k := range slices.Sorted(maps.Keys(c.RespHeader)) {
		in.resp = append(in.resp, kv{k, []byte(c.RespHeader[k])})
	}
	for _, k := range slices.Sorted(maps.Keys(c.HFHeader)) {
		in.hf = append(in.hf, kv{k, []byte(c.HFHeader[k])})
	}
	for _, a := range c.HFAdd {
		k, v, _ := strings.Cut(a, "=")
		in.hfAdd = append(in.hfAdd, kv{k, []byte(v)})
	}
	for _, k := range slices.Sorted(maps.Keys(c.ReqSet)) {
		in.set = append(in.set, kv{k, []byte(c.ReqSet[k])})
	}
	for _, a := range c.ReqAdd {
		k, v, _ := strings.Cut(a, "=")
		in.add = append(in.add, kv{k, []byte(v)})
	}
	return in, nil
}

type authProbe struct{ probe }

func (authProbe) Credential(raw json.RawMessage) (string, error) {
	var c probeConf
	err := json.Unmarshal(raw, &c)
	return c.Key, err
}

type kv struct {
	k string
	v []byte
}

type probeInst struct {
	name           string
	rec            *recorder
	c              probeConf
	env            plugins.Env
	ev             []string
	body           []byte
	resp, hf       []kv
	hfAdd          []kv
	set, add       []kv
	uri, meth, hst []byte
	awaits         int
	addr           netip.AddrPort
	setVars        []struct {
		v   httpvar.Var
		val []byte
	}
	logVars []httpvar.Var
}

func (in *probeInst) record(i int) { in.rec.events = append(in.rec.events, in.ev[i]) }

func (in *probeInst) maybeExit(c plugins.Ctx, at string) {
	if in.c.Exit == 0 || in.c.ExitAt != at {
		return
	}
	if in.c.DelayMS > 0 {
		c.ExitAfter(time.Duration(in.c.DelayMS)*time.Millisecond, in.c.Exit, in.body)
		return
	}
	c.Exit(in.c.Exit, in.body)
}

func (in *probeInst) Rewrite(c plugins.Ctx) {
	in.record(0)
	for _, x := range in.setVars {
		c.SetVar(x.v, x.val)
	}
	if in.c.ReadFields {
		for i := 0; ; i++ {
			name, value, ok := c.RequestHeaderAt(i)
			if !ok {
				break
			}
			s := append(append(in.rec.seen, name...), '=')
			in.rec.seen = append(append(s, value...), ';')
		}
	}
	if in.name == "p-auth" {
		if k := c.Header("k"); k != nil {
			if cs := in.env.Consumers.ByCredential("p-auth", k); cs != nil {
				c.SetConsumer(cs)
			}
		}
	}
	for _, e := range in.set {
		c.SetRequestHeader(e.k, e.v)
	}
	for _, e := range in.add {
		c.AddRequestHeader(e.k, e.v)
	}
	for _, d := range in.c.ReqDel {
		c.SetRequestHeader(d, nil)
	}
	if in.uri != nil {
		c.SetUpstreamURI(in.uri)
	}
	if in.meth != nil {
		c.SetUpstreamMethod(in.meth)
	}
	if in.hst != nil {
		c.SetUpstreamHost(in.hst)
	}
	if in.addr.IsValid() {
		c.SetClientAddr(in.addr.Addr(), in.addr.Port())
	}
	in.maybeExit(c, "rewrite")
}

func (in *probeInst) Access(c plugins.Ctx) {
	in.record(1)
	for _, e := range in.resp {
		c.SetResponseHeader(e.k, e.v)
	}
	if in.c.HoldMS > 0 {
		c.Delay(time.Duration(in.c.HoldMS) * time.Millisecond)
	}
	if in.c.Keep > 0 && c.Header("k-keep") != nil {
		c.Keep(in, in.c.Keep)
	}
	if in.c.Await > 0 {
		in.awaits = 0
		in.await(c)
		return
	}
	in.maybeExit(c, "access")
}

// await starts one Await, woken at once from the loop itself: its Resume
// runs when the worker's loop runs its queued work (fakeLoop.runQueued).
func (in *probeInst) await(c plugins.Ctx) {
	wk, ok := c.Await(in)
	if !ok {
		in.rec.events = append(in.rec.events, in.name+":refused")
		return
	}
	in.awaits++
	wk.Wake()
}

func (in *probeInst) Resume(c plugins.Ctx) {
	in.rec.events = append(in.rec.events, in.name+":resume")
	if c.Header("host") == nil {
		in.rec.events = append(in.rec.events, in.name+":no-head")
	}
	if in.awaits < in.c.Await {
		in.await(c)
		return
	}
	if in.c.AwaitExit > 0 {
		c.Exit(in.c.AwaitExit, in.body)
	}
}

func (in *probeInst) Abandon() { in.rec.events = append(in.rec.events, in.name+":abandon") }

func (in *probeInst) BeforeProxy(c plugins.Ctx) {
	in.record(2)
	in.maybeExit(c, "before_proxy")
}

func (in *probeInst) HeaderFilter(c plugins.Ctx) {
	in.record(3)
	for _, name := range in.c.HFRead {
		s := append(append(in.rec.seen, name...), '=')
		if v := c.ResponseHeader(name); v != nil {
			s = append(s, v...)
		} else {
			s = append(s, "nil"...)
		}
		in.rec.seen = append(s, ';')
	}
	for _, e := range in.hf {
		c.SetResponseHeader(e.k, e.v)
	}
	for _, e := range in.hfAdd {
		c.AddResponseHeader(e.k, e.v)
	}
	for _, name := range in.c.HFRemove {
		c.RemoveResponseHeader(name)
	}
	if in.c.HFStatus != 0 {
		c.SetStatus(in.c.HFStatus)
	}
}

// ResponseBodyLimit implements plugins.ResponseBodyReader.
func (in *probeInst) ResponseBodyLimit() int64 { return in.c.RespBody }

// ReadsResponseHead implements plugins.ResponseHeadReader.
func (in *probeInst) ReadsResponseHead() bool { return in.c.RespFields }

func (in *probeInst) Log(c plugins.Ctx) {
	in.record(4)
	if in.c.RespFields {
		s := in.rec.seen
		for i := 0; ; i++ {
			n, v, ok := c.ResponseHeaderAt(i)
			if !ok {
				break
			}
			if string(n) == "Date" {
				v = []byte("*")
			}
			s = append(append(append(append(append(s, '['), n...), '='), v...), ']')
		}
		in.rec.seen = append(s, ';')
	}
	if in.c.RespProbe {
		_, _, ok := c.ResponseHeaderAt(0)
		in.rec.seen = fmt.Appendf(in.rec.seen, "head %v;", ok)
		in.rec.seen = fmt.Appendf(in.rec.seen, "body %v;", c.ResponseBody() != nil)
	}
	for _, v := range in.logVars {
		in.rec.seen = append(append(append(in.rec.seen, v.Name...), c.Var(v)...), ';')
	}
	if in.c.RespBody > 0 {
		in.rec.seen = append(append(append(in.rec.seen, "body["...), c.ResponseBody()...), "];"...)
	}
	if in.c.LogKept {
		v, ok := c.Kept(in)
		s := append(append(in.rec.seen, in.name...), " kept "...)
		s = strconv.AppendUint(s, v, 10)
		s = append(s, ' ')
		in.rec.seen = append(strconv.AppendBool(s, ok), ';')
	}
	if in.c.LogAddr {
		addr, port := httpvar.Parse("remote_addr"), httpvar.Parse("remote_port")
		s := fmt.Appendf(in.rec.seen, "%s:%s ", c.Var(addr), c.Var(port))
		c.SetClientAddr(netip.MustParseAddr("9.9.9.9"), 9)
		in.rec.seen = fmt.Appendf(s, "%s:%s;", c.Var(addr), c.Var(port))
	}
	if in.c.AllUA {
		s := in.rec.seen
		for i := 0; ; i++ {
			v, ok := c.HeaderAt("user-agent", i)
			if !ok {
				break
			}
			s = append(append(append(s, '['), v...), ']')
		}
		in.rec.seen = append(s, ';')
	}
	if in.c.AllHeaders {
		s := in.rec.seen
		for i := 0; ; i++ {
			n, v, ok := c.RequestHeaderAt(i)
			if !ok {
				break
			}
			s = append(append(append(append(append(s, '['), n...), '='), v...), ']')
		}
		in.rec.seen = append(s, ';')
	}
	if in.c.LogFigures {
		s := in.rec.seen
		for _, v := range []string{"route_name", "service_id", "service_name", "matched_uri", "matched_host", "balancer_ip", "upstream_addr"} {
			s = fmt.Appendf(s, "%s=%s ", v, c.Var(httpvar.Parse(v)))
		}
		e := c.Exchange()
		s = fmt.Appendf(s, "time=%v up=%v proxied=%v upstreamed=%v length=%d sent=%d;", e.RequestTime, e.UpstreamTime, e.Proxied, e.Upstreamed, e.RequestLength, e.BytesSent)
		in.rec.seen = s
	}
	if in.c.Log {
		s := in.rec.seen
		s = append(s, c.Method()...)
		s = append(s, ' ')
		s = append(s, c.Path()...)
		s = append(s, ' ')
		s = append(s, c.Var(httpvar.Parse("uri"))...)
		s = append(s, " ua="...)
		s = append(s, c.Header("user-agent")...)
		s = append(s, " arg="...)
		s = append(s, c.Var(httpvar.Parse("arg_a"))...)
		s = append(s, " route="...)
		s = append(s, c.RouteID()...)
		s = append(s, " consumer="...)
		s = append(s, c.Var(httpvar.Parse("consumer_name"))...)
		s = append(s, " status="...)
		s = fmt.Appendf(s, "%d;", c.Status()) // tests that measure allocations do not log
		in.rec.seen = s
	}
}

// probeRegistry registers probes: p-hi, p-auth (an authentication
// plugin), p-mid, p-lo, in that order of priority, and p-body (body_filter
// only).
func probeRegistry(rec *recorder) *plugins.Registry {
	table := []plugins.Entry{{Name: "p-hi", Priority: 3000}, {Name: "p-auth", Priority: 2500},
		{Name: "p-mid", Priority: 2000}, {Name: "p-lo", Priority: 1000}, {Name: "p-body", Priority: 500}}
	r := plugins.NewRegistry(table)
	for _, e := range table {
		switch e.Name {
		case "p-auth":
			r.Register(e.Name, authProbe{probe{e.Name, rec}})
			continue
		case "p-body":
			r.Register(e.Name, bodyProbe{probe{e.Name, rec}})
			continue
		}
		r.Register(e.Name, probe{e.Name, rec})
	}
	return r
}

// pluginHarness is a harness whose worker compiled s with the probes.
func pluginHarness(t testing.TB, s *spec.Spec) (*harness, *recorder) {
	t.Helper()
	rec := &recorder{events: make([]string, 0, 256), seen: make([]byte, 0, 4096)}
	w := New(Config{Listen: []string{"127.0.0.1:0"}})
	snap, err := compile(s, router.HostURI, upstreamEnv{}, pluginSet{reg: probeRegistry(rec), env: w.cfg.Plugins}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	h := newHarnessSnap(t, w, snap)
	return h, rec
}

// newHarnessSnap is newHarness for a worker and snapshot made by the
// caller.
func newHarnessSnap(t testing.TB, w *Worker, snap *Snapshot) *harness {
	t.Helper()
	w.SetSnapshot(snap)
	loop := &fakeLoop{w: w}
	cl := &fakeConn{loop: loop,
		laddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 9080},
		raddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2), Port: 40000}}
	w.OnOpen(cl)
	h := &harness{w: w, cl: cl}
	for _, rt := range snap.routes.flat() {
		if rt.up == nil {
			continue
		}
		for _, nd := range rt.up.nodes {
			p := w.poolFor(rt.up, nd, nil)
			if len(p.idle) > 0 {
				continue
			}
			up := &fakeConn{loop: loop,
				laddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 50000},
				raddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 1980}}
			uc := p.newConn()
			uc.c, uc.io = up, up
			up.ctx = uc
			uc.state = usBusy
			p.put(uc)
			h.up = up
		}
	}
	if h.up == nil {
		h.up = &fakeConn{loop: loop} // no upstream: roundTrip gets no answer from it
	}
	return h
}

// pluginSpec is routes and global rules (APISIX JSON) with consumers.
func pluginSpec(t testing.TB, routes, globals, consumers, creds []string) *spec.Spec {
	t.Helper()
	s := &spec.Spec{}
	for _, r := range routes {
		x, err := spec.DecodeRoute([]byte(r))
		if err != nil {
			t.Fatal(err)
		}
		s.Routes = append(s.Routes, x)
	}
	for _, g := range globals {
		s.GlobalRules = append(s.GlobalRules, mustDecode(t, spec.DecodeGlobalRule, g))
	}
	for _, c := range consumers {
		s.Consumers = append(s.Consumers, mustDecode(t, spec.DecodeConsumer, c))
	}
	for _, c := range creds {
		s.Credentials = append(s.Credentials, json.RawMessage(c))
	}
	if err := s.Check(); err != nil {
		t.Fatal(err)
	}
	return s
}

const upOK = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nX-Up: a\r\nServer: origin\r\n\r\nok"

// TestPhaseOrder: the global rules' plugins run before the route's in
// each phase, as APISIX's http_access_phase runs them (globals' rewrite,
// the route's rewrite, globals' access, the route's access, and so on),
// each set in priority order; header_filter before the response head,
// log once, after it.
func TestPhaseOrder(t *testing.T) {
	h, rec := pluginHarness(t, pluginSpec(t,
		[]string{`{"id":"r1","uri":"/a","plugins":{"p-lo":{},"p-hi":{}},"upstream":{"nodes":{"127.0.0.1:1980":1}}}`},
		[]string{`{"id":"g1","plugins":{"p-mid":{}}}`}, nil, nil))
	_, got := h.roundTrip([]byte("GET /a HTTP/1.1\r\nHost: x\r\n\r\n"), []byte(upOK))
	if !bytes.HasPrefix(got, []byte("HTTP/1.1 200 OK\r\n")) || !bytes.HasSuffix(got, []byte("\r\n\r\nok")) {
		t.Fatalf("answer:\n%s", got)
	}
	want := []string{
		"p-mid:rewrite", "p-hi:rewrite", "p-lo:rewrite",
		"p-mid:access", "p-hi:access", "p-lo:access",
		"p-mid:before_proxy", "p-hi:before_proxy", "p-lo:before_proxy",
		"p-mid:header_filter", "p-hi:header_filter", "p-lo:header_filter",
		"p-mid:log", "p-hi:log", "p-lo:log",
	}
	if d := cmp.Diff(want, rec.events); d != "" {
		t.Fatalf("phases (-want +got):\n%s", d)
	}
	// The next request on the connection starts over.
	rec.reset()
	h.roundTrip([]byte("GET /a HTTP/1.1\r\nHost: x\r\n\r\n"), []byte(upOK))
	if d := cmp.Diff(want, rec.events); d != "" {
		t.Fatalf("second request (-want +got):\n%s", d)
	}
}

// TestExit: a plugin's Exit ends the request phases where it is, the
// upstream is not contacted, and the worker answers with the body given
// (or its page for the status), the headers the plugins set, and
// header_filter and log run once; a route with plugins and no upstream
// answers 503 when no plugin exits.
func TestExit(t *testing.T) {
	h, rec := pluginHarness(t, pluginSpec(t, []string{
		`{"id":"r1","uri":"/a","plugins":{"p-hi":{"resp_header":{"X-Hi":"1","Content-Type":"application/json"}},"p-mid":{"exit_at":"access","exit":403,"body":"{\"no\":1}"},"p-lo":{}},"upstream":{"nodes":{"127.0.0.1:1980":1}}}`,
		`{"id":"r2","uri":"/b","plugins":{"p-hi":{"exit_at":"rewrite","exit":429}}}`,
		`{"id":"r3","uri":"/c","plugins":{"p-lo":{"hf_header":{"X-HF":"lo"}}}}`,
		`{"id":"r4","uri":"/d","plugins":{"p-lo":{"exit_at":"before_proxy","exit":201,"body":""}}}`,
	}, nil, nil, nil))
	up, got := h.roundTrip([]byte("GET /a HTTP/1.1\r\nHost: x\r\n\r\n"), nil)
	if len(up) != 0 {
		t.Fatalf("the upstream got %q", up)
	}
	want := "HTTP/1.1 403 Forbidden\r\n" + string(h.w.dateLine) + "Content-Length: 8\r\n" + string(h.w.server) +
		"Content-Type: application/json\r\nX-Hi: 1\r\n\r\n{\"no\":1}"
	if string(got) != want {
		t.Fatalf("answer:\n%q\nwant\n%q", got, want)
	}
	wantEv := []string{"p-hi:rewrite", "p-mid:rewrite", "p-lo:rewrite", "p-hi:access", "p-mid:access",
		"p-hi:header_filter", "p-mid:header_filter", "p-lo:header_filter", "p-hi:log", "p-mid:log", "p-lo:log"}
	if d := cmp.Diff(wantEv, rec.events); d != "" {
		t.Fatalf("phases (-want +got):\n%s", d)
	}

	rec.reset()
	_, got = h.roundTrip([]byte("GET /b HTTP/1.1\r\nHost: x\r\n\r\n"), nil)
	want = "HTTP/1.1 429 Too Many Requests\r\n" + string(h.w.dateLine) + "Content-Type: text/html; charset=utf-8\r\nContent-Length: " +
		fmt.Sprint(len(errorPages[429])) + "\r\n" + string(h.w.server) + "\r\n" + string(errorPages[429])
	if string(got) != want {
		t.Fatalf("answer:\n%q\nwant\n%q", got, want)
	}
	if d := cmp.Diff([]string{"p-hi:rewrite", "p-hi:header_filter", "p-hi:log"}, rec.events); d != "" {
		t.Fatalf("phases (-want +got):\n%s", d)
	}

	_, got = h.roundTrip([]byte("GET /c HTTP/1.1\r\nHost: x\r\n\r\n"), nil)
	if !bytes.HasPrefix(got, []byte("HTTP/1.1 503 ")) || !bytes.Contains(got, []byte("\r\nX-HF: lo\r\n")) {
		t.Fatalf("no upstream, no exit:\n%s", got)
	}
	_, got = h.roundTrip([]byte("GET /d HTTP/1.1\r\nHost: x\r\n\r\n"), nil)
	if !bytes.HasPrefix(got, []byte("HTTP/1.1 201 Created\r\n")) || !bytes.HasSuffix(got, []byte("Content-Length: 0\r\n"+string(h.w.server)+"\r\n")) {
		t.Fatalf("exit in before_proxy:\n%s", got)
	}
	// A request body is read and dropped, and the connection serves the
	// next request; a HEAD gets the head alone.
	_, got = h.roundTrip([]byte("POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello"+
		"HEAD /a HTTP/1.1\r\nHost: x\r\n\r\n"), nil)
	first, second, _ := strings.Cut(string(got), "{\"no\":1}")
	if !strings.HasPrefix(first, "HTTP/1.1 403 Forbidden\r\n") || !strings.HasPrefix(second, "HTTP/1.1 403 Forbidden\r\n") ||
		!strings.HasSuffix(second, "Content-Length: 8\r\n"+string(h.w.server)+"Content-Type: application/json\r\nX-Hi: 1\r\n\r\n") ||
		len(h.cl.in) != 0 || h.cl.closed {
		t.Fatalf("a body, then HEAD:\n%q", got)
	}
}

// TestHeaderFilterHeaders: a header a plugin sets replaces the upstream's
// of that name (Server included), from access or header_filter; framing
// and hop-by-hop names and values with CR or LF are refused.
func TestHeaderFilterHeaders(t *testing.T) {
	h, _ := pluginHarness(t, pluginSpec(t, []string{
		`{"id":"r1","uri":"/a","plugins":{"p-hi":{"resp_header":{"x-up":"b","Content-Length":"9","Connection":"x"}},` +
			`"p-lo":{"hf_header":{"X-New":"n","Server":"mine","X-Bad":"a\r\nX-Injected: 1"}}},"upstream":{"nodes":{"127.0.0.1:1980":1}}}`,
	}, nil, nil, nil))
	_, got := h.roundTrip([]byte("GET /a HTTP/1.1\r\nHost: x\r\n\r\n"), []byte(upOK))
	head, body, _ := strings.Cut(string(got), "\r\n\r\n")
	lines := strings.Split(head, "\r\n")
	names := lines[1:]
	want := []string{"Content-Length: 2", strings.TrimSuffix(string(h.w.dateLine), "\r\n"), "x-up: b", "Server: mine", "X-New: n"}
	if d := cmp.Diff(want, names); d != "" || body != "ok" {
		t.Fatalf("head (-want +got):\n%s\nbody %q", d, body)
	}
}

// TestHeaderFilterAddedHeaders: a header a plugin adds follows the
// upstream's of that name, which stay, and the worker's own on a local
// answer; a later set of the name replaces every one added before it.
func TestHeaderFilterAddedHeaders(t *testing.T) {
	h, _ := pluginHarness(t, pluginSpec(t, []string{
		`{"id":"r1","uri":"/a","plugins":{"p-hi":{"hf_add":["X-Up=b","Vary=Origin","X-Gone=1","X-Gone=2"]},` +
			`"p-lo":{"hf_header":{"X-Gone":"3"},"hf_add":["X-Gone=4","Content-Type=x/y","Connection=x"]}},"upstream":{"nodes":{"127.0.0.1:1980":1}}}`,
		`{"id":"r2","uri":"/b","plugins":{"p-hi":{"exit_at":"access","exit":200,"body":"e","hf_add":["Content-Type=x/y","Server=s"]}}}`,
	}, nil, nil, nil))
	_, got := h.roundTrip([]byte("GET /a HTTP/1.1\r\nHost: x\r\n\r\n"), []byte(upOK))
	head, body, _ := strings.Cut(string(got), "\r\n\r\n")
	want := []string{"X-Up: a", "Content-Length: 2", strings.TrimSuffix(string(h.w.dateLine), "\r\n"), strings.TrimSuffix(string(h.w.server), "\r\n"),
		"X-Up: b", "Vary: Origin", "X-Gone: 3", "X-Gone: 4", "Content-Type: x/y"}
	if d := cmp.Diff(want, strings.Split(head, "\r\n")[1:]); d != "" || body != "ok" {
		t.Fatalf("head (-want +got):\n%s\nbody %q", d, body)
	}
	_, got = h.roundTrip([]byte("GET /b HTTP/1.1\r\nHost: x\r\n\r\n"), nil)
	if !bytes.Contains(got, []byte("\r\nContent-Type: text/plain")) || !bytes.Contains(got, []byte("\r\nContent-Type: x/y\r\n")) ||
		!bytes.Contains(got, []byte("\r\nServer: s\r\n")) || !bytes.HasSuffix(got, []byte("\r\n\r\ne")) {
		t.Fatalf("local answer %q", got)
	}
}

// TestHeaderFilterStatusAndRemove: SetStatus in header_filter gives the
// head its status, with the standard reason, on the upstream's answer and
// on the worker's own; a 204 keeps its status, and none is given 304.
// RemoveResponseHeader takes out the upstream's fields, the worker's
// Server and Date, and what a plugin set or added before, and
// ResponseHeader no longer sees them.
func TestHeaderFilterStatusAndRemove(t *testing.T) {
	h, rec := pluginHarness(t, pluginSpec(t, []string{
		`{"id":"r1","uri":"/a","plugins":{"p-hi":{"hf_add":["X-Gone=1"],"hf_remove":["X-Up","Server","X-Gone"],"hf_status":503},` +
			`"p-lo":{"hf_read":["X-Up","X-Gone"],"hf_add":["X-Gone=2"]}},"upstream":{"nodes":{"127.0.0.1:1980":1}}}`,
		`{"id":"r2","uri":"/b","plugins":{"p-hi":{"exit_at":"access","exit":403,"body":"no","hf_remove":["Date"],"hf_status":200}}}`,
		`{"id":"r3","uri":"/c","plugins":{"p-hi":{"hf_status":304}},"upstream":{"nodes":{"127.0.0.1:1980":1}}}`,
	}, nil, nil, nil))
	_, got := h.roundTrip([]byte("GET /a HTTP/1.1\r\nHost: x\r\n\r\n"), []byte(upOK))
	head, body, _ := strings.Cut(string(got), "\r\n\r\n")
	want := []string{"HTTP/1.1 503 Service Temporarily Unavailable", "Content-Length: 2", strings.TrimSuffix(string(h.w.dateLine), "\r\n"), "X-Gone: 2"}
	if d := cmp.Diff(want, strings.Split(head, "\r\n")); d != "" || body != "ok" {
		t.Fatalf("head (-want +got):\n%s\nbody %q", d, body)
	}
	if want := "X-Up=nil;X-Gone=nil;"; string(rec.seen) != want {
		t.Fatalf("seen %q, want %q", rec.seen, want)
	}
	_, got = h.roundTrip([]byte("GET /b HTTP/1.1\r\nHost: x\r\n\r\n"), nil)
	if !bytes.HasPrefix(got, []byte("HTTP/1.1 200 OK\r\n")) || bytes.Contains(got, []byte("Date:")) || !bytes.HasSuffix(got, []byte("\r\n\r\nno")) {
		t.Fatalf("local answer %q", got)
	}
	_, got = h.roundTrip([]byte("GET /a HTTP/1.1\r\nHost: x\r\n\r\n"), []byte("HTTP/1.1 204 No Content\r\n\r\n"))
	if !bytes.HasPrefix(got, []byte("HTTP/1.1 204 No Content\r\n")) {
		t.Fatalf("a 204 %q", got)
	}
	// No response is given a status without a body.
	_, got = h.roundTrip([]byte("GET /c HTTP/1.1\r\nHost: x\r\n\r\n"), []byte(upOK))
	if !bytes.HasPrefix(got, []byte("HTTP/1.1 200 OK\r\n")) || !bytes.HasSuffix(got, []byte("\r\n\r\nok")) {
		t.Fatalf("set to 304: %q", got)
	}
}

// TestRemoveWorkerOwned: RemoveResponseHeader leaves alone the fields the
// worker writes (Transfer-Encoding, Connection: the body still goes
// chunked), in any case, and a name that is no field name; Content-Length,
// in any case, is removed, which a head no body follows (a HEAD's) shows.
func TestRemoveWorkerOwned(t *testing.T) {
	h, _ := pluginHarness(t, pluginSpec(t, []string{
		`{"id":"r1","uri":"/a","plugins":{"p-hi":{"hf_remove":["transfer-ENCODING","Connection","X Up","content-LENGTH"]}},"upstream":{"nodes":{"127.0.0.1:1980":1}}}`,
	}, nil, nil, nil))
	_, got := h.roundTrip([]byte("GET /a HTTP/1.1\r\nHost: x\r\n\r\n"), []byte("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n"))
	if !bytes.Contains(got, []byte("\r\nTransfer-Encoding: chunked\r\n")) || !bytes.HasSuffix(got, []byte("\r\n\r\n2\r\nok\r\n0\r\n\r\n")) {
		t.Fatalf("chunked answer %q", got)
	}
	_, got = h.roundTrip([]byte("HEAD /a HTTP/1.1\r\nHost: x\r\n\r\n"), []byte(upOK[:len(upOK)-2]))
	if !bytes.HasPrefix(got, []byte("HTTP/1.1 200 OK\r\n")) || bytes.Contains(got, []byte("Content-Length")) || !bytes.Contains(got, []byte("\r\nX-Up: a\r\n")) {
		t.Fatalf("HEAD %q", got)
	}
}

// TestRequestHeaderAt: a plugin reads the request's fields one by one, in
// the order the client sent them, repeated names included.
func TestRequestHeaderAt(t *testing.T) {
	h, rec := pluginHarness(t, pluginSpec(t, []string{
		`{"id":"r1","uri":"/a","plugins":{"p-hi":{"read_fields":true}},"upstream":{"nodes":{"127.0.0.1:1980":1}}}`,
	}, nil, nil, nil))
	h.roundTrip([]byte("GET /a HTTP/1.1\r\nHost: x\r\nX-A: 1\r\nx-a: 2\r\nAccept: */*\r\n\r\n"), []byte(upOK))
	if want := "Host=x;X-A=1;x-a=2;Accept=*/*;"; string(rec.seen) != want {
		t.Fatalf("seen %q, want %q", rec.seen, want)
	}
}

// TestUpstreamEdits: the head sent upstream is written from the parsed
// request and the plugins' edits: method, target, Host, a set header
// replacing the client's, added ones, a removed one; framing, hop-by-hop
// and forwarding headers stay the worker's.
func TestUpstreamEdits(t *testing.T) {
	h, _ := pluginHarness(t, pluginSpec(t, []string{
		`{"id":"r1","uri":"/a","plugins":{"p-hi":{"up_uri":"/new/path?x=1","up_method":"PUT","up_host":"edited.example",` +
			`"req_set":{"User-Agent":"edited","Content-Length":"99","Connection":"close","Host":"no","X-Forwarded-For":"1.2.3.4"},` +
			`"req_add":["X-Add=1","X-Add=2"],"req_del":["Accept"]},` +
			`"p-lo":{"req_set":{"X-Add":"3"}}},"upstream":{"nodes":{"127.0.0.1:1980":1}}}`,
	}, nil, nil, nil))
	req := "POST /a?q=1 HTTP/1.1\r\nHost: client.example\r\nUser-Agent: curl\r\nAccept: */*\r\nX-Keep: k\r\nContent-Length: 2\r\n\r\nhi"
	up, got := h.roundTrip([]byte(req), []byte(upOK))
	want := "PUT /new/path?x=1 HTTP/1.1\r\nHost: edited.example\r\nX-Keep: k\r\nUser-Agent: edited\r\nX-Add: 3\r\n" +
		"X-Forwarded-For: 127.0.0.2\r\nX-Real-IP: 127.0.0.2\r\nX-Forwarded-Proto: http\r\nX-Forwarded-Host: client.example\r\n" +
		"X-Forwarded-Port: 9080\r\nContent-Length: 2\r\n\r\nhi"
	if string(up) != want {
		t.Fatalf("upstream got:\n%q\nwant\n%q", up, want)
	}
	if !bytes.HasPrefix(got, []byte("HTTP/1.1 200 OK")) {
		t.Fatalf("answer %q", got)
	}
}

// TestLogSeesTheRequest: what the log phase reads of the request (method,
// path, headers, vars) is the request's, though its head has left gnet's
// buffer and the next pipelined request has taken its place: whether
// gnet's Peek hands back the memory the head was parsed from (the request
// is rebased onto its copy) or other memory each time (the copy is parsed
// again).
func TestLogSeesTheRequest(t *testing.T) {
	for _, copies := range []bool{false, true} {
		t.Run(fmt.Sprintf("peek copies %v", copies), func(t *testing.T) { testLogSeesTheRequest(t, copies) })
	}
}

func testLogSeesTheRequest(t *testing.T, peekCopies bool) {
	h, rec := pluginHarness(t, pluginSpec(t, []string{
		`{"id":"r1","uri":"/a*","plugins":{"p-lo":{"log":true}},"upstream":{"nodes":{"127.0.0.1:1980":1}}}`,
	}, nil, nil, nil))
	h.cl.peekCopies = peekCopies
	three := "GET /aaa?a=1 HTTP/1.1\r\nHost: x\r\nUser-Agent: first\r\n\r\n" +
		"GET /abbbbbbbbbbbbbbbb?a=2 HTTP/1.1\r\nHost: x\r\nUser-Agent: second-agent-longer\r\n\r\n" +
		"GET /ac?a=3 HTTP/1.1\r\nHost: x\r\nUser-Agent: third\r\n\r\n"
	h.cl.in = append(h.cl.in, three...)
	h.w.OnTraffic(h.cl)
	for range 3 { // each answer ends an exchange and starts the next request
		h.up.in = append(h.up.in, upOK...)
		h.w.OnTraffic(h.up)
	}
	want := "GET /aaa /aaa ua=first arg=1 route=r1 consumer= status=200;" +
		"GET /abbbbbbbbbbbbbbbb /abbbbbbbbbbbbbbbb ua=second-agent-longer arg=2 route=r1 consumer= status=200;" +
		"GET /ac /ac ua=third arg=3 route=r1 consumer= status=200;"
	if string(rec.seen) != want {
		t.Fatalf("log saw\n%s\nwant\n%s", rec.seen, want)
	}
}

// TestHeaderAt: HeaderAt reads every value of a repeated header, in the
// order sent, its name compared case-insensitively, an empty value
// included; past the last, and for an absent header, ok is false.
func TestHeaderAt(t *testing.T) {
	h, rec := pluginHarness(t, pluginSpec(t, []string{
		`{"id":"r1","uri":"/a","plugins":{"p-lo":{"all_ua":true}},"upstream":{"nodes":{"127.0.0.1:1980":1}}}`,
	}, nil, nil, nil))
	for _, tc := range []struct{ head, want string }{
		{"User-Agent: one\r\nX-Other: x\r\nuser-agent: two\r\nUSER-AGENT:\r\n", "[one][two][];"},
		{"User-Agent: only\r\n", "[only];"},
		{"", ";"},
	} {
		rec.reset()
		h.roundTrip([]byte("GET /a HTTP/1.1\r\nHost: x\r\n"+tc.head+"\r\n"), []byte(upOK))
		if string(rec.seen) != tc.want {
			t.Errorf("head %q: log saw %q, want %q", tc.head, rec.seen, tc.want)
		}
	}
}

// TestRequestHeaderAtAll: RequestHeaderAt reads every request header in the order
// sent, its name as written, an empty value included; past the last, ok
// is false.
func TestRequestHeaderAtAll(t *testing.T) {
	h, rec := pluginHarness(t, pluginSpec(t, []string{
		`{"id":"r1","uri":"/a","plugins":{"p-lo":{"all_headers":true}},"upstream":{"nodes":{"127.0.0.1:1980":1}}}`,
	}, nil, nil, nil))
	for _, tc := range []struct{ head, want string }{
		{"User-Agent: one\r\nX-Other: x\r\nuser-agent: two\r\nX-Empty:\r\n", "[Host=x][User-Agent=one][X-Other=x][user-agent=two][X-Empty=];"},
		{"", "[Host=x];"},
	} {
		rec.reset()
		h.roundTrip([]byte("GET /a HTTP/1.1\r\nHost: x\r\n"+tc.head+"\r\n"), []byte(upOK))
		if string(rec.seen) != tc.want {
			t.Errorf("head %q: log saw %q, want %q", tc.head, rec.seen, tc.want)
		}
	}
}

// TestResponseHeaderAt: the log phase of a ResponseHeadReader reads the
// head the client got field by field: the upstream's as relayed, the
// worker's own and those a plugin set; for the worker's own answer too
// (a plugin's Exit, with header_filter's fields). A route without such a
// reader gets none, and the fields of one exchange are not the next's.
func TestResponseHeaderAt(t *testing.T) {
	server := "[Server=APISIX/" + spec.CompatVersion + "]"
	for _, tc := range []struct{ name, route, want string }{
		{"proxied", `{"id":"r1","uri":"/a","plugins":{"p-hi":{"hf_header":{"X-Set":"s"}},"p-lo":{"resp_fields":true}},"upstream":{"nodes":{"127.0.0.1:1980":1}}}`,
			"[X-Up=a][Content-Length=2][Date=*]" + server + "[X-Set=s];"},
		{"exit", `{"id":"r1","uri":"/a","plugins":{"p-hi":{"exit_at":"access","exit":403,"body":"no","hf_header":{"X-Set":"s"}},"p-lo":{"resp_fields":true}},"upstream":{"nodes":{"127.0.0.1:1980":1}}}`,
			"[Date=*][Content-Type=text/plain; charset=utf-8][Content-Length=2]" + server + "[X-Set=s];"},
		{"no reader", `{"id":"r1","uri":"/a","plugins":{"p-lo":{"resp_probe":true}},"upstream":{"nodes":{"127.0.0.1:1980":1}}}`,
			"head false;body false;"},
	} {
		h, rec := pluginHarness(t, pluginSpec(t, []string{tc.route}, nil, nil, nil))
		for i := range 2 {
			rec.reset()
			h.roundTrip([]byte("GET /a HTTP/1.1\r\nHost: x\r\n\r\n"), []byte(upOK))
			if string(rec.seen) != tc.want {
				t.Errorf("%s, request %d: log saw %q, want %q", tc.name, i, rec.seen, tc.want)
			}
		}
	}
}

// TestResponseBody: the log phase of a ResponseBodyReader reads the start
// of the body the client got, up to the largest limit of the route's
// readers: an upstream body of a Content-Length, a chunked one in two
// reads (de-chunked), one body_filter changed (what the client got), a
// plugin's answer; the client gets the whole body all the same. The next
// exchange starts with nothing kept.
func TestResponseBody(t *testing.T) {
	chunked := [2]string{"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n", "4\r\ndefg\r\n3\r\nhij\r\n0\r\n\r\n"}
	for _, tc := range []struct {
		name, route string
		resp        [2]string
		want, body  string
	}{
		{"length", `{"id":"r1","uri":"/a","plugins":{"p-lo":{"resp_body":5}},"upstream":{"nodes":{"127.0.0.1:1980":1}}}`,
			[2]string{upOK}, "body[ok];", "ok"},
		{"chunked", `{"id":"r1","uri":"/a","plugins":{"p-lo":{"resp_body":5},"p-mid":{"resp_body":8}},"upstream":{"nodes":{"127.0.0.1:1980":1}}}`,
			chunked, "body[abcdefgh];body[abcdefgh];", "3\r\nabc\r\n7\r\ndefghij\r\n0\r\n\r\n"},
		{"body_filter", `{"id":"r1","uri":"/a","plugins":{"p-lo":{"resp_body":100},"p-body":{}},"upstream":{"nodes":{"127.0.0.1:1980":1}}}`,
			chunked, "body[[abc][defg][hij]!];", "5\r\n[abc]\r\n6\r\n[defg]\r\n5\r\n[hij]\r\n1\r\n!\r\n0\r\n\r\n"},
		{"exit", `{"id":"r1","uri":"/a","plugins":{"p-hi":{"exit_at":"access","exit":403,"body":"denied"},"p-lo":{"resp_body":4}},"upstream":{"nodes":{"127.0.0.1:1980":1}}}`,
			[2]string{}, "body[deni];", "denied"},
	} {
		h, rec := pluginHarness(t, pluginSpec(t, []string{tc.route}, nil, nil, nil))
		for i := range 2 {
			rec.reset()
			h.cl.out, h.up.out = h.cl.out[:0], h.up.out[:0]
			h.cl.in = append(h.cl.in, "GET /a HTTP/1.1\r\nHost: x\r\n\r\n"...)
			h.w.OnTraffic(h.cl)
			for _, r := range tc.resp {
				if r != "" {
					h.up.in = append(h.up.in, r...)
					h.w.OnTraffic(h.up)
				}
			}
			if string(rec.seen) != tc.want {
				t.Errorf("%s, request %d: log saw %q, want %q", tc.name, i, rec.seen, tc.want)
			}
			if _, body, _ := strings.Cut(string(h.cl.out), "\r\n\r\n"); body != tc.body {
				t.Errorf("%s, request %d: client got %q, want %q", tc.name, i, body, tc.body)
			}
		}
	}
}

// TestSetClientAddr: an address a plugin sets is $remote_addr and
// $remote_port for the log phase, X-Real-IP and the end of X-Forwarded-For
// upstream; a port of 0 keeps the connection's; it cannot be set from the
// log phase; the connection's next request has its own address again.
func TestSetClientAddr(t *testing.T) {
	h, rec := pluginHarness(t, pluginSpec(t, []string{
		`{"id":"r1","uri":"/a","plugins":{"p-hi":{"client_addr":"10.1.2.3:5678"},"p-lo":{"log_addr":true}},"upstream":{"nodes":{"127.0.0.1:1980":1}}}`,
		`{"id":"r2","uri":"/v6","plugins":{"p-hi":{"client_addr":"[::ffff:10.9.9.9]:0"},"p-lo":{"log_addr":true}},"upstream":{"nodes":{"127.0.0.1:1980":1}}}`,
		`{"id":"r3","uri":"/b","plugins":{"p-lo":{"log_addr":true}},"upstream":{"nodes":{"127.0.0.1:1980":1}}}`,
	}, nil, nil, nil))
	for _, tc := range []struct{ target, xff, seen string }{
		{"/a", "X-Forwarded-For: 1.1.1.1, 10.1.2.3\r\nX-Real-IP: 10.1.2.3\r\n", "10.1.2.3:5678 10.1.2.3:5678;"},
		{"/v6", "X-Forwarded-For: 1.1.1.1, 10.9.9.9\r\nX-Real-IP: 10.9.9.9\r\n", "10.9.9.9:40000 10.9.9.9:40000;"},
		{"/b", "X-Forwarded-For: 1.1.1.1, 127.0.0.2\r\nX-Real-IP: 127.0.0.2\r\n", "127.0.0.2:40000 127.0.0.2:40000;"},
	} {
		rec.reset()
		up, _ := h.roundTrip([]byte("GET "+tc.target+" HTTP/1.1\r\nHost: x\r\nX-Forwarded-For: 1.1.1.1\r\n\r\n"), []byte(upOK))
		if !strings.Contains(string(up), tc.xff) {
			t.Errorf("%s: upstream got\n%q\nwant it to hold %q", tc.target, up, tc.xff)
		}
		if string(rec.seen) != tc.seen {
			t.Errorf("%s: log saw %q, want %q", tc.target, rec.seen, tc.seen)
		}
	}
}

// TestConsumerMerge: once an authentication plugin attaches a consumer,
// the route's plugins run merged with the consumer's (the consumer's
// configuration wins; its authentication plugins aside), and the rewrite
// phase of the plugins it adds runs; a credential object finds its
// consumer too. Without a consumer the route's own run.
func TestConsumerMerge(t *testing.T) {
	h, rec := pluginHarness(t, pluginSpec(t,
		[]string{`{"id":"r1","uri":"/a","plugins":{"p-auth":{},"p-lo":{"resp_header":{"X-Who":"route"}}},"upstream":{"nodes":{"127.0.0.1:1980":1}}}`},
		nil,
		[]string{
			`{"username":"jack","plugins":{"p-auth":{"key":"k1"},"p-lo":{"resp_header":{"X-Who":"jack"}},"p-mid":{}}}`,
			`{"username":"rose","plugins":{"p-auth":{"key":"k2"}}}`,
		},
		[]string{`{"id":"jack/credentials/c1","plugins":{"p-auth":{"key":"k3"}}}`}))
	for _, tc := range []struct {
		key, who string
		events   []string
	}{
		{"", "route", []string{"p-auth:rewrite", "p-lo:rewrite", "p-auth:access", "p-lo:access"}},
		{"k1", "jack", []string{"p-auth:rewrite", "p-lo:rewrite", "p-mid:rewrite", "p-auth:access", "p-mid:access", "p-lo:access"}},
		{"k3", "jack", []string{"p-auth:rewrite", "p-lo:rewrite", "p-mid:rewrite", "p-auth:access", "p-mid:access", "p-lo:access"}},
		{"k2", "route", []string{"p-auth:rewrite", "p-lo:rewrite", "p-auth:access", "p-lo:access"}},
	} {
		rec.reset()
		req := "GET /a HTTP/1.1\r\nHost: x\r\n\r\n"
		if tc.key != "" {
			req = "GET /a HTTP/1.1\r\nHost: x\r\nk: " + tc.key + "\r\n\r\n"
		}
		_, got := h.roundTrip([]byte(req), []byte(upOK))
		if !bytes.Contains(got, []byte("\r\nX-Who: "+tc.who+"\r\n")) {
			t.Fatalf("key %q: answer\n%s", tc.key, got)
		}
		var access []string
		for _, e := range rec.events {
			if strings.HasSuffix(e, ":rewrite") || strings.HasSuffix(e, ":access") {
				access = append(access, e)
			}
		}
		if d := cmp.Diff(tc.events, access); d != "" {
			t.Fatalf("key %q: phases (-want +got):\n%s", tc.key, d)
		}
	}
}

// TestDelayedExit: ExitAfter's answer waits on the connection's deadline
// and leaves when it fires; a connection closed meanwhile takes its timer
// with it, and log runs once either way.
func TestDelayedExit(t *testing.T) {
	h, rec := pluginHarness(t, pluginSpec(t, []string{
		`{"id":"r1","uri":"/a","plugins":{"p-hi":{"exit_at":"access","exit":200,"body":"late","delay_ms":500}}}`,
	}, nil, nil, nil))
	_, got := h.roundTrip([]byte("GET /a HTTP/1.1\r\nHost: x\r\n\r\n"), nil)
	cc := h.cl.ctx.(*clientConn)
	if len(got) != 0 || cc.state != csDelay {
		t.Fatalf("answered at once (state %d): %q", cc.state, got)
	}
	h.w.now += int64(400 * time.Millisecond)
	h.w.expireDeadlines()
	if len(h.cl.out) != 0 {
		t.Fatalf("answered early: %q", h.cl.out)
	}
	h.w.now += int64(100 * time.Millisecond)
	h.w.expireDeadlines()
	if !bytes.HasPrefix(h.cl.out, []byte("HTTP/1.1 200 OK\r\n")) || !bytes.HasSuffix(h.cl.out, []byte("\r\n\r\nlate")) || cc.state != csIdle {
		t.Fatalf("answer (state %d): %q", cc.state, h.cl.out)
	}
	if d := cmp.Diff([]string{"p-hi:rewrite", "p-hi:access", "p-hi:header_filter", "p-hi:log"}, rec.events); d != "" {
		t.Fatalf("phases (-want +got):\n%s", d)
	}

	// The client leaves during the delay: nothing fires afterwards.
	rec.reset()
	h.cl.out = h.cl.out[:0]
	h.cl.in = append(h.cl.in, "GET /a HTTP/1.1\r\nHost: x\r\n\r\n"...)
	h.w.OnTraffic(h.cl)
	_ = h.cl.loop.Close(h.cl)
	h.w.now += int64(time.Second)
	h.w.expireDeadlines()
	if len(h.cl.out) != 0 || h.w.timed.Len() != 0 {
		t.Fatalf("after the close: wrote %q, %d timers", h.cl.out, h.w.timed.Len())
	}
	if d := cmp.Diff([]string{"p-hi:rewrite", "p-hi:access", "p-hi:log"}, rec.events); d != "" {
		t.Fatalf("phases (-want +got):\n%s", d)
	}
}

// TestDelayedRequest: Delay holds the request back on the connection's
// deadline: the phases go on at once, the upstream gets the request once
// the delays (added up) have passed, and the loop serves other connections
// meanwhile. A request a plugin ends after a Delay waits for it too; a
// client that leaves takes the timer with it.
func TestDelayedRequest(t *testing.T) {
	h, rec := pluginHarness(t, pluginSpec(t, []string{
		`{"id":"r1","uri":"/a","plugins":{"p-hi":{"hold_ms":300},"p-lo":{"hold_ms":200}},"upstream":{"nodes":{"127.0.0.1:1980":1}}}`,
		`{"id":"r2","uri":"/b","plugins":{"p-hi":{"hold_ms":300},"p-lo":{"exit_at":"before_proxy","exit":403,"body":"no"}},"upstream":{"nodes":{"127.0.0.1:1980":1}}}`,
	}, nil, nil, nil))
	up, got := h.roundTrip([]byte("POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nhi"), nil)
	cc := h.cl.ctx.(*clientConn)
	if len(got) != 0 || len(up) != 0 || cc.state != csDelay {
		t.Fatalf("sent at once (state %d): upstream %q, client %q", cc.state, up, got)
	}
	if d := cmp.Diff([]string{"p-hi:rewrite", "p-lo:rewrite", "p-hi:access", "p-lo:access", "p-hi:before_proxy", "p-lo:before_proxy"}, rec.events); d != "" {
		t.Fatalf("phases (-want +got):\n%s", d)
	}
	h.w.now += int64(400 * time.Millisecond)
	h.w.expireDeadlines()
	if len(h.up.out) != 0 {
		t.Fatalf("sent upstream early: %q", h.up.out)
	}
	h.w.now += int64(100 * time.Millisecond)
	h.w.expireDeadlines()
	if !bytes.HasPrefix(h.up.out, []byte("POST /a HTTP/1.1\r\n")) || !bytes.HasSuffix(h.up.out, []byte("\r\n\r\nhi")) || cc.state != csProxy {
		t.Fatalf("upstream got (state %d): %q", cc.state, h.up.out)
	}
	h.up.in = append(h.up.in, upOK...)
	h.w.OnTraffic(h.up)
	if !bytes.HasPrefix(h.cl.out, []byte("HTTP/1.1 200 OK\r\n")) || !bytes.HasSuffix(h.cl.out, []byte("\r\n\r\nok")) || cc.state != csIdle {
		t.Fatalf("answer (state %d): %q", cc.state, h.cl.out)
	}

	// Ended after a Delay: the answer waits for it.
	h.up.out, h.cl.out = h.up.out[:0], h.cl.out[:0]
	h.cl.in = append(h.cl.in, "GET /b HTTP/1.1\r\nHost: x\r\n\r\n"...)
	h.w.OnTraffic(h.cl)
	if len(h.cl.out) != 0 || cc.state != csDelay {
		t.Fatalf("answered at once (state %d): %q", cc.state, h.cl.out)
	}
	h.w.now += int64(300 * time.Millisecond)
	h.w.expireDeadlines()
	if !bytes.HasPrefix(h.cl.out, []byte("HTTP/1.1 403 Forbidden\r\n")) || !bytes.HasSuffix(h.cl.out, []byte("\r\n\r\nno")) || len(h.up.out) != 0 {
		t.Fatalf("answer %q, upstream got %q", h.cl.out, h.up.out)
	}

	// The client leaves during the delay: nothing fires afterwards.
	h.cl.out = h.cl.out[:0]
	h.cl.in = append(h.cl.in, "GET /a HTTP/1.1\r\nHost: x\r\n\r\n"...)
	h.w.OnTraffic(h.cl)
	timers := h.w.timed.Len() // the delay's and the idle upstream connection's
	_ = h.cl.loop.Close(h.cl)
	if len(h.cl.out) != 0 || len(h.up.out) != 0 || h.w.timed.Len() != timers-1 {
		t.Fatalf("after the close: wrote %q, upstream %q, %d timers, want %d", h.cl.out, h.up.out, h.w.timed.Len(), timers-1)
	}
	h.w.now += int64(time.Second)
	h.w.expireDeadlines()
	if len(h.cl.out) != 0 || len(h.up.out) != 0 {
		t.Fatalf("after the close: wrote %q, upstream %q", h.cl.out, h.up.out)
	}
}

// TestKeep: what a plugin keeps in access it finds in log, its own only;
// the next exchange on the connection starts with nothing kept.
func TestKeep(t *testing.T) {
	h, rec := pluginHarness(t, pluginSpec(t, []string{
		`{"id":"r1","uri":"/a","plugins":{"p-hi":{"keep":7,"log_kept":true},"p-lo":{"log_kept":true}},"upstream":{"nodes":{"127.0.0.1:1980":1}}}`,
		`{"id":"r2","uri":"/b","plugins":{"p-hi":{"log_kept":true}},"upstream":{"nodes":{"127.0.0.1:1980":1}}}`,
	}, nil, nil, nil))
	h.roundTrip([]byte("GET /a HTTP/1.1\r\nHost: x\r\nK-Keep: 1\r\n\r\n"), []byte(upOK))
	h.roundTrip([]byte("GET /a HTTP/1.1\r\nHost: x\r\n\r\n"), []byte(upOK))
	h.roundTrip([]byte("GET /b HTTP/1.1\r\nHost: x\r\nK-Keep: 1\r\n\r\n"), []byte(upOK))
	if want := "p-hi kept 7 true;p-lo kept 0 false;p-hi kept 0 false;p-lo kept 0 false;p-hi kept 0 false;"; string(rec.seen) != want {
		t.Fatalf("log saw %q, want %q", rec.seen, want)
	}
}

// TestGlobalRulesWithoutRoute: a request no route matched runs the global
// rules' rewrite and access phases before its 404, and a global rule may
// answer it.
func TestGlobalRulesWithoutRoute(t *testing.T) {
	h, rec := pluginHarness(t, pluginSpec(t, nil, []string{`{"id":"g","plugins":{"p-mid":{}}}`}, nil, nil))
	_, got := h.roundTrip([]byte("GET /nope HTTP/1.1\r\nHost: x\r\n\r\n"), nil)
	if !bytes.HasPrefix(got, []byte("HTTP/1.1 404 Not Found\r\n")) || !bytes.HasSuffix(got, notFoundBody) {
		t.Fatalf("answer %q", got)
	}
	want := []string{"p-mid:rewrite", "p-mid:access", "p-mid:before_proxy", "p-mid:header_filter", "p-mid:log"}
	if d := cmp.Diff(want, rec.events); d != "" {
		t.Fatalf("phases (-want +got):\n%s", d)
	}
	h2, _ := pluginHarness(t, pluginSpec(t, nil, []string{`{"id":"g","plugins":{"p-mid":{"exit_at":"access","exit":401,"body":"who?"}}}`}, nil, nil))
	if _, got := h2.roundTrip([]byte("GET /nope HTTP/1.1\r\nHost: x\r\n\r\n"), nil); !bytes.HasSuffix(got, []byte("\r\n\r\nwho?")) || !bytes.HasPrefix(got, []byte("HTTP/1.1 401 Unauthorized")) {
		t.Fatalf("global exit: %q", got)
	}
}

// bodyProbe runs in body_filter: it wraps each piece in brackets and
// adds "!" at the end, in a buffer of its own.
type bodyProbe struct{ probe }

func (bodyProbe) Build(json.RawMessage, plugins.Env) (plugins.Instance, error) {
	return &bodyInst{}, nil
}

type bodyInst struct{ buf []byte }

func (b *bodyInst) BodyFilter(_ plugins.Ctx, chunk []byte, eof bool) []byte {
	out := b.buf[:0]
	if len(chunk) > 0 {
		out = append(append(append(out, '['), chunk...), ']')
	}
	if eof {
		out = append(out, '!')
	}
	b.buf = out
	return out
}

// TestBodyFilter: body_filter sees every body the client gets, and since
// it may change it, the worker frames what it returns: chunked for an
// upstream's answer to an HTTP/1.1 client (piece by piece, then the last
// piece with eof), delimited by the close for HTTP/1.0, with the length
// of the result for an answer of the worker's or a plugin's own.
func TestBodyFilter(t *testing.T) {
	h, _ := pluginHarness(t, pluginSpec(t, []string{
		`{"id":"r1","uri":"/a","plugins":{"p-body":{}},"upstream":{"nodes":{"127.0.0.1:1980":1}}}`,
		`{"id":"r2","uri":"/exit","plugins":{"p-body":{},"p-hi":{"exit_at":"access","exit":403,"body":"no"}}}`,
	}, nil, nil, nil))
	srv := string(h.w.server)
	date := string(h.w.dateLine)
	_, got := h.roundTrip([]byte("GET /a HTTP/1.1\r\nHost: x\r\n\r\n"), []byte(upOK))
	want := "HTTP/1.1 200 OK\r\nX-Up: a\r\nTransfer-Encoding: chunked\r\n" + srv + "\r\n" + "4\r\n[ok]\r\n1\r\n!\r\n0\r\n\r\n"
	if !strings.HasPrefix(string(got), "HTTP/1.1 200 OK\r\n") || strings.Replace(string(got), date, "", 1) != want {
		t.Fatalf("upstream answer:\n%q\nwant\n%q", got, want)
	}
	// A chunked answer in two reads.
	h.cl.out, h.up.out = h.cl.out[:0], h.up.out[:0]
	h.cl.in = append(h.cl.in, "GET /a HTTP/1.1\r\nHost: x\r\n\r\n"...)
	h.w.OnTraffic(h.cl)
	h.up.in = append(h.up.in, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n"...)
	h.w.OnTraffic(h.up)
	h.up.in = append(h.up.in, "2\r\nde\r\n0\r\n\r\n"...)
	h.w.OnTraffic(h.up)
	if _, body, _ := strings.Cut(string(h.cl.out), "\r\n\r\n"); body != "5\r\n[abc]\r\n4\r\n[de]\r\n1\r\n!\r\n0\r\n\r\n" {
		t.Fatalf("chunked answer:\n%q", h.cl.out)
	}
	if !strings.Contains(string(h.cl.out), "\r\nTransfer-Encoding: chunked\r\n") || strings.Count(string(h.cl.out), "Transfer-Encoding") != 1 {
		t.Fatalf("chunked answer head:\n%q", h.cl.out)
	}
	// A plugin's answer: the length of what body_filter made of it.
	_, got = h.roundTrip([]byte("GET /exit HTTP/1.1\r\nHost: x\r\n\r\n"), nil)
	if !strings.HasPrefix(string(got), "HTTP/1.1 403 Forbidden\r\n") || !strings.HasSuffix(string(got), "\r\nContent-Length: 5\r\n"+srv+"\r\n[no]!") {
		t.Fatalf("exit answer:\n%q", got)
	}
	// HTTP/1.0: the body as it is, delimited by the close.
	_, got = h.roundTrip([]byte("GET /a HTTP/1.0\r\nHost: x\r\nConnection: keep-alive\r\n\r\n"), []byte(upOK))
	if !strings.HasSuffix(string(got), "\r\nConnection: close\r\n\r\n[ok]!") || strings.Contains(string(got), "Content-Length") {
		t.Fatalf("HTTP/1.0 answer:\n%q", got)
	}
	// An answer the upstream ends by closing: the last piece and chunk
	// follow the close.
	h, _ = pluginHarness(t, pluginSpec(t, []string{
		`{"id":"r1","uri":"/a","plugins":{"p-body":{}},"upstream":{"nodes":{"127.0.0.1:1980":1}}}`,
	}, nil, nil, nil))
	h.roundTrip([]byte("GET /a HTTP/1.1\r\nHost: x\r\n\r\n"), []byte("HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nxy"))
	h.up.loop.peerClosed(h.up)
	if _, body, _ := strings.Cut(string(h.cl.out), "\r\n\r\n"); body != "4\r\n[xy]\r\n1\r\n!\r\n0\r\n\r\n" {
		t.Fatalf("close-delimited answer:\n%q", h.cl.out)
	}
	// Closed by the worker (a stop) rather than by the upstream's FIN, the
	// same answer is cut: no last piece, no last chunk, the client closed.
	h, _ = pluginHarness(t, pluginSpec(t, []string{
		`{"id":"r1","uri":"/a","plugins":{"p-body":{}},"upstream":{"nodes":{"127.0.0.1:1980":1}}}`,
	}, nil, nil, nil))
	h.roundTrip([]byte("GET /a HTTP/1.1\r\nHost: x\r\n\r\n"), []byte("HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nxy"))
	_ = h.up.loop.Close(h.up)
	if _, body, _ := strings.Cut(string(h.cl.out), "\r\n\r\n"); body != "4\r\n[xy]\r\n" || !h.cl.closed || h.cl.reset {
		t.Fatalf("close-delimited answer cut by the worker (client closed %v, reset %v):\n%q", h.cl.closed, h.cl.reset, h.cl.out)
	}
	// To an HTTP/1.0 client the close ends the body: the cut is a reset,
	// and the clean end a close.
	for _, cut := range []bool{true, false} {
		h, _ = pluginHarness(t, pluginSpec(t, []string{
			`{"id":"r1","uri":"/a","plugins":{"p-body":{}},"upstream":{"nodes":{"127.0.0.1:1980":1}}}`,
		}, nil, nil, nil))
		h.roundTrip([]byte("GET /a HTTP/1.0\r\nHost: x\r\n\r\n"), []byte("HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nxy"))
		if cut {
			_ = h.up.loop.Close(h.up)
		} else {
			h.up.loop.peerClosed(h.up)
		}
		want := "[xy]"
		if !cut {
			want += "!"
		}
		if _, body, _ := strings.Cut(string(h.cl.out), "\r\n\r\n"); body != want || !h.cl.closed || h.cl.reset != cut {
			t.Fatalf("HTTP/1.0, cut %v: client closed %v, reset %v:\n%q", cut, h.cl.closed, h.cl.reset, h.cl.out)
		}
	}
	// The upstream's codings other than chunked stay, chunked after them.
	for _, tc := range []struct{ up, want string }{
		{"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\nConnection: close\r\n\r\nxy", "\r\nTransfer-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n"},
		{"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n2\r\nxy\r\n0\r\n\r\n", "\r\nTransfer-Encoding: gzip, chunked\r\n"},
	} {
		h, _ = pluginHarness(t, pluginSpec(t, []string{
			`{"id":"r1","uri":"/a","plugins":{"p-body":{}},"upstream":{"nodes":{"127.0.0.1:1980":1}}}`,
		}, nil, nil, nil))
		h.roundTrip([]byte("GET /a HTTP/1.1\r\nHost: x\r\n\r\n"), []byte(tc.up))
		if !strings.Contains(string(h.cl.out), tc.want) || strings.Count(string(h.cl.out), "Transfer-Encoding") != strings.Count(tc.want, "Transfer-Encoding") {
			t.Fatalf("upstream codings %q: head\n%q", tc.up, h.cl.out)
		}
	}
}

// TestEditsSurviveRetry: on real sockets, a request whose first node
// refuses the connection is sent again to the next node with the plugins'
// edits (method, target, Host, headers) as the first attempt had them.
func TestEditsSurviveRetry(t *testing.T) {
	dead := unusedAddr(t)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "%s %s host=%s ua=%s add=%s accept=%q", r.Method, r.RequestURI, r.Host, r.UserAgent(), r.Header.Get("X-Add"), r.Header.Get("Accept"))
	}))
	defer up.Close()
	host, port, _ := net.SplitHostPort(dead)
	uhost, uport, _ := net.SplitHostPort(up.Listener.Addr().String())
	s := pluginSpec(t, []string{fmt.Sprintf(`{"id":"r1","uri":"/a","plugins":{"p-hi":{"up_uri":"/b?x=1","up_method":"PUT",`+
		`"up_host":"edited.example","req_set":{"User-Agent":"edited"},"req_add":["X-Add=1"],"req_del":["Accept"]}},`+
		`"upstream":{"retries":1,"nodes":[{"host":%q,"port":%s,"weight":1,"priority":1},{"host":%q,"port":%s,"weight":1}]}}`,
		host, port, uhost, uport)}, nil, nil, nil)
	w, _ := runWorker(t, Config{}, &spec.Spec{})
	rec := &recorder{}
	snap, err := compile(s, router.HostURI, upstreamEnv{}, pluginSet{reg: probeRegistry(rec), env: w.cfg.Plugins}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	w.SetSnapshot(snap)
	req, _ := http.NewRequest("GET", "http://"+w.Addr().String()+"/a", nil)
	req.Header.Set("Accept", "text/plain")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	want := `PUT /b?x=1 host=edited.example ua=edited add=1 accept=""`
	if resp.StatusCode != 200 || string(b) != want || resp.Header.Get("X-APISIX-Upstream-Status") != "" {
		t.Fatalf("got %d %q, want 200 %q", resp.StatusCode, b, want)
	}
}

// TestAwait: a plugin's Await parks the request (csAwait) with its head
// kept; the Wake brings it back on the loop, where the plugin's Resume
// runs and the phases go on with the next plugin, then the request goes
// upstream, or is answered when Resume exits. Pipelined requests wait
// their turn; a request whose client left is abandoned, and one that
// waits past awaitLimit gets 504.
func TestAwait(t *testing.T) {
	h, rec := pluginHarness(t, pluginSpec(t, []string{
		`{"id":"r1","uri":"/a","plugins":{"p-hi":{"await":1},"p-lo":{"req_set":{"X-Lo":"1"}}},"upstream":{"nodes":{"127.0.0.1:1980":1}}}`,
		`{"id":"r2","uri":"/b","plugins":{"p-hi":{"await":2,"await_exit":429,"body":"slow down"},"p-lo":{}},"upstream":{"nodes":{"127.0.0.1:1980":1}}}`,
	}, nil, nil, nil))
	loop := h.cl.loop
	up, got := h.roundTrip([]byte("POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nhi"), nil)
	cc := h.cl.ctx.(*clientConn)
	if len(got) != 0 || len(up) != 0 || cc.state != csAwait {
		t.Fatalf("went on at once (state %d): upstream %q, client %q", cc.state, up, got)
	}
	if d := cmp.Diff([]string{"p-hi:rewrite", "p-lo:rewrite", "p-hi:access"}, rec.events); d != "" {
		t.Fatalf("phases before the wake (-want +got):\n%s", d)
	}
	loop.runQueued()
	if d := cmp.Diff([]string{"p-hi:rewrite", "p-lo:rewrite", "p-hi:access", "p-hi:resume", "p-lo:access",
		"p-hi:before_proxy", "p-lo:before_proxy"}, rec.events); d != "" {
		t.Fatalf("phases (-want +got):\n%s", d)
	}
	want := "POST /a HTTP/1.1\r\nHost: x\r\n"
	if !bytes.HasPrefix(h.up.out, []byte(want)) || !bytes.Contains(h.up.out, []byte("\r\nX-Lo: 1\r\n")) ||
		!bytes.HasSuffix(h.up.out, []byte("\r\n\r\nhi")) || cc.state != csProxy {
		t.Fatalf("upstream got (state %d): %q", cc.state, h.up.out)
	}
	h.up.in = append(h.up.in, upOK...)
	h.w.OnTraffic(h.up)
	if !bytes.HasPrefix(h.cl.out, []byte("HTTP/1.1 200 OK\r\n")) || !bytes.HasSuffix(h.cl.out, []byte("\r\n\r\nok")) || cc.state != csIdle {
		t.Fatalf("answer (state %d): %q", cc.state, h.cl.out)
	}

	// Two Awaits in a row, then an Exit from Resume; the pipelined
	// request behind waits for that answer, then goes through.
	rec.reset()
	h.up.out, h.cl.out = h.up.out[:0], h.cl.out[:0]
	h.cl.in = append(h.cl.in, "GET /b HTTP/1.1\r\nHost: x\r\n\r\nGET /a HTTP/1.1\r\nHost: y\r\n\r\n"...)
	h.w.OnTraffic(h.cl)
	if len(h.cl.out) != 0 || cc.state != csAwait {
		t.Fatalf("answered at once (state %d): %q", cc.state, h.cl.out)
	}
	loop.runQueued()
	if !bytes.HasPrefix(h.cl.out, []byte("HTTP/1.1 429 Too Many Requests\r\n")) || !bytes.Contains(h.cl.out, []byte("\r\n\r\nslow down")) {
		t.Fatalf("answer: %q", h.cl.out)
	}
	if !bytes.HasPrefix(h.up.out, []byte("GET /a HTTP/1.1\r\nHost: y\r\n")) || cc.state != csProxy {
		t.Fatalf("the pipelined request (state %d): upstream got %q", cc.state, h.up.out)
	}
	if d := cmp.Diff([]string{"p-hi:rewrite", "p-lo:rewrite", "p-hi:access", "p-hi:resume", "p-hi:resume",
		"p-hi:header_filter", "p-lo:header_filter", "p-hi:log", "p-lo:log",
		"p-hi:rewrite", "p-lo:rewrite", "p-hi:access"}, rec.events[:12]); d != "" {
		t.Fatalf("phases (-want +got):\n%s", d)
	}
	h.up.in = append(h.up.in, upOK...)
	h.w.OnTraffic(h.up)

	// The client leaves while its request waits: the Wake abandons it.
	rec.reset()
	h.cl.out = h.cl.out[:0]
	h.cl.in = append(h.cl.in, "GET /a HTTP/1.1\r\nHost: x\r\n\r\n"...)
	h.w.OnTraffic(h.cl)
	_ = loop.Close(h.cl)
	loop.runQueued()
	if len(h.cl.out) != 0 || rec.events[len(rec.events)-1] != "p-hi:abandon" {
		t.Fatalf("after the close: wrote %q, phases %q", h.cl.out, rec.events)
	}
}

// TestAwaitLimit: a request whose plugin's operation never wakes it gets
// 504 after awaitLimit, and the late Wake is abandoned.
func TestAwaitLimit(t *testing.T) {
	h, rec := pluginHarness(t, pluginSpec(t, []string{
		`{"id":"r1","uri":"/a","plugins":{"p-hi":{"await":1}},"upstream":{"nodes":{"127.0.0.1:1980":1}}}`,
	}, nil, nil, nil))
	_, _ = h.roundTrip([]byte("GET /a HTTP/1.1\r\nHost: x\r\n\r\n"), nil)
	loop := h.cl.loop
	late := loop.queued
	loop.queued = nil
	h.w.now += int64(awaitLimit)
	h.w.expireDeadlines()
	if !bytes.HasPrefix(h.cl.out, []byte("HTTP/1.1 504 Gateway Time-out\r\n")) || !h.cl.closed {
		t.Fatalf("after awaitLimit: %q (closed %v)", h.cl.out, h.cl.closed)
	}
	loop.queued = late
	loop.runQueued()
	if rec.events[len(rec.events)-1] != "p-hi:abandon" {
		t.Fatalf("phases %q", rec.events)
	}
}

// TestExitRedirectPage: a plugin's redirection without a body gets
// nginx's page for it, titled as nginx titles it ("302 Found" under the
// status line's "Moved Temporarily").
func TestExitRedirectPage(t *testing.T) {
	h, _ := pluginHarness(t, pluginSpec(t, []string{
		`{"id":"r1","uri":"/a","plugins":{"p-hi":{"exit_at":"rewrite","exit":302}}}`,
		`{"id":"r2","uri":"/b","plugins":{"p-hi":{"exit_at":"rewrite","exit":308}}}`,
	}, nil, nil, nil))
	for path, want := range map[string][2]string{
		"/a": {"HTTP/1.1 302 Moved Temporarily\r\n", "<head><title>302 Found</title></head>"},
		"/b": {"HTTP/1.1 308 Permanent Redirect\r\n", "<center><h1>308 Permanent Redirect</h1></center>"},
	} {
		_, got := h.roundTrip([]byte("GET "+path+" HTTP/1.1\r\nHost: x\r\n\r\n"), nil)
		if !bytes.HasPrefix(got, []byte(want[0])) || !bytes.Contains(got, []byte("Content-Type: text/html; charset=utf-8\r\n")) ||
			!bytes.Contains(got, []byte(want[1])) {
			t.Errorf("GET %s:\n%q\nwant %q and %q", path, got, want[0], want[1])
		}
	}
}

// TestResponseHeader: in header_filter, Ctx.ResponseHeader reads a field
// a plugin set, else the upstream's, else one a plugin added; a local
// answer has no upstream fields.
func TestResponseHeader(t *testing.T) {
	h, rec := pluginHarness(t, pluginSpec(t, []string{
		`{"id":"r1","uri":"/a","plugins":{"p-hi":{"hf_header":{"Server":"set"},"hf_add":["X-Up=b","X-New=n"]},` +
			`"p-lo":{"hf_read":["x-up","SERVER","X-New","Content-Length","X-None"]}},"upstream":{"nodes":{"127.0.0.1:1980":1}}}`,
		`{"id":"r2","uri":"/b","plugins":{"p-hi":{"exit_at":"access","exit":403},"p-lo":{"hf_read":["X-Up","Content-Type"]}}}`,
	}, nil, nil, nil))
	if _, got := h.roundTrip([]byte("GET /a HTTP/1.1\r\nHost: x\r\n\r\n"), []byte(upOK)); !bytes.HasSuffix(got, []byte("ok")) {
		t.Fatalf("answer %q", got)
	}
	if want := "x-up=a;SERVER=set;X-New=n;Content-Length=2;X-None=nil;"; string(rec.seen) != want {
		t.Fatalf("seen %q, want %q", rec.seen, want)
	}
	rec.reset()
	h.roundTrip([]byte("GET /b HTTP/1.1\r\nHost: x\r\n\r\n"), nil)
	if want := "X-Up=nil;Content-Type=nil;"; string(rec.seen) != want {
		t.Fatalf("local answer: seen %q, want %q", rec.seen, want)
	}
}
