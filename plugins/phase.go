package plugins

import (
	"encoding/json"
	"net/netip"
	"time"

	"coregate/httpvar"
)

// Phase is one of APISIX's request phases a plugin can run in, in the order
// a request goes through them.
type Phase uint8

// The phases. Rewrite, Access and BeforeProxy run before the upstream is
// contacted and may end the request (Ctx.Exit); HeaderFilter and
// BodyFilter see the response on its way to the client, whoever made it
// (the upstream, the worker, or a plugin's Exit); Log runs once the
// response is sent.
const (
	Rewrite Phase = iota
	Access
	BeforeProxy
	HeaderFilter
	BodyFilter
	Log
	NumPhases
)

var phaseNames = [NumPhases]string{"rewrite", "access", "before_proxy", "header_filter", "body_filter", "log"}

// String is APISIX's name of the phase ("header_filter").
func (p Phase) String() string {
	if p < NumPhases {
		return phaseNames[p]
	}
	return "phase?"
}

// Ctx is one request as a plugin's phase sees it. The worker implements it
// over its per-request state; plugintest.Ctx is a fake for tests. A Ctx is
// used on one event loop, only during the phase call that got it: an
// instance keeps no Ctx, and copies any []byte it got from one that it
// needs after the call returns (they point into the worker's buffers).
// Methods that take a []byte copy it.
//
// No method allocates in the worker's implementation, so that a plugin's
// phase can be zero-allocation too (plugintest.AllocsPerRun checks it).
type Ctx interface {
	// Method is the request method ("GET").
	Method() []byte
	// Path is the request target's path, without the query.
	Path() []byte
	// Query is the raw query, without '?' (nil when none).
	Query() []byte
	// Header is the value of the first request header of that name,
	// compared case-insensitively; nil when absent.
	Header(name string) []byte
	// HeaderAt is the value of the i-th (from 0) request header of that
	// name, in the order the client sent them, compared
	// case-insensitively; ok false when fewer than i+1 have that name.
	// A plugin reads every value of a repeated header (ua-restriction's
	// User-Agent) by counting i up until ok is false.
	HeaderAt(name string, i int) (value []byte, ok bool)
	// RequestHeaderAt is the i-th field of the request's head, in the
	// order the client sent them (0 first); ok is false past the last.
	// For a plugin that passes the whole request on (proxy-mirror's copy);
	// the bytes point into the worker's buffers: valid only during the
	// phase call.
	RequestHeaderAt(i int) (name, value []byte, ok bool)
	// Var is an nginx/APISIX variable of httpvar's table (remote_addr,
	// uri, arg_<name>, http_<name>, route_id…), resolved by httpvar.Parse
	// when the plugin's configuration was built; nil when unset, and for
	// the access log's own variables (httpvar.Kind.LogOnly) and names not
	// in the table. args, query_string and arg_<name> are ngx.var.args:
	// the query of the target an earlier SetUpstreamURI set (key-auth's
	// hide_credentials edits the arguments for the plugins after it),
	// Query when none did.
	Var(v httpvar.Var) []byte
	// SetVar sets v, a variable plugins set (httpvar.Kind.Settable:
	// opentelemetry's $opentelemetry_trace_id…), to a copy of value for
	// the rest of the request: Var gives it to the plugins after the
	// caller, and the access log writes it. Other variables are ignored.
	// From any phase; it does not allocate once the request's buffers
	// have grown.
	SetVar(v httpvar.Var, value []byte)
	// RouteID is the id of the route the request matched.
	RouteID() string
	// Now is the worker's coarse clock, Unix nanoseconds as of the event
	// loop's last wake-up: the clock of Counters.
	Now() int64

	// Exit ends the request with status and body, as APISIX's
	// core.response.exit: the rest of the rewrite, access and before_proxy
	// phases do not run, the upstream is not contacted; header_filter,
	// body_filter and log still do. A nil body means the gateway's own
	// page for status. A status outside 200-999 is 500; a 204 or 304
	// answer goes without a body.
	Exit(status int, body []byte)
	// Exited reports whether Exit was called.
	Exited() bool

	// SetResponseHeader sets a header of the response to the client,
	// replacing one of that name; from any phase before header_filter ends.
	SetResponseHeader(name string, value []byte)
	// AddResponseHeader adds one more field to the response to the
	// client, after any of that name (the upstream's, or one a plugin set
	// or added), as APISIX's core.response.add_header (cors's "Vary:
	// Origin"); from the same phases as SetResponseHeader. A later
	// SetResponseHeader of the name replaces them all.
	AddResponseHeader(name string, value []byte)
	// RemoveResponseHeader removes the response's fields of that name:
	// the upstream's, and any a plugin set or added before (APISIX's
	// core.response.set_header(name, nil)); from the same phases as
	// SetResponseHeader. The worker's own Date and Server go too; framing
	// and hop-by-hop names are the worker's and ignored, but for
	// Content-Length, which a plugin that changes the body removes (as
	// APISIX's clear_header_as_body_modified): a head no body follows (a
	// HEAD's, a 304's) then goes without it; the worker frames any body.
	RemoveResponseHeader(name string)
	// Status is the response status, from header_filter on (0 before):
	// the one SetStatus gave, once called.
	Status() int
	// SetStatus replaces the status of the response to the client (its
	// reason phrase the standard one), as APISIX's ngx.status = status in
	// header_filter: from header_filter only, status 200 to 599; other
	// calls are ignored. The body and its framing are unchanged: a
	// plugin that changes the body does so in body_filter. Framing
	// decides where statuses have no body: the worker keeps the status
	// of a 1xx, 204 or 304 response, and gives no response 204 or 304.
	SetStatus(status int)
	// ResponseHeader is the value of the first field of that name of the
	// response as it stands, compared case-insensitively; nil when
	// absent: one a plugin set (SetResponseHeader), else the upstream's
	// (APISIX's ngx.resp.get_headers in header_filter, request-id's
	// "keep the upstream's"), else one a plugin added. From header_filter
	// on; the worker's own fields (Date, Server, Content-Type of its
	// pages) are not seen. The bytes point into the worker's buffers:
	// valid only during the phase call.
	ResponseHeader(name string) []byte
	// ResponseHeaderAt is the i-th field (from 0) of the response head
	// the client got, in the order sent, the status line left out: the
	// upstream's fields as relayed, the worker's own (Date, Server,
	// Content-Length, Transfer-Encoding, Connection) and the plugins'.
	// From the log phase, for a route or global rule with a
	// ResponseHeadReader (ok is false otherwise, and past the last
	// field); the bytes point into the worker's copy of the head: valid
	// only during the phase call.
	ResponseHeaderAt(i int) (name, value []byte, ok bool)
	// ResponseBody is the start of the response body the client got, its
	// data de-chunked (after body_filter, when a plugin changed it), up
	// to the largest ResponseBodyLimit of the ResponseBodyReaders of the
	// route and the global rules: the worker copies it as it relays the
	// body, which is neither held back nor buffered whole. From the log
	// phase; nil when the body was empty, and for a route without such a
	// reader. The bytes are valid during the phase call and must not be
	// written.
	ResponseBody() []byte

	// ExitAfter is Exit after d (mocking's delay): the request's phases
	// stop now, the answer leaves when the worker's timer fires, and the
	// event loop serves other connections meanwhile. Exited reports true
	// from the call on.
	ExitAfter(d time.Duration, status int, body []byte)
	// Delay holds the request back for d before it goes upstream, as
	// APISIX's ngx.sleep in an access phase (limit-req's delay): the
	// phases go on at once, and the upstream is contacted once the delays
	// of every call (they add up) have passed, on the worker's timer, the
	// event loop serving other connections meanwhile. A request a plugin
	// ends waits for them too before its answer leaves. From the rewrite,
	// access and before_proxy phases.
	Delay(d time.Duration)

	// The upstream request, as proxy-rewrite edits it, from the rewrite,
	// access and before_proxy phases: the worker writes the head it sends
	// upstream from these, never from the client's bytes. Each copies its
	// arguments.
	//
	// SetUpstreamURI replaces the request target (path and query, as
	// sent: already escaped); SetUpstreamMethod the method;
	// SetUpstreamHost the Host header. SetRequestHeader replaces every
	// request header of that name (a nil value removes them);
	// AddRequestHeader appends one. Hop-by-hop and framing headers
	// (Connection, Content-Length, Transfer-Encoding, Host, TE, Upgrade…)
	// are the worker's: setting one is ignored, so that no plugin can
	// unframe a body.
	SetUpstreamURI(uri []byte)
	SetUpstreamMethod(method []byte)
	SetUpstreamHost(host []byte)
	SetRequestHeader(name string, value []byte)
	AddRequestHeader(name string, value []byte)

	// SetClientAddr makes ip, and port when not 0, the client's address
	// for the rest of the request, as APISIX's real-ip (nginx's
	// set_real_ip): $remote_addr and $remote_port for the plugins after
	// it (Var), the access log and a chash key, X-Real-IP and the address
	// X-Forwarded-For ends with upstream. The route was matched with the
	// connection's address, and the connection's next request starts
	// from it again. From the rewrite, access and before_proxy phases
	// (ignored in the others, and for an invalid ip); a later call
	// replaces an earlier one's. It does not allocate.
	SetClientAddr(ip netip.Addr, port uint16)
	// SetUpstream sends the request to u, an upstream the plugin's Build
	// got from Env.Upstreams, instead of its route's (traffic-split's
	// choice); nil sends it to the route's again. From the rewrite and
	// access phases. The route's timeout, when it sets one, still
	// applies; u's own otherwise.
	SetUpstream(u Upstream)

	// Keep records v for owner on this request, for a later phase of it
	// (limit-conn's log phase undoes what its access phase counted);
	// Kept returns it, ok false when owner kept nothing. owner is a
	// plugin instance's pointer, compared by identity; a second Keep of
	// one owner replaces the first. A request keeps up to MaxKept
	// values: past that Keep reports false.
	Keep(owner any, v uint64) bool
	Kept(owner any) (v uint64, ok bool)

	// Consumer is the consumer an authentication plugin attached to the
	// request; nil when none.
	Consumer() *Consumer
	// Exchange is the request's figures for the log phase (zero before
	// it): times and sizes, as numbers, where Var would give text.
	Exchange() Exchange

	// SetConsumer attaches c (key-auth's match, or its anonymous
	// consumer). From the next phase on the request runs the route's
	// plugins merged with c's, as APISIX's merge_consumer_route: for a
	// plugin both configure, the consumer's configuration wins.
	SetConsumer(c *Consumer)

	// RequestBody is the request body, de-chunked, for a plugin that
	// asked for it. A BodyReader's is the whole body: the worker reads it
	// before the request phases of a route, or of global rules, with such
	// a plugin begin, and what goes upstream is written from the same
	// bytes, framed by the worker. A BodyTee's is a copy of the body's
	// first TeeLimit bytes, made as the body streams to the upstream: it
	// grows while the body goes, and is complete in the log phase, once
	// the body went (RequestBodyWhole tells whether it is the whole
	// body). Nil when the request has none or nothing of it was read or
	// copied, and for a BodyReader only a consumer's configuration adds
	// (the body is read before the consumer is known; a BodyTee a
	// consumer adds gets its copy). From the rewrite, access,
	// before_proxy and log phases; the bytes are valid during the phase
	// call and must not be written.
	RequestBody() []byte
	// RequestBodyWhole reports whether RequestBody is the whole request
	// body: true for a request without a body and for a body read whole
	// (BodyReader); for a copy (BodyTee), true once the body went
	// upstream whole within the copy's limit, false when it passed the
	// limit (the copy holds its first TeeLimit bytes), when the exchange
	// ended before the body did, or when nothing of the body was copied
	// (a plugin answered the request).
	RequestBodyWhole() bool

	// Await holds the request's phases while an operation the plugin
	// started off the event loop completes (limit-count's Redis call), as
	// a cosocket call yields in APISIX: the phase call returns, the event
	// loop serves other connections, and once the operation's goroutine
	// calls the returned Waker's Wake, r.Resume runs on the loop with the
	// request, in the phase that awaited; then the phases go on with the
	// plugin after the caller (Resume may Exit, or Await again). If the
	// request ended while it waited (the client closed), r.Abandon runs
	// on the loop instead, once Wake is called, so that the plugin can
	// take back what the operation held.
	//
	// From the rewrite, access and before_proxy phases and from Resume,
	// once per call. false, and no Waker, when the request cannot wait
	// (another phase, after Exit, already awaiting): the plugin then
	// does not start the operation.
	Await(r Resumer) (Waker, bool)
}

