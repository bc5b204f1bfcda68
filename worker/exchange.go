package worker

import (
	"net/netip"
	"time"

	"coregate/httpparse"
	"coregate/httpvar"
	"coregate/plugins"
)

// exchange is the state of one request and its answer on a client
// connection, from the routing of a parsed head (start) to the end of the
// answer (requestDone) or of the connection (closedByPeer). It is embedded
// in clientConn and starts over by one assignment (resetExchange): outside
// an exchange (csIdle, csHead) it is zero. State added per request, that of
// plugins included, goes here and nowhere else, so that nothing of one
// request can leak into the next. Its buffers are apart, in exchangeBufs.
type exchange struct {
	snap *Snapshot // the snapshot the request was routed with
	rt   *route

	// Attempts at the route's upstream nodes.
	node        int      // the node of the current attempt
	tried       triedSet // nodes that failed
	tries       int
	freeRetries int   // replays after a stale kept-alive connection
	started     int64 // Worker.now when the request was routed, for retry_timeout
	// held: the attempt's node is held by the request on the balancer
	// (balancer.release, releaseNode); balKey is the request's chash key
	// (requestKey), read when it was routed.
	held   bool
	balKey uint32

	// The request.
	isHead     bool
	idempotent bool
	keepAlive  bool // the connection stays open after the answer
	http10     bool
	reqBody    uint8 // bodyNone, bodyLength, bodyChunked
	reqLeft    int64 // bodyLength: bytes not yet taken from the client
	reqChunk   httpparse.Chunked
	reqDone    bool  // the whole request was written to the upstream
	bodySent   bool  // body bytes left the client buffer: the request cannot be replayed
	badBody    int   // 400: the chunked request body is invalid; 413: it passed client_max_body_size
	bodyBytes  int64 // chunk data bytes taken from the client
	// respStarted: the response head went to the client; a failure now can
	// only cut the answer short.
	respStarted bool
	// chunkClose: the upstream's body ends with its close, and the worker
	// sends it to this HTTP/1.1 client chunked (upConn.takeBody), so that
	// the client can tell that end from a cut and the connection can stay
	// open, as nginx's chunked filter does; the last chunk goes only after
	// a clean close (upConn.closedByPeer).
	chunkClose bool
	// closeFramed: the client's answer ends with the client connection's
	// close (an HTTP/1.0 client, a body not sent with its length), so the
	// connection cannot stay open after it, and a close after a failure
	// would read as its end: that close is a reset
	// (clientConn.upstreamFailed).
	closeFramed bool

	// A chunked request held in csHold (bodylimit.go): holdSeen body bytes,
	// framing included, read by holdScan so far, holdData of them chunk
	// data.
	holdScan httpparse.Chunked
	holdSeen int64
	holdData int64
	// bodyMax is the limit of the body read whole for the plugins in
	// csBody (readbody.go), which scans a chunked one with holdScan and
	// holdSeen too.
	bodyMax int64
	// teeMax is the limit of the body's copy for the plugins
	// (teebody.go), 0 when it is not copied; teeCut: data past it was not
	// copied; teeEnd: the body's end was copied.
	teeMax         int64
	teeCut, teeEnd bool

	// lineEnd ends the request line in head (exchangeBufs).
	lineEnd int
	// host is nginx's $host: the request's host without port, lower-case.
	// It aliases the head (valid until discardHead) or hostBuf.
	host []byte
	// curPath is the normalised path the request was routed by: it aliases
	// the head (valid until discardHead), pathBuf or servletBuf.
	curPath []byte
	// servletTarget: the target sent upstream is targetBuf, the path as
	// routed with its parameters (servletRoute).
	servletTarget bool
	// headGone: discardHead dropped the head from gnet's buffer.
	headGone bool
	// upgrade: the request went upstream asking for an upgrade the route
	// allows (buildHead, wantsUpgrade): a 101 opens the tunnel (tunnel.go).
	upgrade bool

	// plugin is the per-request state of the plugin phases (phases.go).
	plugin pluginState

	// For the log phase (plugins.Exchange): proxied, an upstream was
	// contacted; upAnswered, the response head came from it.
	proxied    bool
	upAnswered bool
	// The access log's share (accesslog.go), and the log phase's figures.
	// logOn: the exchange gets a line when it ends. respStatus is the
	// status of the answer begun (0: none), respHead the length of its
	// head, sent the bytes written to the client. upStart is when the last
	// attempt at an upstream began, upConnected when its connection was
	// ready, upStatus the status of its response (0: none), all in
	// Worker.now units.
	logOn       bool
	respStatus  int
	respHead    int
	sent        int64
	upStart     int64
	upConnected int64
	upStatus    int
	// upAP is the address the last attempt at a node given by host name
	// went to, one of its name's (Worker.dial), for upstream_addr and
	// balancer_ip; invalid for a node given by IP address or whose name
	// had none.
	upAP netip.AddrPort
}

