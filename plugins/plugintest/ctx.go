package plugintest

import (
	"strings"
	"testing"
	"time"

	"coregate/plugins"
)

// Header is one header line.
type Header struct {
	Name  string
	Value []byte
}

// Ctx is a fake plugins.Ctx: one request, made by NewCtx and its With
// methods, and what the phases did with it. A Ctx is reused across runs
// with Reset, which keeps the request and the capacity of the results, so
// that a run allocates nothing of its own. Not safe for concurrent use.
type Ctx struct {
	method, path, query []byte
	headers             []Header
	vars                map[string][]byte
	routeID             string
	routeIDb            []byte // routeID, for Var("route_id")

	// Clock is what Now answers: the time of NewCtx unless set.
	Clock int64

	// UpstreamStatus and UpstreamBody are the answer Run gets from "the
	// upstream" when no plugin exits: 200 and no body unless set.
	UpstreamStatus int
	UpstreamBody   []byte

	// Results, cleared by Reset.
	exited     bool
	exitStatus int
	exitBody   []byte
	status     int
	respHeader []Header
	// Body is what the client got as the response body (after body_filter).
	Body []byte
	// Upstream reports whether the request reached the upstream.
	Upstream bool
	// ExitDelay is the delay of the last ExitAfter (0 for Exit).
	ExitDelay time.Duration
	// Delayed is the sum of the Delay calls: how long the request would
	// be held before going upstream (Run does not wait).
	Delayed time.Duration

	// The upstream request as the plugins left it (proxy-rewrite): nil
	// when unchanged. UpstreamHeaders is the request's headers with
	// SetRequestHeader and AddRequestHeader applied.
	UpstreamURI, UpstreamMethod, UpstreamHost []byte
	upHeaders                                 []Header
	upEdited                                  bool

	consumer *plugins.Consumer
	kept     []kept

	// awaiting is the Resumer of an Await in progress; woken receives
	// its Wake.
	awaiting plugins.Resumer
	woken    chan struct{}
	// Awaits counts the Await calls that were granted.
	Awaits int

	// Figures is what Exchange answers: the test sets the request's times
	// and sizes for the log phase.
	Figures plugins.Exchange
}

type kept struct {
	owner any
	v     uint64
}

var _ plugins.Ctx = (*Ctx)(nil)

// NewCtx makes a request of method to target (path and query), from
// remote_addr 127.0.0.1, matched by route "1".
func NewCtx(method, target string) *Ctx {
	c := &Ctx{method: []byte(method), routeID: "1", routeIDb: []byte("1"), Clock: time.Now().UnixNano(), vars: map[string][]byte{"remote_addr": []byte("127.0.0.1")}}
	path, query, ok := strings.Cut(target, "?")
	c.path = []byte(path)
	if ok {
		c.query = []byte(query)
	}
	return c
}

// WithHeader adds a request header.
func (c *Ctx) WithHeader(name, value string) *Ctx {
	c.headers = append(c.headers, Header{Name: name, Value: []byte(value)})
	return c
}

// WithVar sets a variable (remote_addr, or any other Var answers).
func (c *Ctx) WithVar(name, value string) *Ctx {
	c.vars[name] = []byte(value)
	return c
}

// WithRoute sets the matched route's id.
func (c *Ctx) WithRoute(id string) *Ctx {
	c.routeID, c.routeIDb = id, []byte(id)
	if id == "" {
		c.routeIDb = nil
	}
	return c
}

// Reset clears what the last run did, keeping the request.
func (c *Ctx) Reset() {
	c.exited, c.exitStatus, c.status, c.Upstream = false, 0, 0, false
	c.exitBody = c.exitBody[:0]
	c.respHeader = c.respHeader[:0]
	c.Body = c.Body[:0]
	c.ExitDelay, c.Delayed = 0, 0
	c.UpstreamURI, c.UpstreamMethod, c.UpstreamHost = c.UpstreamURI[:0], c.UpstreamMethod[:0], c.UpstreamHost[:0]
	c.upHeaders, c.upEdited = c.upHeaders[:0], false
	c.consumer = nil
	clear(c.kept)
	c.kept = c.kept[:0]
	c.awaiting, c.Awaits = nil, 0
}