// Resumer is a plugin's side of an Await: what runs on the event loop
// when the operation is done.
type Resumer interface {
	// Resume continues the request's phase, with the request: the plugin
	// reads the operation's result it kept and acts on it (Exit, headers).
	Resume(c Ctx)
	// Abandon runs instead of Resume when the request is gone.
	Abandon()
}

// Waker is the handle of one Await: the goroutine doing the operation
// calls Wake exactly once, when it is done, from any goroutine. Wake does
// not block and does not allocate.
type Waker interface{ Wake() }

// MaxKept is how many values a request keeps for its plugins (Ctx.Keep).
const MaxKept = 16

// Exchange is what the log phase knows of a request in numbers (nginx's
// $request_time, $upstream_response_time, $request_length, $bytes_sent).
type Exchange struct {
	// RequestTime is from the request's head being read to the log phase.
	RequestTime time.Duration
	// UpstreamTime is from the request being sent to an upstream to the
	// end of its response; Proxied is false (and UpstreamTime 0) when no
	// upstream was contacted.
	UpstreamTime time.Duration
	Proxied      bool
	// Upstreamed: the response came from an upstream (its head arrived),
	// not from the gateway (APISIX's response_source "upstream").
	Upstreamed bool
	// RequestLength is the bytes of the request read: head and body.
	RequestLength int64
	// BytesSent is the bytes written to the client for the answer.
	BytesSent int64
}