// pluginState is the per-request state of plugins: which phase tables the
// request runs, how far it went, and what the plugins decided. Whatever a
// plugin keeps for one request goes here or in exchangeBufs, so that the
// exchange's reset clears it, and nowhere else.
type pluginState struct {
	// active: the exchange runs plugin phases (the route or a global
	// rule has plugins); the rest is unused otherwise.
	active bool
	// late: some plugin runs in header_filter or log, after discardHead:
	// the head is copied first (keepHead), and kept once it is.
	late, kept bool
	// filterBody: some plugin runs in body_filter; reframe: the response
	// coming from the upstream has a body that goes through it, re-framed
	// by the worker (chunked, or delimited by the close for HTTP/1.0).
	filterBody, reframe bool
	// ph is the route's phase tables, or those of the route merged with
	// the consumer's (consumerPhases) once one is attached; gl the global
	// rules'. Both belong to exchange.snap.
	ph, gl *plugins.Phases
	phase  plugins.Phase // the phase running or last run
	// consumer is the consumer an authentication plugin attached.
	consumer *plugins.Consumer

	// A plugin's Exit: status, body in exchangeBufs.exitBody (exitPage:
	// none given, the gateway's page), and ExitAfter's delay.
	exited     bool
	exitPage   bool
	exitStatus int
	delay      time.Duration
	// hold is the sum of the plugins' Delay calls: the request goes
	// upstream, or its answer leaves, that much later (csDelay).
	hold time.Duration

	// filtered: header_filter ran (the response head is decided); status
	// is the response's status from then on.
	filtered bool
	status   int
	logged   bool
	// resp is the upstream's response head while header_filter runs on
	// it (beginResponse), for Ctx.ResponseHeader; nil otherwise.
	resp *httpparse.Response

	// The upstream request edits, valued in exchangeBufs (upURI, upMethod,
	// upHost, reqEdits).
	upURI, upMethod, upHost bool
	// realAddr: a plugin set the client's address (SetClientAddr),
	// valued in exchangeBufs (realIP, realPort).
	realAddr bool
	// split is the route's variant whose upstream a plugin chose
	// (Ctx.SetUpstream): the request goes there; nil: the route's own.
	split *route

	// The request phases' cursor: the stage running (stageGlobalRewrite…)
	// and the index of the plugin after the one running, so that they go
	// on where they stopped when a plugin's Await returns (csAwait);
	// fresh is the consumer's rewrite plugins (stageConsumer).
	stage uint8
	next  int
	fresh []plugins.RewritePhase
	// waiting: a plugin's Await is in progress, from the call until its
	// Wake reaches the loop (Worker.runWakes).
	waiting bool
	// bodyRead: the request body was read whole for the plugins
	// (readbody.go), into exchangeBufs.reqBodyBuf.
	bodyRead bool
	// headKept: the response head the client got is in
	// exchangeBufs.sentHead, for the log phase (resphead.go).
	headKept bool
	// respMax: how much of the response body the exchange's plugins
	// read in log, 0 for none; that much is copied into
	// exchangeBufs.respBody as it is sent (respbody.go).
	respMax int64
	// varsSet has bit k-httpvar.OTelTraceparent set for each settable
	// variable a plugin set (Ctx.SetVar), valued in exchangeBufs.setVars.
	varsSet uint8
}

