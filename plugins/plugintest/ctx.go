package plugintest

import (
	"bytes"
	"encoding/json"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"coregate/httpvar"
	"coregate/plugins"
)

// Header is one header line.
type Header struct {
	Name  string
	Value []byte
	nameb []byte // Name, for RequestHeaderAt
}

// Ctx is a fake plugins.Ctx: one request, made by NewCtx and its With
// methods, and what the phases did with it. A Ctx is reused across runs
// with Reset, which keeps the request and the capacity of the results, so
// that a run allocates nothing of its own. Not safe for concurrent use.
type Ctx struct {
	method, path, query []byte
	target              []byte // $request_uri
	host                []byte // $host, from the Host header
	headers             []Header
	vars                []setVar // WithVar's
	routeID             string
	routeIDb            []byte // routeID, for Var(route_id)

	// Clock is what Now answers: the time of NewCtx unless set.
	Clock int64
	// ReqBody is what RequestBody answers: the request body, as the
	// worker reads it for a BodyReader (WithBody sets it). With
	// ReqBodyTee it is the copy the worker makes for a BodyTee as the
	// body goes upstream: RequestBody is nil until the request went
	// upstream (Upstream), and RequestBodyWhole false until then for a
	// request with a body (WithTeeBody). ReqBodyCut makes
	// RequestBodyWhole false: ReqBody is a copy cut short (WithCutBody).
	ReqBody    []byte
	ReqBodyTee bool
	ReqBodyCut bool

	// UpstreamStatus and UpstreamBody are the answer Run gets from "the
	// upstream" when no plugin exits: 200 and no body unless set.
	UpstreamStatus int
	UpstreamBody   []byte
	upResp         []Header // WithResponseHeader's

	// Results, cleared by Reset.
	exited     bool
	exitStatus int
	exitBody   []byte
	exitPage   bool // the last Exit's body was nil
	status     int
	respHeader []Header
	respSet    []string // the names SetResponseHeader replaced
	respGone   []string // the names RemoveResponseHeader removed
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
	// Chosen is the upstream of the last SetUpstream (nil: the route's).
	Chosen    plugins.Upstream
	upHeaders []Header
	upEdited  bool

	// The client's address a plugin set (SetClientAddr): realAddr, and
	// realPort when it gave one.
	realAddr, realPortSet bool
	realIP, realPort      []byte

	consumer     *plugins.Consumer
	consumerName []byte // $consumer_name
	kept         []kept

	// awaiting is the Resumer of an Await in progress; woken receives
	// its Wake.
	awaiting plugins.Resumer
	woken    chan struct{}
	// Awaits counts the Await calls that were granted.
	Awaits int

	// Figures is what Exchange answers: the test sets the request's times
	// and sizes for the log phase.
	Figures plugins.Exchange

	// setVars are the values of the variables a plugin set (SetVar), by
	// kind from httpvar.OTelTraceparent; varsSet says which. Cleared by
	// Reset.
	setVars [httpvar.NumSettable][]byte
	varsSet uint8
}

type kept struct {
	owner any
	v     uint64
}

var _ plugins.Ctx = (*Ctx)(nil)

// NewCtx makes a request of method to target (path and query), from
// remote_addr 127.0.0.1, matched by route "1".
func NewCtx(method, target string) *Ctx {
	c := &Ctx{method: []byte(method), target: []byte(target), routeID: "1", routeIDb: []byte("1"), Clock: time.Now().UnixNano()}
	c.WithVar("remote_addr", "127.0.0.1")
	path, query, ok := strings.Cut(target, "?")
	c.path = []byte(path)
	if ok {
		c.query = []byte(query)
	}
	return c
}

// WithHeader adds a request header. The first Host header is $host, as
// the worker reads it: without its port, lower-case.
func (c *Ctx) WithHeader(name, value string) *Ctx {
	c.headers = append(c.headers, Header{Name: name, Value: []byte(value), nameb: []byte(name)})
	if c.host == nil && strings.EqualFold(name, "host") {
		c.host = bytes.ToLower(httpvar.HostOnly([]byte(value)))
	}
	return c
}

// WithBody sets the request body RequestBody answers.
func (c *Ctx) WithBody(body string) *Ctx {
	c.ReqBody = []byte(body)
	return c
}

// WithTeeBody sets the request body as the worker copies it for a
// BodyTee: RequestBody answers it once the request went upstream, whole.
func (c *Ctx) WithTeeBody(body string) *Ctx {
	c.ReqBody, c.ReqBodyTee = []byte(body), true
	return c
}