// Method implements plugins.Ctx.
func (c *Ctx) Method() []byte { return c.method }

// Path implements plugins.Ctx.
func (c *Ctx) Path() []byte { return c.path }

// Query implements plugins.Ctx.
func (c *Ctx) Query() []byte { return c.query }

// RouteID implements plugins.Ctx.
func (c *Ctx) RouteID() string { return c.routeID }

// Now implements plugins.Ctx.
func (c *Ctx) Now() int64 { return c.Clock }

// Header implements plugins.Ctx.
func (c *Ctx) Header(name string) []byte {
	for i := range c.headers {
		if strings.EqualFold(c.headers[i].Name, name) {
			return c.headers[i].Value
		}
	}
	return nil
}

// Var implements plugins.Ctx: a variable set with WithVar, uri,
// request_method, route_id (WithRoute), args and query_string, arg_<name>
// from them and http_<name> from the headers (with '_' for '-'). args is
// the query of the target SetUpstreamURI set, as the worker's: a plugin
// that edits the arguments (key-auth's hide_credentials) edits them for
// the plugins after it.
func (c *Ctx) Var(name string) []byte {
	if v, ok := c.vars[name]; ok {
		return v
	}
	switch {
	case name == "uri":
		return c.path
	case name == "request_method":
		return c.method
	case name == "route_id":
		return c.routeIDb
	case name == "args" || name == "query_string":
		return c.args()
	case strings.HasPrefix(name, "arg_"):
		return arg(c.args(), name[len("arg_"):])
	case strings.HasPrefix(name, "http_"):
		want := name[len("http_"):]
		for i := range c.headers {
			if headerVarEqual(c.headers[i].Name, want) {
				return c.headers[i].Value
			}
		}
	}
	return nil
}

// args is $args: the query of the target SetUpstreamURI set, the
// request's when none; nil when empty.
func (c *Ctx) args() []byte {
	if len(c.UpstreamURI) == 0 {
		return c.query
	}
	if i := indexByte(c.UpstreamURI, '?'); i >= 0 && i+1 < len(c.UpstreamURI) {
		return c.UpstreamURI[i+1:]
	}
	return nil
}

// arg is the value of the first query argument name (raw, not unescaped).
func arg(q []byte, name string) []byte {
	for len(q) > 0 {
		var kv []byte
		if i := indexByte(q, '&'); i >= 0 {
			kv, q = q[:i], q[i+1:]
		} else {
			kv, q = q, nil
		}
		k, v := kv, []byte(nil)
		if i := indexByte(kv, '='); i >= 0 {
			k, v = kv[:i], kv[i+1:]
		}
		if string(k) == name {
			if v == nil {
				v = kv[len(kv):]
			}
			return v
		}
	}
	return nil
}

func indexByte(b []byte, c byte) int {
	for i := range b {
		if b[i] == c {
			return i
		}
	}
	return -1
}

// headerVarEqual compares a header name with the tail of an http_ variable
// as nginx does: case-insensitively, '-' in the header for '_'.
func headerVarEqual(header, v string) bool {
	if len(header) != len(v) {
		return false
	}
	for i := 0; i < len(v); i++ {
		h, w := lower(header[i]), lower(v[i])
		if h == '-' {
			h = '_'
		}
		if h != w {
			return false
		}
	}
	return true
}

func lower(b byte) byte {
	if 'A' <= b && b <= 'Z' {
		return b + 'a' - 'A'
	}
	return b
}

// Exit implements plugins.Ctx.
func (c *Ctx) Exit(status int, body []byte) {
	c.exited, c.exitStatus = true, status
	c.exitBody = append(c.exitBody[:0], body...)
}

// Exited implements plugins.Ctx.
func (c *Ctx) Exited() bool { return c.exited }

// ExitStatus is the status of the last Exit (0: none).
func (c *Ctx) ExitStatus() int { return c.exitStatus }