// exchangeBufs are the exchange's buffers, embedded in clientConn beside
// it: their capacity is reused from one exchange to the next, their
// contents are not. Each is written from its start before it is read
// within an exchange, but for statuses and upAddrs, which resetExchange
// truncates.
type exchangeBufs struct {
	// statuses are the upstream statuses of the failed attempts, for
	// X-APISIX-Upstream-Status and $upstream_status.
	statuses []int
	// upAddrs are the addresses of the failed attempts, comma-separated
	// as nginx's $upstream_addr lists them ("127.0.0.1:1980,
	// 127.0.0.1:1981"), one for each of statuses.
	upAddrs []byte
	// sizeLine is the chunk-size line of the chunk takeBody frames, valid
	// until the next takeBody.
	sizeLine []byte
	// head is the outbound request head, kept for retries: the request line
	// is head[:lineEnd], the Host line is written per attempt into hostLine,
	// and head[lineEnd:] holds the other fields and the final CRLF.
	head      []byte
	hostLine  []byte
	hostValue []byte // the client's Host, for pass_host=pass
	hostBuf   []byte // backs host when it had to be lower-cased
	pathBuf   []byte // backs curPath when it had to be normalised
	// servletBuf backs curPath when its parameters were removed, and
	// targetBuf holds the target sent upstream then (servletRoute).
	servletBuf []byte
	targetBuf  []byte
	// upAddrBuf and upIPBuf back upstream_addr and balancer_ip when they
	// are upAP's or the list of several attempts (clientConn.varValue),
	// each valid until the variable is read again.
	upAddrBuf, upIPBuf []byte
	// reqLine is the client's request line (as nginx's $request, with no
	// CRLF) when head's differs from it: a method or URI a plugin
	// rewrote, an absolute-form or servlet target, a version other than
	// HTTP/1.1; empty when head[:lineEnd] is it. Written by buildHead, it
	// is for the error log (logFault), which comes after the client's
	// head is gone.
	reqLine []byte

	// The plugins' share (pluginState says which are set): the exit's
	// body, the response headers set, the upstream request's edits, the
	// attached consumer's name, and headCopy, the request head once gnet's
	// copy is discarded (keepHead), which cc.req then aliases until the
	// exchange ends. respHdr and reqEdits are truncated by resetExchange;
	// their elements keep their value buffers.
	exitBody     []byte
	respHdr      []headerEdit
	reqEdits     []headerEdit
	upURI        []byte
	upMethod     []byte
	upHost       []byte
	consumerName []byte
	headCopy     []byte
	realIP       []byte
	realPort     []byte
	// kept are the values plugins keep for later phases (Ctx.Keep),
	// truncated by resetExchange (its owners cleared first).
	kept []keptValue
	// filtBuf is the body as the body_filter phase returned it, framed,
	// valid until the write that sends it returns.
	filtBuf []byte
	// reqBodyBuf is the request body read or copied for the plugins
	// (Ctx.RequestBody), its data de-chunked: a buffer of the worker's
	// pool, taken when the exchange needs one and given back by
	// resetExchange (teebody.go); nil outside.
	reqBodyBuf []byte
	// sentHead is the response head the client got, for a log phase that
	// reads it (resphead.go; pluginState.headKept says it is set).
	sentHead []byte
	// respBody is the start of the response body the client got, for a
	// log phase that reads it (respbody.go); resetExchange truncates it,
	// and lets go of it when it grew past maxKeptBody.
	respBody []byte
	// setVars are the values of the variables plugins set (Ctx.SetVar;
	// pluginState.varsSet says which), by kind from
	// httpvar.OTelTraceparent.
	setVars [httpvar.NumSettable][]byte
}