// Consumer is one consumer as the request path sees it, built with the
// snapshot it belongs to and only read afterwards.
type Consumer struct {
	// Username is the consumer's name (the $consumer_name variable and
	// the prometheus consumer label).
	Username string
	// Plugins is the consumer's "plugins" object, raw, as stored; the
	// worker merges it into a route's when the consumer is attached.
	Plugins map[string]json.RawMessage
	// CustomID is the consumer's labels.custom_id ("" when none), as
	// APISIX's consumer.custom_id: the X-Consumer-Custom-ID header.
	CustomID string
	// GroupID is the consumer's group_id ("" for none) and GroupPlugins
	// that consumer group's "plugins", merged under Plugins (APISIX's
	// merge_consumer_route: the consumer's own configuration of a plugin
	// wins). They identify no consumer: only Plugins is indexed.
	GroupID      string
	GroupPlugins map[string]json.RawMessage
}

// Found is what Consumers.Find returns: a credential's consumer (nil when
// none), the id of the credential object that holds the credential (""
// when the consumer's own configuration does: APISIX's credential_id, the
// X-Credential-Identifier header), and the plugin's CredentialData of
// that configuration (nil for a plugin that is no CredentialDataPlugin),
// shared by every request of the snapshot, read only.
type Found struct {
	Consumer     *Consumer
	CredentialID string
	Data         any
}