// SetResponseHeader implements plugins.Ctx.
func (c *Ctx) SetResponseHeader(name string, value []byte) {
	for i := range c.respHeader {
		if strings.EqualFold(c.respHeader[i].Name, name) {
			c.respHeader[i].Value = append(c.respHeader[i].Value[:0], value...)
			return
		}
	}
	n := len(c.respHeader)
	if n < cap(c.respHeader) {
		c.respHeader = c.respHeader[:n+1]
	} else {
		c.respHeader = append(c.respHeader, Header{})
	}
	h := &c.respHeader[n]
	h.Name = name
	h.Value = append(h.Value[:0], value...)
}

// ResponseHeader is a header set with SetResponseHeader; nil when none.
func (c *Ctx) ResponseHeader(name string) []byte {
	for i := range c.respHeader {
		if strings.EqualFold(c.respHeader[i].Name, name) {
			return c.respHeader[i].Value
		}
	}
	return nil
}

// Status implements plugins.Ctx.
func (c *Ctx) Status() int { return c.status }

// ExitAfter implements plugins.Ctx: Exit, with the delay recorded in
// ExitDelay (Run does not wait).
func (c *Ctx) ExitAfter(d time.Duration, status int, body []byte) {
	c.Exit(status, body)
	c.ExitDelay = d
}

// Delay implements plugins.Ctx: the delay is added to Delayed.
func (c *Ctx) Delay(d time.Duration) {
	if d > 0 && !c.exited {
		c.Delayed += d
	}
}

// SetUpstreamURI implements plugins.Ctx.
func (c *Ctx) SetUpstreamURI(uri []byte) { c.UpstreamURI = append(c.UpstreamURI[:0], uri...) }

// SetUpstreamMethod implements plugins.Ctx.
func (c *Ctx) SetUpstreamMethod(m []byte) { c.UpstreamMethod = append(c.UpstreamMethod[:0], m...) }

// SetUpstreamHost implements plugins.Ctx.
func (c *Ctx) SetUpstreamHost(h []byte) { c.UpstreamHost = append(c.UpstreamHost[:0], h...) }

// editHeaders starts the upstream headers from the request's, once per run.
func (c *Ctx) editHeaders() {
	if c.upEdited {
		return
	}
	c.upEdited = true
	for _, h := range c.headers {
		c.addUp(h.Name, h.Value)
	}
}

func (c *Ctx) addUp(name string, value []byte) {
	n := len(c.upHeaders)
	if n < cap(c.upHeaders) {
		c.upHeaders = c.upHeaders[:n+1]
	} else {
		c.upHeaders = append(c.upHeaders, Header{})
	}
	h := &c.upHeaders[n]
	h.Name = name
	h.Value = append(h.Value[:0], value...)
}

// SetRequestHeader implements plugins.Ctx.
func (c *Ctx) SetRequestHeader(name string, value []byte) {
	c.editHeaders()
	// Compact by swapping, not copying, so that each slot keeps a value
	// buffer of its own: addUp reuses the buffers of the slots past the
	// end, which a copy would leave shared with a kept header.
	k := 0
	for i := range c.upHeaders {
		if !strings.EqualFold(c.upHeaders[i].Name, name) {
			c.upHeaders[k], c.upHeaders[i] = c.upHeaders[i], c.upHeaders[k]
			k++
		}
	}
	c.upHeaders = c.upHeaders[:k]
	if value != nil {
		c.addUp(name, value)
	}
}

// AddRequestHeader implements plugins.Ctx.
func (c *Ctx) AddRequestHeader(name string, value []byte) {
	c.editHeaders()
	c.addUp(name, value)
}

// UpstreamHeaders is the request's headers as they would go upstream:
// those of the request with the plugins' edits applied, in order.
func (c *Ctx) UpstreamHeaders() []Header {
	if !c.upEdited {
		return c.headers
	}
	return c.upHeaders
}

// UpstreamHeader is the first upstream header of that name; nil when none.
func (c *Ctx) UpstreamHeader(name string) []byte {
	for _, h := range c.UpstreamHeaders() {
		if strings.EqualFold(h.Name, name) {
			return h.Value
		}
	}
	return nil
}

// Keep implements plugins.Ctx.
func (c *Ctx) Keep(owner any, v uint64) bool {
	for i := range c.kept {
		if c.kept[i].owner == owner {
			c.kept[i].v = v
			return true
		}
	}
	if len(c.kept) == plugins.MaxKept {
		return false
	}
	c.kept = append(c.kept, kept{owner, v})
	return true
}