// WithCutBody is WithTeeBody with a copy cut short: RequestBodyWhole
// reports false.
func (c *Ctx) WithCutBody(body string) *Ctx {
	c.ReqBody, c.ReqBodyTee, c.ReqBodyCut = []byte(body), true, true
	return c
}

// RequestBody implements plugins.Ctx.
func (c *Ctx) RequestBody() []byte {
	if c.ReqBodyTee && !c.Upstream {
		return nil
	}
	return c.ReqBody
}

// RequestBodyWhole implements plugins.Ctx: false for a copy cut short, or
// one whose request has not gone upstream yet.
func (c *Ctx) RequestBodyWhole() bool {
	if c.ReqBodyTee && !c.Upstream {
		return len(c.ReqBody) == 0
	}
	return !c.ReqBodyCut
}

// WithResponseHeader adds a header to the upstream's answer (with
// UpstreamStatus and UpstreamBody), which ResponseHeader sees from
// header_filter on when no plugin exits.
func (c *Ctx) WithResponseHeader(name, value string) *Ctx {
	c.upResp = append(c.upResp, Header{Name: name, Value: []byte(value), nameb: []byte(name)})
	return c
}

// WithVar sets a variable, named as httpvar.Parse reads it, whatever the
// request says: remote_addr, server_port, an exchange variable the fake
// has no state for (route_name, service_id, matched_uri, upstream_addr,
// ...) or any name, known or not.
func (c *Ctx) WithVar(name, value string) *Ctx {
	v := httpvar.Parse(name)
	for i := range c.vars {
		if c.vars[i].v == v {
			c.vars[i].val = []byte(value)
			return c
		}
	}
	c.vars = append(c.vars, setVar{v, []byte(value)})
	return c
}