// Consumers is a snapshot's consumers, indexed for authentication: the
// worker builds it with each snapshot, from the consumers and their
// credentials, and gives it to Build in Env. Lookups do not allocate.
type Consumers interface {
	// ByCredential returns the consumer whose credential for plugin (as
	// the plugin's CredentialPlugin.Credential derives it: key-auth's
	// key) is cred; nil when none.
	ByCredential(plugin string, cred []byte) *Consumer
	// Find is ByCredential with what an authentication plugin needs
	// beside the consumer: the credential object that holds cred, and
	// what the plugin's CredentialDataPlugin.CredentialData made of its
	// configuration (basic-auth's password digest); the zero Found when
	// no consumer has cred.
	Find(plugin string, cred []byte) Found
	// ByName returns the consumer of that username; nil when none.
	ByName(username string) *Consumer
}

// CredentialPlugin is implemented by an authentication plugin whose
// consumers are found by a credential of their configuration: the worker
// indexes consumers and credentials by it, and the Admin API refuses two
// consumers with one credential ("duplicate key of plugin key-auth found
// with consumer: jack").
type CredentialPlugin interface {
	// Credential returns the credential of a consumer's (or credential
	// object's) configuration of the plugin, which passed its schema, its
	// references resolved.
	Credential(raw json.RawMessage) (string, error)
}