// maxKeptBody is the capacity of respBody a connection keeps from one
// exchange to the next: a larger buffer is left to the collector.
const maxKeptBody = 64 << 10

// resetExchange ends the exchange: it is zeroed, and the buffers keep their
// capacity and nothing else. This is the only way an exchange's state is
// cleared.
func (cc *clientConn) resetExchange() {
	cc.releaseNode(false)
	cc.exchange = exchange{}
	cc.statuses = cc.statuses[:0]
	cc.upAddrs = cc.upAddrs[:0]
	cc.respHdr = cc.respHdr[:0]
	clear(cc.kept)
	cc.kept = cc.kept[:0]
	cc.reqEdits = cc.reqEdits[:0]
	cc.w.putBodyBuf(cc.reqBodyBuf)
	cc.reqBodyBuf = nil
	cc.respBody = cc.respBody[:0]
	if cap(cc.respBody) > maxKeptBody {
		cc.respBody = nil
	}
}

// upExchange is an upstream connection's share of the exchange it serves:
// what it sent and received of one request and response. It starts over by
// one assignment when the connection is linked to a client (link).
type upExchange struct {
	reused   bool  // the connection served a request before this one
	gotBytes bool  // a response byte arrived
	sentAny  bool  // request bytes were written
	phase    uint8 // rpHead, rpBody
	interim  int   // bytes of 1xx heads before the final one
	mode     httpparse.BodyMode
	left     int64 // BodyLength: response body bytes still to come
	chunk    httpparse.Chunked

	// Why the exchange failed, for the error log (faultlog.go).
	fault upFault
	err   error
}

// link makes uc serve cc's request. With unlink it is the only place where
// clientConn.up and upConn.cc change, so that cc.up == uc exactly when
// uc.cc == cc. uc is fresh from pool.newConn (usDialing) or taken from its
// pool (idle, now busy); cc serves no other upstream connection.
func link(cc *clientConn, uc *upConn) {
	cc.up, uc.cc = uc, cc
	cc.proxied = true // upStart: set by dispatch, per attempt
	uc.upExchange = upExchange{reused: uc.requests > 0}
	uc.parser.Reset()
	if uc.state != usDialing {
		uc.state = usBusy
	}
}

// unlink ends the link between cc and uc, if it is still there (either may
// have ended it already). Whatever uc's fate (back to its pool, aborted,
// closed) is the caller's.
func unlink(cc *clientConn, uc *upConn) {
	if cc != nil && cc.up == uc {
		cc.up = nil
	}
	if uc != nil && uc.cc == cc {
		uc.cc = nil
	}
}

// reentry is a connection's re-entrancy guard, the one rule for code that
// finds the connection's own code already on the stack. It is held while a
// traffic call of the connection runs, while a write to an upstream
// connection runs (gnet runs OnClose inside a Write or Writev that fails),
// and while a client's pipelined requests are started from outside its
// traffic call. While it is held:
//   - a close asked of the connection (closeSoon, upConn.abort) is left to
//     the holder: closeAsked is set, and the outermost holder closes when
//     it lets go (a traffic call by returning gnet.Close);
//   - an upstream connection that gnet closed under it (closedByPeer) does
//     not end the exchange: the code on the stack sees usClosed and does;
//   - a client's buffered pipelined requests are left to the traffic call
//     on the stack (requestDone).
type reentry struct {
	depth      uint8
	closeAsked bool
}

func (r *reentry) enter()     { r.depth++ }
func (r *reentry) held() bool { return r.depth > 0 }

// leave lets go of the guard and reports whether the connection must be
// closed now: a close was asked while it was held, and this was the
// outermost holder.
func (r *reentry) leave() bool {
	r.depth--
	if r.depth == 0 && r.closeAsked {
		r.closeAsked = false
		return true
	}
	return false
}