// Kept implements plugins.Ctx.
func (c *Ctx) Kept(owner any) (uint64, bool) {
	for i := range c.kept {
		if c.kept[i].owner == owner {
			return c.kept[i].v, true
		}
	}
	return 0, false
}

// Consumer implements plugins.Ctx.
func (c *Ctx) Consumer() *plugins.Consumer { return c.consumer }

// Exchange implements plugins.Ctx: Figures.
func (c *Ctx) Exchange() plugins.Exchange { return c.Figures }

// SetConsumer implements plugins.Ctx. The fake records the consumer; the
// merge of its plugins into the route's is the worker's, tested there.
func (c *Ctx) SetConsumer(k *plugins.Consumer) { c.consumer = k }

// Await implements plugins.Ctx: Settle (and Run, after each request
// phase call) waits for the Wake and calls Resume.
func (c *Ctx) Await(r plugins.Resumer) (plugins.Waker, bool) {
	if c.exited || c.awaiting != nil {
		return nil, false
	}
	if c.woken == nil {
		c.woken = make(chan struct{}, 1)
	}
	c.awaiting = r
	c.Awaits++
	return waker(c.woken), true
}

type waker chan struct{}

func (w waker) Wake() {
	select {
	case w <- struct{}{}:
	default:
		panic("plugintest: Wake called twice")
	}
}

// AwaitTimeout bounds Settle's wait for one Wake.
const AwaitTimeout = 10 * time.Second

// Settle completes the Awaits of the phase call that just returned: while
// one is pending it waits for its Wake (at most AwaitTimeout, else it
// reports false) and calls Resume, which may Await again.
func (c *Ctx) Settle() bool {
	for c.awaiting != nil {
		select {
		case <-c.woken:
		case <-time.After(AwaitTimeout):
			return false
		}
		r := c.awaiting
		c.awaiting = nil
		r.Resume(c)
	}
	return true
}

// Awaiting reports whether an Await waits for its Wake.
func (c *Ctx) Awaiting() bool { return c.awaiting != nil }

// Run takes c through p's phases as the worker does: rewrite, access and
// before_proxy until a plugin exits (an Await settled before the next
// plugin runs); then the answer (the exit's, or the
// upstream's: UpstreamStatus and UpstreamBody) through header_filter and
// body_filter (one piece, eof) into Body; then log. Call c.Reset between
// runs.
func Run(p *plugins.Phases, c *Ctx) {
	for _, i := range p.Rewrite {
		if c.exited {
			break
		}
		i.Rewrite(c)
		c.mustSettle()
	}
	for _, i := range p.Access {
		if c.exited {
			break
		}
		i.Access(c)
		c.mustSettle()
	}
	for _, i := range p.BeforeProxy {
		if c.exited {
			break
		}
		i.BeforeProxy(c)
		c.mustSettle()
	}
	body := c.exitBody
	if c.exited {
		c.status = c.exitStatus
	} else {
		c.Upstream = true
		c.status = c.UpstreamStatus
		if c.status == 0 {
			c.status = 200
		}
		body = c.UpstreamBody
	}
	for _, i := range p.HeaderFilter {
		i.HeaderFilter(c)
	}
	for _, i := range p.BodyFilter {
		body = i.BodyFilter(c, body, true)
	}
	c.Body = append(c.Body[:0], body...)
	for _, i := range p.Log {
		i.Log(c)
	}
}

func (c *Ctx) mustSettle() {
	if !c.Settle() {
		panic("plugintest: an Await was never woken")
	}
}

// AllocsPerRun fails t if f allocates, on average over runs (after one
// warm-up run, as testing.AllocsPerRun). Under the race detector, which
// allocates on its own, it measures nothing.
func AllocsPerRun(t testing.TB, runs int, f func()) {
	t.Helper()
	if raceEnabled {
		t.Log("race detector on: allocations not measured")
		f()
		return
	}
	if n := testing.AllocsPerRun(runs, f); n != 0 {
		t.Fatalf("allocates %.1f times per run, want 0", n)
	}
}