// setVar is a variable set with WithVar.
type setVar struct {
	v   httpvar.Var
	val []byte
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
	c.exited, c.exitStatus, c.exitPage, c.status, c.Upstream = false, 0, false, 0, false
	c.exitBody = c.exitBody[:0]
	c.respHeader, c.respSet, c.respGone = c.respHeader[:0], c.respSet[:0], c.respGone[:0]
	c.varsSet = 0
	c.Body = c.Body[:0]
	c.ExitDelay, c.Delayed = 0, 0
	c.UpstreamURI, c.UpstreamMethod, c.UpstreamHost = c.UpstreamURI[:0], c.UpstreamMethod[:0], c.UpstreamHost[:0]
	c.Chosen = nil
	c.upHeaders, c.upEdited = c.upHeaders[:0], false
	c.consumer = nil
	c.realAddr, c.realPortSet = false, false
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

// HeaderAt implements plugins.Ctx.
func (c *Ctx) HeaderAt(name string, i int) ([]byte, bool) {
	for j := range c.headers {
		if strings.EqualFold(c.headers[j].Name, name) {
			if i == 0 {
				return c.headers[j].Value, true
			}
			i--
		}
	}
	return nil, false
}

// RequestHeaderAt implements plugins.Ctx: the headers WithHeader added,
// in order.
func (c *Ctx) RequestHeaderAt(i int) (name, value []byte, ok bool) {
	if i < 0 || i >= len(c.headers) {
		return nil, nil, false
	}
	return c.headers[i].nameb, c.headers[i].Value, true
}

// Var implements plugins.Ctx, on httpvar's table as the worker reads it: a
// variable set with WithVar; else the request's (uri is the path as
// given, not normalised; host is the Host header's; server_name is "_"
// and hostname the machine's, as the worker's; server_port and
// server_addr are unset unless set), route_id (WithRoute) and consumer_name (SetConsumer); nil
// for the other exchange variables and the log's. args is the query of
// the target SetUpstreamURI set, as the worker's: a plugin that edits the
// arguments (key-auth's hide_credentials) edits them for the plugins
// after it.
func (c *Ctx) Var(v httpvar.Var) []byte {
	switch {
	case c.realAddr && v.Kind == httpvar.RemoteAddr:
		return c.realIP
	case c.realPortSet && v.Kind == httpvar.RemotePort:
		return c.realPort
	case v.Kind.Settable():
		if i := v.Kind - httpvar.OTelTraceparent; c.varsSet&(1<<i) != 0 {
			return c.setVars[i]
		}
	}
	for i := range c.vars {
		if x := &c.vars[i]; x.v.Kind == v.Kind && x.v.Name == v.Name {
			return x.val
		}
	}
	switch v.Kind {
	case httpvar.URI:
		return c.path
	case httpvar.RequestURI:
		return c.target
	case httpvar.Args:
		return c.args()
	case httpvar.Host:
		if len(c.host) > 0 {
			return c.host
		}
	case httpvar.RequestMethod:
		return c.method
	case httpvar.Scheme:
		return scheme
	case httpvar.ServerName:
		return serverName
	case httpvar.Hostname:
		return hostname()
	case httpvar.Arg:
		val, _ := httpvar.QueryArg(c.args(), v.Name)
		return val
	case httpvar.HTTP:
		for i := range c.headers {
			if httpvar.HeaderIs(c.headers[i].Name, v.Name) {
				if c.headers[i].Value == nil {
					return noValue
				}
				return c.headers[i].Value
			}
		}
	case httpvar.Cookie:
		for i := range c.headers {
			if strings.EqualFold(c.headers[i].Name, "cookie") {
				if val, ok := httpvar.CookieValue(c.headers[i].Value, v.Name); ok {
					return val
				}
			}
		}
	case httpvar.RouteID:
		return c.routeIDb
	case httpvar.ConsumerName:
		if c.consumer != nil {
			return c.consumerName
		}
	}
	return nil
}

var (
	scheme     = []byte("http")
	serverName = []byte("_")
	noValue    = []byte{}
)

// hostname is $hostname, the machine's host name as the worker reads it
// once; nil when it cannot be read.
var hostname = sync.OnceValue(func() []byte {
	if h, err := os.Hostname(); err == nil {
		return []byte(h)
	}
	return nil
})

// args is $args: the query of the target SetUpstreamURI set, the
// request's when none; nil when empty.
func (c *Ctx) args() []byte {
	if len(c.UpstreamURI) == 0 {
		return c.query
	}
	if i := bytes.IndexByte(c.UpstreamURI, '?'); i >= 0 && i+1 < len(c.UpstreamURI) {
		return c.UpstreamURI[i+1:]
	}
	return nil
}

// SetVar implements plugins.Ctx as the worker: a settable variable
// (httpvar.Kind.Settable) keeps a copy of value, which Var answers until
// Reset; others are ignored.
func (c *Ctx) SetVar(v httpvar.Var, value []byte) {
	if !v.Kind.Settable() {
		return
	}
	i := v.Kind - httpvar.OTelTraceparent
	c.setVars[i] = append(c.setVars[i][:0], value...)
	c.varsSet |= 1 << i
}

// Exit implements plugins.Ctx.
func (c *Ctx) Exit(status int, body []byte) {
	c.exited, c.exitStatus, c.exitPage = true, status, body == nil
	c.exitBody = append(c.exitBody[:0], body...)
}

// ExitPage reports whether the last Exit gave no body (nil): the worker
// answers with its page for the status.
func (c *Ctx) ExitPage() bool { return c.exited && c.exitPage }

// Exited implements plugins.Ctx.
func (c *Ctx) Exited() bool { return c.exited }

// ExitStatus is the status of the last Exit (0: none).
func (c *Ctx) ExitStatus() int { return c.exitStatus }

// SetResponseHeader implements plugins.Ctx: it replaces every header of
// that name set or added before.
func (c *Ctx) SetResponseHeader(name string, value []byte) {
	k, found := 0, false
	for i := range c.respHeader {
		if !strings.EqualFold(c.respHeader[i].Name, name) || !found {
			if strings.EqualFold(c.respHeader[i].Name, name) {
				found = true
				c.respHeader[i].Value = append(c.respHeader[i].Value[:0], value...)
			}
			c.respHeader[k], c.respHeader[i] = c.respHeader[i], c.respHeader[k]
			k++
		}
	}
	c.respHeader = c.respHeader[:k]
	if !found {
		c.addResp(name, value)
	}
	c.respSet = append(c.respSet, name)
}

// AddResponseHeader implements plugins.Ctx.
func (c *Ctx) AddResponseHeader(name string, value []byte) { c.addResp(name, value) }

func (c *Ctx) addResp(name string, value []byte) {
	n := len(c.respHeader)
	if n < cap(c.respHeader) {
		c.respHeader = c.respHeader[:n+1]
	} else {
		c.respHeader = append(c.respHeader, Header{})
	}
	h := &c.respHeader[n]
	h.Name = name
	h.nameb = append(h.nameb[:0], name...)
	h.Value = append(h.Value[:0], value...)
}

// RemoveResponseHeader implements plugins.Ctx: the headers of that name
// set or added before go, and ResponseHeader no longer sees the
// upstream's.
func (c *Ctx) RemoveResponseHeader(name string) {
	k := 0
	for i := range c.respHeader {
		if !strings.EqualFold(c.respHeader[i].Name, name) {
			c.respHeader[k], c.respHeader[i] = c.respHeader[i], c.respHeader[k]
			k++
		}
	}
	c.respHeader = c.respHeader[:k]
	c.respGone = append(c.respGone, name)
}

// ResponseHeader implements plugins.Ctx, as the worker: the header a
// plugin set with SetResponseHeader, else the upstream's
// (WithResponseHeader, when the answer is the upstream's), else the
// first one added with AddResponseHeader; nil when none. After Run, it
// reads the response's headers the same way.
func (c *Ctx) ResponseHeader(name string) []byte {
	var own []byte
	for i := range c.respHeader {
		if strings.EqualFold(c.respHeader[i].Name, name) {
			own = c.respHeader[i].Value
			break
		}
	}
	if own != nil {
		for _, s := range c.respSet {
			if strings.EqualFold(s, name) {
				return own
			}
		}
	}
	if own == nil {
		for _, s := range c.respGone {
			if strings.EqualFold(s, name) {
				return nil
			}
		}
	}
	if c.Upstream {
		for i := range c.upResp {
			if strings.EqualFold(c.upResp[i].Name, name) {
				return c.upResp[i].Value
			}
		}
	}
	return own
}

// ResponseHeaderAt implements plugins.Ctx, as the worker's head reads
// (without its own Date, Server and framing fields): the upstream's
// headers (WithResponseHeader, when the answer is the upstream's) but
// those a plugin set or removed, then those set or added, in order. It
// answers in every phase, where the worker's answers in log only.
func (c *Ctx) ResponseHeaderAt(i int) (name, value []byte, ok bool) {
	if i < 0 {
		return nil, nil, false
	}
	if c.Upstream {
		for k := range c.upResp {
			h := &c.upResp[k]
			if c.replaced(h.Name) {
				continue
			}
			if i == 0 {
				return h.nameb, h.Value, true
			}
			i--
		}
	}
	if i < len(c.respHeader) {
		return c.respHeader[i].nameb, c.respHeader[i].Value, true
	}
	return nil, nil, false
}

// replaced reports whether a plugin set or removed the response header
// name, which then hides the upstream's.
func (c *Ctx) replaced(name string) bool {
	for _, s := range c.respSet {
		if strings.EqualFold(s, name) {
			return true
		}
	}
	for _, s := range c.respGone {
		if strings.EqualFold(s, name) {
			return true
		}
	}
	return false
}

// ResponseBody implements plugins.Ctx: the body the client got (Body),
// whole, where the worker's stops at the readers' limit; nil when empty.
func (c *Ctx) ResponseBody() []byte {
	if len(c.Body) == 0 {
		return nil
	}
	return c.Body
}

// ResponseHeaderValues are the values of every header of that name set or
// added, in order.
func (c *Ctx) ResponseHeaderValues(name string) []string {
	var out []string
	for i := range c.respHeader {
		if strings.EqualFold(c.respHeader[i].Name, name) {
			out = append(out, string(c.respHeader[i].Value))
		}
	}
	return out
}

// WithStatus makes status the answer's (the upstream's, as a request
// that was proxied has it before header_filter and log), where SetStatus
// is a plugin's change of it.
func (c *Ctx) WithStatus(status int) *Ctx {
	c.status = status
	return c
}

// Status implements plugins.Ctx.
func (c *Ctx) Status() int { return c.status }

// SetStatus implements plugins.Ctx as the worker: Status, and the status
// Run's answer ends with, become status (200 to 599, not 204 or 304),
// unless the answer's is 1xx, 204 or 304.
func (c *Ctx) SetStatus(status int) {
	if status < 200 || status > 599 || status == 204 || status == 304 {
		return
	}
	if s := c.status; s < 200 || s == 204 || s == 304 {
		return
	}
	c.status = status
}

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

// SetClientAddr implements plugins.Ctx: $remote_addr, and $remote_port
// when port is not 0, read the address given until Reset.
func (c *Ctx) SetClientAddr(ip netip.Addr, port uint16) {
	if !ip.IsValid() {
		return
	}
	c.realIP, c.realAddr = ip.Unmap().AppendTo(c.realIP[:0]), true
	if port != 0 {
		c.realPort, c.realPortSet = strconv.AppendUint(c.realPort[:0], uint64(port), 10), true
	}
}

// SetUpstreamURI implements plugins.Ctx.
func (c *Ctx) SetUpstreamURI(uri []byte) { c.UpstreamURI = append(c.UpstreamURI[:0], uri...) }

// SetUpstreamMethod implements plugins.Ctx.
func (c *Ctx) SetUpstreamMethod(m []byte) { c.UpstreamMethod = append(c.UpstreamMethod[:0], m...) }

// SetUpstreamHost implements plugins.Ctx.
func (c *Ctx) SetUpstreamHost(h []byte) { c.UpstreamHost = append(c.UpstreamHost[:0], h...) }

// SetUpstream implements plugins.Ctx: Chosen.
func (c *Ctx) SetUpstream(u plugins.Upstream) { c.Chosen = u }

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
func (c *Ctx) SetConsumer(k *plugins.Consumer) {
	c.consumer = k
	if k != nil {
		c.consumerName = append(c.consumerName[:0], k.Username...)
	}
}

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

// Leave is the client going away while the request awaits: it waits for
// the pending Wake (at most AwaitTimeout, else it reports false) and
// calls Abandon instead of Resume, as the worker does for a request that
// ended. False too when nothing awaits.
func (c *Ctx) Leave() bool {
	if c.awaiting == nil {
		return false
	}
	select {
	case <-c.woken:
	case <-time.After(AwaitTimeout):
		return false
	}
	r := c.awaiting
	c.awaiting = nil
	r.Abandon()
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

// Build builds one configuration of the plugin name (JSON, as a route's
// "plugins" holds it) into the phases its route runs, with a local Env
// (plugins.NewLocalEnv), as the worker builds it; an error fails t.
func Build(t testing.TB, name, conf string) *plugins.Phases {
	t.Helper()
	return BuildEnv(t, name, conf, plugins.NewLocalEnv())
}

// BuildEnv is Build with env.
func BuildEnv(t testing.TB, name, conf string, env plugins.Env) *plugins.Phases {
	t.Helper()
	ph, err := plugins.Default.BuildPhases(map[string]json.RawMessage{name: json.RawMessage(conf)}, env)
	if err != nil {
		t.Fatal(err)
	}
	return &ph
}

// IndexConsumers indexes consumers given as APISIX consumer objects
// (username, labels, plugins) and credential objects through
// plugins.Default, as the worker does; an error fails t.
func IndexConsumers(t testing.TB, creds []plugins.Credential, objs ...string) *plugins.ConsumerIndex {
	t.Helper()
	cs := make([]*plugins.Consumer, 0, len(objs))
	for _, o := range objs {
		var c struct {
			Username string                     `json:"username"`
			Labels   map[string]string          `json:"labels"`
			Plugins  map[string]json.RawMessage `json:"plugins"`
		}
		if err := json.Unmarshal([]byte(o), &c); err != nil {
			t.Fatal(err)
		}
		cs = append(cs, &plugins.Consumer{Username: c.Username, Plugins: c.Plugins, CustomID: c.Labels["custom_id"]})
	}
	x, err := plugins.Default.IndexConsumers(cs, creds)
	if err != nil {
		t.Fatal(err)
	}
	return x
}

// Outcome is what an authentication plugin's test looks at after one
// request (Observe).
type Outcome struct {
	Status    int
	Body      string
	Challenge string // WWW-Authenticate
	Consumer  string
	URI       string            // the upstream target when a plugin set one
	Headers   map[string]string // upstream headers, lower-cased names; nil when not proxied
}

// Observe is c's Outcome: its answer, the consumer attached, and what
// goes upstream when the request is proxied.
func Observe(c *Ctx) Outcome {
	o := Outcome{Status: c.Status(), Body: string(c.Body), Challenge: string(c.ResponseHeader("WWW-Authenticate")),
		URI: string(c.UpstreamURI)}
	if k := c.Consumer(); k != nil {
		o.Consumer = k.Username
	}
	if c.Upstream {
		o.Headers = map[string]string{}
		for _, h := range c.UpstreamHeaders() {
			o.Headers[strings.ToLower(h.Name)] = string(h.Value)
		}
	}
	return o
}