// CredentialDataPlugin is a CredentialPlugin whose request path needs more
// of a credential's configuration than the credential it is found by
// (basic-auth's password beside its username, jwt-auth's secret or public
// key beside its key): CredentialData prepares it once, when the consumers
// are indexed, off the event loop, and Consumers.Find returns it with the
// consumer, so that a request neither parses nor allocates.
type CredentialDataPlugin interface {
	CredentialPlugin
	// CredentialData returns what the request path needs of a consumer's
	// (or credential object's) configuration, which passed its schema,
	// its references resolved; an error refuses the consumer as
	// Credential's does. The value is shared, read only, by the requests
	// of the snapshot on every event loop.
	CredentialData(raw json.RawMessage) (any, error)
}

// The phase interfaces: an Instance implements those of the phases it runs
// in, and the worker asserts them once, into Phases, when it compiles a
// configuration.
type (
	// RewritePhase is APISIX's rewrite phase (key-auth).
	RewritePhase interface{ Rewrite(c Ctx) }
	// AccessPhase is APISIX's access phase (limit-count, mocking).
	AccessPhase interface{ Access(c Ctx) }
	// BeforeProxyPhase runs once the upstream node is chosen, before the
	// request is sent to it.
	BeforeProxyPhase interface{ BeforeProxy(c Ctx) }
	// HeaderFilterPhase sees the response head before it is sent.
	HeaderFilterPhase interface{ HeaderFilter(c Ctx) }
	// BodyFilterPhase sees each piece of the response body as it goes to
	// the client (eof on the last); it returns what to send instead, chunk
	// itself to change nothing. chunk is valid only during the call; what
	// it returns must stay valid until the next call on the same request
	// or the log phase.
	BodyFilterPhase interface {
		BodyFilter(c Ctx, chunk []byte, eof bool) []byte
	}
	// LogPhase runs once the response is sent (prometheus).
	LogPhase interface{ Log(c Ctx) }
)

// BodyReader is an Instance that reads the request body (Ctx.RequestBody)
// in its rewrite, access or before_proxy phase: a route (or global rule)
// with one has its requests' bodies read whole before their request phases
// begin, up to the largest BodyLimit of its instances (and the node's
// client_max_body_size, when set); a longer body is answered 413 by the
// worker. The body is held in memory: BodyLimit bounds what one request
// may make the worker hold. A plugin that states a smaller limit than
// another of the route's checks the length itself.
type BodyReader interface {
	// BodyLimit is the largest body, in bytes (decoded, for a chunked
	// one), the instance reads; at least 1.
	BodyLimit() int64
}

// BodyTee is an Instance that reads a copy of the request body in its
// log phase (Ctx.RequestBody, Ctx.RequestBodyWhole) without changing how
// the body goes upstream: the body streams there as it would without the
// plugin (no wait, no limit added), while the worker copies its first
// bytes, de-chunked, up to the largest TeeLimit of the route's and the
// global rules' instances, into a buffer of the exchange. The loggers'
// include_req_body and proxy-mirror's copy are such. A route whose body a
// BodyReader reads whole copies nothing: RequestBody is that body.
type BodyTee interface {
	// TeeLimit is the most bytes of the body (decoded, for a chunked
	// one) the instance reads; at least 1.
	TeeLimit() int64
}

// ResponseHeadReader is an Instance whose log phase reads the response
// head the client got (Ctx.ResponseHeaderAt, the loggers' default entry's
// response.headers): a route (or global rule) with one that answers true
// has the head of its responses copied as it is written, which the others
// are spared.
type ResponseHeadReader interface {
	ReadsResponseHead() bool
}

// ResponseBodyReader is an Instance whose log phase reads the start of
// the response body (Ctx.ResponseBody, the loggers' include_resp_body):
// a route (or global rule) with one has that much of its responses'
// bodies copied as they are sent, up to the largest ResponseBodyLimit of
// its instances; the others are spared the copy.
type ResponseBodyReader interface {
	// ResponseBodyLimit is how many bytes of the body the instance
	// reads; 0 when it reads none (a logger without include_resp_body).
	ResponseBodyLimit() int64
}

// Phases is one set of built plugins (a route's, a global rule's) as the
// request path runs them: one slice per phase, each in execution order.
// The zero value has no plugins. It is built off the event loop, once per
// snapshot, and only read afterwards.
type Phases struct {
	// Plugins are all the plugins, in execution order.
	Plugins      []Configured
	Rewrite      []RewritePhase
	Access       []AccessPhase
	BeforeProxy  []BeforeProxyPhase
	HeaderFilter []HeaderFilterPhase
	BodyFilter   []BodyFilterPhase
	Log          []LogPhase
	// reads is what the instances read of the exchange beyond the
	// phases' arguments (BodyLimit, TeeLimit, RespHead, RespBodyLimit);
	// nil when none reads any, most sets of plugins: a worker keeps one
	// Phases a route, 176 bytes where it was 200 with them inline.
	reads *phaseReads
}

// phaseReads is what a Phases' instances read of the exchange.
type phaseReads struct {
	body, tee, respBody int64
	respHead            bool
}

// BodyLimit is the largest BodyLimit of the BodyReader instances; 0 when
// there are none: the request body is not read before the phases.
func (p *Phases) BodyLimit() int64 {
	if p.reads == nil {
		return 0
	}
	return p.reads.body
}

// TeeLimit is the largest TeeLimit of the BodyTee instances; 0 when there
// are none: the request body is not copied.
func (p *Phases) TeeLimit() int64 {
	if p.reads == nil {
		return 0
	}
	return p.reads.tee
}

// RespHead reports whether some instance is a ResponseHeadReader that
// reads the head; the worker keeps a copy of it for the log phase.
func (p *Phases) RespHead() bool { return p.reads != nil && p.reads.respHead }

// RespBodyLimit is the largest ResponseBodyLimit of the ResponseBodyReader
// instances: how much of the response body the worker keeps for the log
// phase (0: none).
func (p *Phases) RespBodyLimit() int64 {
	if p.reads == nil {
		return 0
	}
	return p.reads.respBody
}

// NewPhases sorts built plugins (in execution order, as Build returns them)
// into their phase tables.
func NewPhases(built []Configured) Phases {
	p := Phases{Plugins: built}
	var r phaseReads
	for _, c := range built {
		if i, ok := c.Instance.(RewritePhase); ok {
			p.Rewrite = append(p.Rewrite, i)
		}
		if i, ok := c.Instance.(AccessPhase); ok {
			p.Access = append(p.Access, i)
		}
		if i, ok := c.Instance.(BeforeProxyPhase); ok {
			p.BeforeProxy = append(p.BeforeProxy, i)
		}
		if i, ok := c.Instance.(HeaderFilterPhase); ok {
			p.HeaderFilter = append(p.HeaderFilter, i)
		}
		if i, ok := c.Instance.(BodyFilterPhase); ok {
			p.BodyFilter = append(p.BodyFilter, i)
		}
		if i, ok := c.Instance.(LogPhase); ok {
			p.Log = append(p.Log, i)
		}
		if i, ok := c.Instance.(BodyReader); ok {
			r.body = max(r.body, i.BodyLimit())
		}
		if i, ok := c.Instance.(BodyTee); ok {
			r.tee = max(r.tee, i.TeeLimit())
		}
		if i, ok := c.Instance.(ResponseHeadReader); ok && i.ReadsResponseHead() {
			r.respHead = true
		}
		if i, ok := c.Instance.(ResponseBodyReader); ok {
			r.respBody = max(r.respBody, i.ResponseBodyLimit())
		}
	}
	if r != (phaseReads{}) {
		p.reads = &r
	}
	return p
}

// Names lists the plugins of one phase, in execution order.
func (p *Phases) Names(ph Phase) []string {
	var out []string
	for _, c := range p.Plugins {
		var ok bool
		switch ph {
		case Rewrite:
			_, ok = c.Instance.(RewritePhase)
		case Access:
			_, ok = c.Instance.(AccessPhase)
		case BeforeProxy:
			_, ok = c.Instance.(BeforeProxyPhase)
		case HeaderFilter:
			_, ok = c.Instance.(HeaderFilterPhase)
		case BodyFilter:
			_, ok = c.Instance.(BodyFilterPhase)
		case Log:
			_, ok = c.Instance.(LogPhase)
		}
		if ok {
			out = append(out, c.Name)
		}
	}
	return out
}
