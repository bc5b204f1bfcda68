package worker

import (
	"context"
	"net/netip"
	"strconv"
	"time"

	"github.com/panjf2000/gnet/v2"
	"golang.org/x/sys/unix"

	"coregate/httpparse"
	"coregate/httpvar"
	"coregate/worker/router"
)

// Client connection phases (clientConn.state). doc.go has the table of
// their transitions.
const (
	csIdle    = iota // between requests: no byte of the next head yet
	csHead           // a head has begun: client_header_timeout runs
	csHold           // a chunked body is held until judged against client_max_body_size
	csProxy          // the request is with an upstream
	csDiscard        // answered by the worker; its body is read and dropped
	csClosing        // the last answer is queued; close once it is flushed
	csLinger         // the answer is flushed and FIN sent; input is read and dropped
	csDelay          // a plugin's answer, or the request, waits for its delay (ExitAfter, Delay)
	csAwait          // the request phases wait for a plugin's operation (Ctx.Await)
	csTunnel         // after a 101: bytes relayed both ways with the upstream (tunnel.go)
	csBody           // the body is read whole for the plugins before their phases (readbody.go)
)

// Request body framing.
const (
	bodyNone = iota
	bodyLength
	bodyChunked
)

// Read back-pressure thresholds on a peer's outbound buffer.
const (
	highWater = 256 << 10
	lowWater  = 64 << 10
	// maxPipelined bounds the bytes a client may send ahead while a request
	// is with the upstream before its reading is paused.
	maxPipelined = 256 << 10
)

// clientConn is the state of one client connection. It lives as long as the
// connection, is owned by the event loop and is reused for later
// connections. What belongs to the request in progress is its embedded
// exchange (and exchangeBufs), reset when the exchange ends; what is left
// here belongs to the connection. Slices in req alias gnet's read buffer and are valid only
// until the head is discarded, which happens before the request is
// dispatched; everything needed later is copied into the exchange (the
// whole head, when a plugin phase runs after that: keepHead).
type clientConn struct {
	timerSlot
	w *Worker
	c gnet.Conn
	// io is what the request and response code reads and writes: c, or
	// tls once its handshake is done.
	io connIO
	// tls is the TLS layer of a connection accepted on a TLS listener,
	// nil on a plain one (kept, reset, when the clientConn is reused).
	tls   *tlsConn
	state uint8 // csIdle, csHead, …
	// closed: gnet closed the connection (OnClose ran), in whatever phase:
	// it can happen inside any Write, so code on the stack checks it.
	closed bool
	guard  reentry
	// up is the upstream connection serving the exchange, set and cleared
	// only by link and unlink (exchange.go).
	up *upConn
	// linger: the client may still be sending; the close after the last
	// answer is a lingering one (csLinger) rather than an immediate one.
	// lingerEnd bounds the lingering, and the reading and dropping of an
	// answered request's body (csDiscard), in Worker.now units.
	linger    bool
	lingerEnd int64
	// idleSince is when the connection last had a request in progress or
	// was accepted (Worker.now units): draining closes it once quiet.
	idleSince int64
	// requests counts the requests read on the connection (one read: it
	// is kept alive) and opened is when it was accepted (Worker.now
	// units), for keepalive_requests and keepalive_time; spentAt is the
	// request that reached either bound, 0 before (see spent).
	requests int
	spentAt  int
	opened   int64

	ip       netip.Addr
	ipText   []byte
	portText []byte
	// rportText is the client's port ($remote_port).
	rportText []byte
	// lip is the connection's local address as gnet gives it: the
	// listener's, unspecified on a listener bound to every address.
	// saddrText is $server_addr, the address the client dialled, read
	// (serverAddr) the first time a request asks for it; empty before.
	lip       netip.Addr
	saddrText []byte

	// parser and req hold the head being read (csIdle, csHead): req's
	// slices alias gnet's read buffer until discardHead.
	parser httpparse.RequestParser
	req    httpparse.Request

	exchange
	exchangeBufs // the exchange's buffers, kept across exchanges

	pause   pauseState
	liveIdx int32 // position in Worker.live
	// awaitSeq numbers the connection's Awaits, across exchanges and the
	// connections that reuse this clientConn: a Wake whose ticket carries
	// another number finds its request gone.
	awaitSeq uint64
}

func (w *Worker) newClient(c gnet.Conn) *clientConn {
	var cc *clientConn
	if n := len(w.freeConns); n > 0 {
		cc = w.freeConns[n-1]
		w.freeConns = w.freeConns[:n-1]
	} else {
		cc = &clientConn{w: w}
		cc.idx = -1
		cc.pause.idx = -1
	}
	cc.c = c
	cc.io = c
	cc.state = csIdle
	cc.closed = false
	cc.requests, cc.spentAt = 0, 0
	cc.opened = w.now
	cc.linger = false
	cc.parser.Limits = w.cfg.Limits
	cc.parser.Reset()
	var rport int
	cc.ip, rport = addrOf(c.RemoteAddr())
	cc.ipText = cc.ip.AppendTo(cc.ipText[:0])
	cc.rportText = strconv.AppendInt(cc.rportText[:0], int64(rport), 10)
	var lport int
	cc.lip, lport = addrOf(c.LocalAddr())
	cc.saddrText = cc.saddrText[:0]
	cc.portText = strconv.AppendInt(cc.portText[:0], int64(lport), 10)
	if w.tlsPort(lport) {
		cc.startTLS()
	} else {
		cc.tls = nil
	}
	// As nginx, client_header_timeout counts from the accept to the end of
	// the first head; readHeads does not restart it at the first byte.
	w.setDeadline(cc, int64(w.cfg.HeaderTimeout))
	w.trackOpen(cc)
	return cc
}

func (cc *clientConn) slot() *timerSlot { return &cc.timerSlot }

// expire: a client timeout. While waiting for a head the connection is
// closed silently (nginx answers nothing to an idle keep-alive client and
// 408 only when a head had started).
func (cc *clientConn) expire() {
	if cc.closed {
		return
	}
	if cc.state == csHead {
		cc.answerAndClose(408)
		return
	}
	if cc.state == csBody {
		// client_body_timeout while the body is read for the plugins:
		// nginx's 408.
		cc.answerAndClose(408)
		return
	}
	if cc.state == csAwait {
		// The plugin's operation outlived awaitLimit: its Wake, if it
		// ever comes, finds the exchange gone (Abandon).
		cc.plugin.waiting = false
		cc.answerAndClose(504)
		return
	}
	if cc.state == csDelay {
		if cc.plugin.exited {
			cc.answerExit()
		} else {
			cc.proceed() // a plugin's Delay has passed
		}
		return
	}
	cc.w.closeConn(cc.c)
}

// traffic handles readable data from the client.
func (cc *clientConn) traffic() gnet.Action {
	if cc.tls != nil {
		if act, ok := cc.tlsTraffic(); !ok {
			return act
		}
	}
	cc.guard.enter()
	act := cc.traffic0()
	if cc.guard.leave() {
		return gnet.Close
	}
	if cc.tls != nil && cc.tls.ended() {
		// The client's close_notify, a fatal alert or a record that
		// fails: once what came before it is read, the connection
		// closes, as at an EOF.
		return gnet.Close
	}
	return act
}

func (cc *clientConn) traffic0() gnet.Action {
	switch cc.state {
	case csIdle, csHead:
		if cc.waitsForFlush() {
			cc.w.pauseRead(cc.c) // a no-op unless it was resumed meanwhile
			return gnet.None
		}
		return cc.readHeads()
	case csHold:
		cc.holdBody()
	case csBody:
		cc.readBody()
		if cc.state == csIdle {
			return cc.readHeads()
		}
	case csProxy:
		if cc.pause.on {
			cc.w.pauseRead(cc.c)
			return gnet.None
		}
		if !cc.reqDone && cc.up != nil && cc.up.state == usBusy {
			cc.pumpBody()
		} else if cc.io.InboundBuffered() > maxPipelined {
			cc.pauseFor(nil)
		}
	case csDiscard:
		cc.discardBody()
		if cc.state == csIdle {
			return cc.readHeads()
		}
	case csDelay, csAwait:
		// The answer is not out yet: input waits, as while proxying.
		if cc.io.InboundBuffered() > maxPipelined {
			cc.pauseFor(nil)
		}
	case csTunnel:
		cc.tunnelIn()
	case csClosing:
		_, _ = cc.io.Discard(-1)
	case csLinger:
		_, _ = cc.io.Discard(-1)
		cc.lingerWait()
	}
	return gnet.None
}

// readHeads parses and starts requests while whole heads are buffered and
// the previous request is done (pipelining answers in order: the next head
// is not looked at before the current response ends, nor while a large
// answer waits to be flushed).
func (cc *clientConn) readHeads() gnet.Action {
	for (cc.state == csIdle || cc.state == csHead) && !cc.closed && !cc.guard.closeAsked && !cc.waitsForFlush() {
		buf, _ := cc.io.Peek(-1)
		if len(buf) == 0 {
			return gnet.None
		}
		if cc.state == csIdle {
			// A head has begun. On a kept-alive connection the wait so
			// far was keepalive_timeout's and client_header_timeout starts
			// now; on a fresh one it has run since the accept.
			cc.state = csHead
			if cc.requests > 0 {
				cc.w.setDeadline(cc, int64(cc.w.cfg.HeaderTimeout))
			}
		}
		err := cc.parser.Parse(buf, &cc.req)
		if err == httpparse.ErrNeedMore {
			return gnet.None
		}
		if err != nil {
			cc.answerAndClose(httpparse.Status(err))
			return gnet.None
		}
		cc.start()
	}
	return gnet.None
}

// start begins the exchange of the parsed request in cc.req (cc.exchange is
// zero: resetExchange ended the last one), routes it and hands
// it to an upstream or answers it. It discards the head from the client
// buffer. The state is csHead until the exchange's own phase is known.
func (cc *clientConn) start() {
	w := cc.w
	r := &cc.req
	if w.cfg.DropUnderscores {
		r.Headers = dropUnderscored(r.Headers)
	}
	cc.requests++
	cc.logOn = w.alog != nil
	w.requests++
	w.cfg.Node.Requests.Add(1)
	w.clearDeadline(cc)
	// Draining, the answer says Connection: close, unless the client has
	// already sent the next request: that one is answered too, not lost.
	cc.keepAlive = r.KeepAlive && (!w.draining || cc.pipelined()) && !cc.spent()
	cc.http10 = r.Major == 1 && r.Minor == 0
	cc.isHead = string(r.Method) == "HEAD"
	cc.idempotent = isIdempotent(r.Method)
	cc.started = w.now
	cc.host, cc.hostBuf = lowerASCII(httpvar.HostOnly(r.Host), cc.hostBuf)
	switch {
	case r.Chunked:
		cc.reqBody = bodyChunked
	case r.ContentLength > 0:
		cc.reqBody = bodyLength
		cc.reqLeft = r.ContentLength
	default:
		cc.reqBody = bodyNone
	}
	hasBody := cc.reqBody != bodyNone
	if max := w.cfg.MaxBodySize; max > 0 && r.ContentLength > max {
		cc.discardHead()
		cc.answerAndClose(413)
		return
	}
	snap := w.snap.Load()
	if snap == nil {
		cc.discardHead()
		cc.answerLocal(503, ctHTML, errorPages[503], hasBody)
		return
	}
	path, pb, ok := normalizePath(r.Path, cc.pathBuf)
	cc.pathBuf = pb
	cc.curPath = path
	if ok && w.cfg.NormalizeURILikeServlet {
		ok = cc.servletRoute(path)
	}
	if !ok {
		cc.discardHead()
		cc.answerAndClose(400)
		return
	}
	if st := cc.checkClient(); st != 0 {
		// Before routing, as APISIX's access phase checks it.
		cc.discardHead()
		cc.answerLocal(st, ctHTML, errorPages[st], hasBody)
		return
	}
	rq := router.Request{
		Method:     router.ParseMethod(r.Method),
		Path:       cc.curPath,
		Host:       r.Host,
		RemoteAddr: cc.ip,
		Vars:       (*reqVars)(cc),
	}
	idx, ok := snap.router.Match(&rq)
	if !ok {
		// The global rules' rewrite and access run before the 404, as
		// APISIX runs them.
		if snap.global != nil {
			cc.snap = snap
			if hasBody {
				if limit := cc.bodyLimit(snap, nil); limit > 0 {
					cc.readBodyFirst(limit)
					return
				}
			}
			if cc.startPlugins(snap, nil) {
				return
			}
		}
		cc.routed()
		return
	}
	rt := snap.slots.at(idx)
	cc.snap, cc.rt = snap, rt
	if len(rt.plugins.Plugins) > 0 || snap.global != nil {
		if hasBody {
			if limit := cc.bodyLimit(snap, rt); limit > 0 {
				cc.readBodyFirst(limit)
				return
			}
		}
		if cc.startPlugins(snap, rt) {
			return
		}
	}
	cc.routed()
}

// servletRoute applies Config.NormalizeURILikeServlet to the request,
// given its path normalised (normalizePath). curPath, the path routing,
// the plugins and $uri see, becomes that path without its segments'
// parameters (servletPath). When normalizePath had to change the path,
// the upstream gets it, its parameters kept, escaped again, with the
// query as received, instead of the target as received (servletTarget):
// a servlet container that decodes it once has the path that was routed,
// parameters aside, with no dot segment left to resolve otherwise than
// routing did ("/a/.;/../b" is routed and sent as "/a/b"). A path
// normalizePath left alone goes as it came. It reports false for a path
// to answer 400 to.
//
// APISIX sends the upstream $uri, decoded and without the query, whenever
// the option is on: the query is lost, and a container decodes the path a
// second time ("%252e%252e" is a dot segment to it, not to routing).
func (cc *clientConn) servletRoute(path []byte) bool {
	sp, sb, ok := servletPath(path, cc.servletBuf)
	cc.servletBuf = sb
	if !ok {
		return false
	}
	cc.curPath = sp
	r := &cc.req
	if len(path) == len(r.Path) && (len(path) == 0 || &path[0] == &r.Path[0]) {
		return true
	}
	t := appendEscapedPath(cc.targetBuf[:0], path)
	if r.Query != nil {
		t = append(t, '?')
		t = append(t, r.Query...)
	}
	cc.targetBuf = t
	cc.servletTarget = true
	return true
}

// spent says whether the request being started is the connection's last
// by keepalive_requests or keepalive_time. Unlike nginx, which drops what
// the client pipelined behind that request, the worker answers the
// requests already buffered behind it, each of them in turn the last if
// nothing follows it in the buffer, as a draining worker does; a client
// that keeps the pipeline full is closed maxSpentPipelined requests past
// the bound, and what it pipelined beyond is dropped with the lingering
// close, for it to send again on a new connection.
func (cc *clientConn) spent() bool {
	if cc.spentAt == 0 {
		cfg := &cc.w.cfg
		if !(cfg.KeepaliveRequests > 0 && cc.requests >= cfg.KeepaliveRequests) &&
			!(cfg.KeepaliveTime > 0 && cc.w.now-cc.opened >= int64(cfg.KeepaliveTime)) {
			return false
		}
		cc.spentAt = cc.requests
	}
	return !cc.pipelined() || cc.requests-cc.spentAt >= maxSpentPipelined
}

// maxSpentPipelined bounds the requests a connection past
// keepalive_requests or keepalive_time answers because the client had
// pipelined them (see spent).
const maxSpentPipelined = 16

// routed goes on with a request once its request phases are done and no
// plugin ended it: to the route's upstream, or the 404 of a request no
// route matched (cc.rt nil) that ran the global rules. The head may be
// gone from gnet's buffer already (an Await kept a copy).
func (cc *clientConn) routed() {
	r := &cc.req
	if cc.plugin.split != nil {
		cc.rt = cc.plugin.split
	}
	rt := cc.rt
	hasBody := cc.reqBody != bodyNone
	if rt == nil {
		cc.discardHead()
		cc.answerLocal(404, ctText, notFoundBody, hasBody)
		return
	}
	if rt.up == nil {
		cc.discardHead()
		cc.answerLocal(503, ctHTML, errorPages[503], hasBody)
		return
	}
	if len(rt.up.nodes) == 0 {
		cc.discardHead()
		cc.answerLocal(502, ctHTML, errorPages[502], hasBody)
		return
	}
	if rt.up.bal.kind == balCHash {
		cc.balKey = cc.requestKey(&rt.up.bal.key)
	}
	cc.startTee()
	cc.buildHead()
	cc.discardHead()
	if r.Expect100 && hasBody && cc.io.InboundBuffered() == 0 {
		if _, _ = cc.io.Write(continue100); cc.closed {
			return // the client reset: the exchange ended with it
		}
	}
	if cc.plugin.hold > 0 {
		// A plugin's Delay: the request waits on the connection's
		// deadline (expire), as an exit's answer does.
		cc.state = csDelay
		cc.w.setDeadline(cc, int64(cc.plugin.hold))
		return
	}
	cc.proceed()
}

// proceed sends the request upstream: once its chunked body is judged
// against client_max_body_size (holdForLimit), or now.
func (cc *clientConn) proceed() {
	if cc.holdForLimit() {
		return
	}
	cc.state = csProxy
	cc.dispatch()
}

var continue100 = []byte("HTTP/1.1 100 Continue\r\n\r\n")

// pipelined reports whether the client has sent bytes past the current
// request and its body: the start of a pipelined request. It is false while
// the end of a chunked body is not known yet.
func (cc *clientConn) pipelined() bool {
	rest := int64(cc.io.InboundBuffered())
	switch cc.state {
	case csIdle, csHead: // cc.req's head is still buffered
		if cc.req.Chunked {
			return false
		}
		rest -= int64(cc.req.HeadLen)
		if cc.req.ContentLength > 0 {
			rest -= cc.req.ContentLength
		}
	default:
		switch cc.reqBody {
		case bodyLength:
			rest -= cc.reqLeft
		case bodyChunked:
			if !cc.reqChunk.Done() {
				return false
			}
		}
	}
	return rest > 0
}

// discardHead drops the request head from gnet's buffer, once copied for
// the plugin phases still to run (keepHead).
func (cc *clientConn) discardHead() {
	if cc.headGone {
		return
	}
	if (cc.plugin.late || cc.logOn) && !cc.plugin.kept {
		cc.keepHead()
	}
	_, _ = cc.io.Discard(cc.req.HeadLen)
	cc.parser.Reset()
	cc.headGone = true
}

func isIdempotent(m []byte) bool {
	switch string(m) {
	case "GET", "HEAD", "PUT", "DELETE", "OPTIONS", "TRACE":
		return true
	}
	return false
}

// dispatch sends the request to the next node the balancer picks: an idle
// kept-alive connection of that node's pool, or a new one.
func (cc *clientConn) dispatch() {
	w := cc.w
	up := cc.rt.up
	cc.releaseNode(true)
	idx := up.bal.pick(cc.tried, cc.balKey, w.now)
	if idx < 0 {
		cc.giveUp()
		return
	}
	nd := up.nodes[idx]
	cc.node, cc.held = idx, true
	cc.tries++
	cc.upStart, cc.upConnected = w.now, 0
	var name []byte
	if up.tls != nil {
		// The connection is made for the Host the request goes with.
		w.sni = serverName(w.sni[:0], cc.upstreamHost())
		name = w.sni
	}
	p := w.poolFor(up, nd, name)
	if up.tls != nil && up.tls.fault != nil {
		// Its client certificate's ssl object is gone: the attempt
		// fails as a connect does (502, the next node), and no pooled
		// connection made with the old one serves it.
		uc := p.newConn()
		link(cc, uc)
		err := up.tls.fault
		_ = w.loop.Execute(context.Background(), gnet.RunnableFunc(func(context.Context) error {
			uc.dialFailed(err)
			return nil
		}))
		return
	}
	if nd.dns != nil {
		w.dnsPrune(p, nd)
	}
	cc.upAP = netip.AddrPort{}
	if uc := p.get(); uc != nil {
		if nd.dns != nil {
			cc.upAP = uc.ap
		}
		link(cc, uc)
		cc.connected()
		return
	}
	uc := p.newConn()
	link(cc, uc)
	w.dial(uc, nd, cc.rt.to.connect)
	if nd.dns != nil {
		cc.upAP = uc.ap // set by dial, once the name gave an address
	}
}

// connected runs when the attempt's upstream connection is ready, taken
// from its pool (dispatch) or dialed (upConn.opened): the request goes.
func (cc *clientConn) connected() {
	cc.upConnected = cc.w.now
	cc.send()
}

// upstreamHost is the Host the request goes to the attempt's node with
// (APISIX's $upstream_host), as pass_host says.
func (cc *clientConn) upstreamHost() []byte {
	up := cc.rt.up
	switch {
	case cc.plugin.upHost: // a plugin's (proxy-rewrite's host)
		return cc.upHost
	case up.passHost == passHostRewrite:
		return viewBytes(up.upstreamHost)
	case up.passHost == passHostPass && len(cc.hostValue) > 0:
		return cc.hostValue
	}
	// pass_host=node, or an HTTP/1.0 request without Host
	return viewBytes(up.nodes[cc.node].hostHeader)
}

// send writes the request head, and whatever body is buffered, to cc.up.
func (cc *clientConn) send() {
	uc := cc.up
	hl := cc.hostLine[:0]
	hl = append(hl, "Host: "...)
	hl = append(hl, cc.upstreamHost()...)
	hl = append(hl, '\r', '\n')
	cc.hostLine = hl

	// The body reader's state, to start over from if this attempt fails
	// before anything left the client buffer.
	chunk, left, taken, tee := cc.reqChunk, cc.reqLeft, cc.bodyBytes, cc.markTee()
	if cc.reqBody == bodyChunked {
		// A fault anywhere in the chunked body buffered so far refuses the
		// request before any of it is written, even past the first write's
		// worth of chunks.
		buf, _ := cc.io.Peek(-1)
		probe := cc.reqChunk
		if _, _, err := probe.Scan(buf); err != nil {
			cc.badBody = 400
			cc.rejectBody(false)
			return
		}
	}
	iov := append(cc.w.iov[:0], cc.head[:cc.lineEnd], hl, cc.head[cc.lineEnd:])
	iov, n, done := cc.takeBody(iov)
	if cc.badBody != 0 {
		cc.w.iov = iov[:0]
		clear(iov)
		cc.rejectBody(false)
		return
	}
	uc.write(iov)
	cc.w.iov = iov[:0]
	clear(iov)
	if uc.state == usClosed {
		cc.reqChunk, cc.reqLeft, cc.bodyBytes = chunk, left, taken
		cc.undoTee(tee)
		cc.upstreamFailed(uc, 502)
		return
	}
	if n > 0 {
		_, _ = cc.io.Discard(n)
		cc.bodySent = true
	}
	cc.afterBodyWrite(done)
	if !done && cc.up == uc && !cc.pause.on && cc.io.InboundBuffered() > 0 {
		cc.pumpBody() // more than one write's worth of chunks was buffered
	}
}

// maxBodyPieces bounds the runs of chunk data gathered into one write, so
// that a body of many tiny chunks cannot make an iovec list longer than
// writev takes.
const maxBodyPieces = 64

// Framing the gateway writes for chunked bodies it re-frames.
var (
	crlf      = []byte("\r\n")
	lastChunk = []byte("0\r\n\r\n")
)

// takeBody appends to iov the request body bytes buffered from the client
// that may go to the upstream now, framed by the gateway: a Content-Length
// body as it came; a chunked body as one chunk holding the data of the
// chunks decoded so far (at most maxBodyPieces runs of it), followed by the
// last chunk once the body ends. Chunk extensions and trailer fields are
// checked, never forwarded (RFC 9112 §7.1.1: a proxy may drop them; nginx
// does). It returns iov, the number of client bytes those stand for, which
// the caller discards once they are written, and whether the body ends
// there. The slices appended alias gnet's read buffer and cc.sizeLine: they
// are valid until that Discard, and until the next takeBody. An invalid or
// oversized chunked body sets cc.badBody and appends nothing.
func (cc *clientConn) takeBody(iov [][]byte) ([][]byte, int, bool) {
	switch cc.reqBody {
	case bodyNone:
		return iov, 0, true
	case bodyLength:
		buf, _ := cc.io.Peek(-1)
		n := len(buf)
		if int64(n) >= cc.reqLeft {
			n = int(cc.reqLeft)
		}
		cc.reqLeft -= int64(n)
		if n > 0 {
			iov = append(iov, buf[:n])
		}
		if cc.teeMax > 0 {
			cc.tee(buf[:n], cc.reqLeft == 0)
		}
		return iov, n, cc.reqLeft == 0
	}
	buf, _ := cc.io.Peek(-1)
	at := len(iov)
	iov, n, total, done, err := reframe(&cc.reqChunk, iov, buf, &cc.sizeLine, true)
	if err != nil {
		cc.badBody = 400
		return iov[:at], 0, false
	}
	// client_max_body_size for a body of unknown length, counted in data
	// bytes as nginx counts it.
	cc.bodyBytes += int64(total)
	if max := cc.w.cfg.MaxBodySize; max > 0 && cc.bodyBytes > max {
		cc.badBody = 413
		return iov[:at], 0, false
	}
	if cc.teeMax > 0 {
		cc.teeRuns(iov[at:], total, done)
	}
	return iov, n, done
}

// reframe decodes the chunked body bytes at the start of buf with c and
// appends their data runs (at most maxBodyPieces) to iov: framed, as one
// chunk whose size line is written into *sizeLine, followed by the last
// chunk once the body ends; unframed, as the bare data. It returns iov, the
// bytes of buf consumed, the data bytes appended and whether the body
// ended. On a malformed body it stops at the fault and returns the error
// with what came before it (a whole chunk, when framed). The slices
// appended alias buf and *sizeLine.
func reframe(c *httpparse.Chunked, iov [][]byte, buf []byte, sizeLine *[]byte, framed bool) ([][]byte, int, int, bool, error) {
	at := len(iov)
	if framed {
		iov = append(iov, nil) // the chunk-size line, once the size is known
	}
	n, total, pieces, done := 0, 0, 0, false
	var err error
	for n < len(buf) && pieces < maxBodyPieces && !done {
		k, data, end, derr := c.Decode(buf[n:])
		if derr != nil {
			err = derr
			break
		}
		n += k
		done = end
		if len(data) > 0 {
			iov = append(iov, data)
			total += len(data)
			pieces++
		}
	}
	if !framed {
		return iov, n, total, done, err
	}
	if total == 0 {
		iov = iov[:at]
	} else {
		*sizeLine = httpparse.AppendChunkSize((*sizeLine)[:0], total)
		iov[at] = *sizeLine
		iov = append(iov, crlf)
	}
	if done {
		iov = append(iov, lastChunk)
	}
	return iov, n, total, done, err
}

// pumpBody forwards more request body to the busy upstream, one write at a
// time while the client buffer holds more and the upstream takes it.
func (cc *clientConn) pumpBody() {
	w := cc.w
	uc := cc.up
	for {
		iov, n, done := cc.takeBody(w.iov[:0])
		w.iov = iov[:0]
		if cc.badBody != 0 {
			clear(iov)
			cc.rejectBody(true)
			return
		}
		if n == 0 && !done {
			clear(iov)
			return
		}
		if len(iov) > 0 {
			uc.write(iov)
		}
		clear(iov)
		if uc.state == usClosed {
			cc.upstreamFailed(uc, 502)
			return
		}
		_, _ = cc.io.Discard(n)
		cc.bodySent = true
		cc.afterBodyWrite(done)
		if done || cc.up != uc || cc.pause.on || cc.io.InboundBuffered() == 0 {
			return
		}
	}
}

func (cc *clientConn) afterBodyWrite(done bool) {
	w := cc.w
	uc := cc.up
	if done {
		cc.reqDone = true
		w.clearDeadline(cc)
		w.setDeadline(uc, int64(cc.rt.to.read))
		return
	}
	w.setDeadline(cc, int64(w.cfg.BodyTimeout))
	w.setDeadline(uc, int64(cc.rt.to.send))
	if uc.c.OutboundBuffered() > highWater {
		cc.pauseFor(uc.c)
	}
}

// rejectBody ends an exchange whose chunked request body is invalid, as
// nginx does ("client sent invalid chunked body"): 400 and close, or just
// close once a response started. The upstream connection is dropped when
// written reports that part of the request went out on it; otherwise it is
// clean and goes back to its pool. Nothing after the fault is forwarded.
func (cc *clientConn) rejectBody(written bool) {
	if uc := cc.up; uc != nil {
		unlink(cc, uc)
		if written {
			uc.abort()
		} else {
			uc.pool.put(uc)
		}
	}
	if cc.respStarted {
		cc.closeSoon()
		return
	}
	cc.answerAndClose(cc.badBody)
}

// upstreamFailed handles an attempt that ended without a usable response:
// a refused or timed-out connect, a reset, a close before the response.
// It retries on the next node when APISIX would, else answers status.
func (cc *clientConn) upstreamFailed(uc *upConn, status int) {
	unlink(cc, uc)
	if cc.closed {
		return
	}
	if cc.respStarted {
		cc.w.logFault(uc, cc, 0)
		if cc.closeFramed {
			// The close ends the body for this client: a FIN would pass
			// the cut answer off as whole, a reset does not. (HTTP/1.1
			// clients see the missing length or last chunk.)
			_ = cc.c.SetLinger(0)
		}
		cc.w.closeConn(cc.c)
		return
	}
	replayable := !cc.bodySent
	stale := uc.reused && !uc.gotBytes && uc.sentAny
	switch {
	case stale && replayable && cc.idempotent && cc.freeRetries < 3:
		// The origin closed a kept-alive connection just as it was
		// reused: replayed, not counted against the retries, but listed
		// in $upstream_addr and $upstream_status as nginx lists it.
		cc.attemptFailed(status)
		cc.freeRetries++
		cc.tries--
		cc.dispatch()
		return
	}
	cc.w.logFault(uc, cc, status)
	cc.attemptFailed(status)
	up := cc.rt.up
	inTime := up.retryTimeout == 0 || cc.w.now-cc.started < int64(up.retryTimeout)
	if replayable && (!uc.sentAny || cc.idempotent) && cc.tries <= int(up.retries) && inTime {
		cc.passiveFailure(status)
		cc.tried.add(cc.node)
		cc.dispatch()
		return
	}
	cc.passiveFailure(status)
	cc.answerError(status)
}

// attemptFailed records the attempt at cc.node as failed with status:
// X-APISIX-Upstream-Status, $upstream_status and $upstream_addr list it.
func (cc *clientConn) attemptFailed(status int) {
	cc.statuses = append(cc.statuses, status)
	if len(cc.upAddrs) > 0 {
		cc.upAddrs = append(cc.upAddrs, ", "...)
	}
	cc.upAddrs = cc.appendAttemptAddr(cc.upAddrs)
}

// attemptsListed reports whether the last attempt is in the lists of
// failed ones (attemptFailed): every attempt begun (tries, and the stale
// connections' replays) failed.
func (cc *clientConn) attemptsListed() bool {
	return cc.tries+cc.freeRetries == len(cc.statuses)
}

// bodyRead reports whether the request body has been taken from the client
// in full (always, for a request without one), so that the connection can
// carry the next request even when the upstream never got this one.
func (cc *clientConn) bodyRead() bool {
	switch cc.reqBody {
	case bodyNone:
		return true
	case bodyLength:
		return cc.reqLeft == 0
	default:
		return cc.reqChunk.Done()
	}
}

// giveUp answers when the balancer has no node left to try.
func (cc *clientConn) giveUp() {
	status := 502
	if n := len(cc.statuses); n > 0 {
		status = cc.statuses[n-1]
	}
	cc.answerError(status)
}

// answerError answers a proxy failure (502/504) with APISIX's page and the
// upstream statuses seen.
func (cc *clientConn) answerError(status int) {
	w := cc.w
	body := errorPages[status]
	if cc.plugin.filterBody && !cc.isHead {
		body = cc.filterLocal(status, body)
	}
	b := cc.localHead(w.scratch[:0], status, ctHTML, len(body), cc.keepAlive && cc.bodyRead())
	withBody := cc.localBody()
	b = b[:len(b)-2]
	if len(cc.statuses) > 0 {
		b = append(b, "X-APISIX-Upstream-Status: "...)
		for i, s := range cc.statuses {
			if i > 0 {
				b = append(b, ", "...)
			}
			b = strconv.AppendInt(b, int64(s), 10)
		}
		b = append(b, "\r\n"...)
	}
	b = append(b, "\r\n"...)
	cc.keepRespHead(b)
	if withBody {
		b = append(b, body...)
		if cc.plugin.respMax > 0 {
			cc.teeRespBody(body)
		}
	}
	w.scratch = b
	cc.write(b)
	cc.requestDone()
}

// localHead appends the head of an answer the gateway makes itself.
// The plugins' header_filter runs first, and the headers they set go in,
// replacing the worker's Content-Type, Date or Server. An answer whose
// status has no body (1xx, 204, 304: a plugin's Exit) says no
// Content-Length, and its caller sends no body (localBody).
func (cc *clientConn) localHead(b []byte, status int, ct string, clen int, keep bool) []byte {
	w := cc.w
	cc.headerFilter(status)
	status = cc.respStatus // a plugin's SetStatus
	plug := len(cc.respHdr) > 0
	b = appendStatusLine(b, status)
	if !plug || !cc.respHas("Date") {
		b = append(b, w.dateLine...)
	}
	if !plug || !cc.respHas("Content-Type") {
		b = append(b, "Content-Type: "...)
		b = append(b, ct...)
		b = append(b, '\r', '\n')
	}
	if !bodylessStatus(status) && !(plug && cc.lengthRemoved(status)) {
		b = append(b, "Content-Length: "...)
		b = strconv.AppendInt(b, int64(clen), 10)
		b = append(b, "\r\n"...)
	}
	if keep {
		if cc.http10 {
			b = append(b, "Connection: keep-alive\r\n"...)
		}
	} else {
		b = append(b, "Connection: close\r\n"...)
	}
	if !plug || !cc.respHas("Server") {
		b = append(b, w.server...)
	}
	if plug {
		b = cc.appendRespHeaders(b)
	}
	b = append(b, "\r\n"...)
	cc.respHead = len(b)
	cc.keepRespHead(b)
	return b
}

// localBody reports whether the body of the gateway's own answer follows
// the head localHead wrote: not for a HEAD request, nor for a status
// whose framing has no body, which would otherwise be read as the start
// of the next answer on the connection.
func (cc *clientConn) localBody() bool {
	return !cc.isHead && !bodylessStatus(cc.respStatus)
}

// bodylessStatus reports whether a response of status has no body by its
// framing, whatever its fields say (RFC 9112 §6.3): 1xx, 204 and 304.
func bodylessStatus(status int) bool {
	return status < 200 || status == 204 || status == 304
}

// answerLocal answers a request that never reached an upstream. A request
// whose body is still unread cannot be followed by another on the same
// connection, so the connection closes after it.
func (cc *clientConn) answerLocal(status int, ct string, body []byte, hasBody bool) {
	w := cc.w
	// A body is read and dropped, as nginx does, unless the client waits
	// for 100 Continue before sending it: then it may never come.
	keep := cc.keepAlive && (!hasBody || !cc.req.Expect100)
	if cc.plugin.filterBody && !cc.isHead {
		body = cc.filterLocal(status, body)
	}
	b := cc.localHead(w.scratch[:0], status, ct, len(body), keep)
	if cc.localBody() {
		b = append(b, body...)
		if cc.plugin.respMax > 0 {
			cc.teeRespBody(body)
		}
	}
	w.scratch = b
	if cc.write(b); cc.closed {
		return // the client reset: the exchange ended with it
	}
	cc.keepAlive = keep
	cc.reqDone = true
	if keep && hasBody {
		cc.state = csDiscard
		cc.lingerEnd = w.now + int64(lingeringTime)
		cc.discardBody()
		return
	}
	cc.requestDone()
}

// discardBody reads and drops the body of a request the worker answered
// itself (nginx's discard_request_body), then ends the exchange so that
// the connection serves the next request. It waits lingeringTimeout for
// more of the body, lingeringTime in all; a malformed or oversized chunked
// body closes the connection.
func (cc *clientConn) discardBody() {
	w := cc.w
	for {
		iov, n, done := cc.takeBody(w.iov[:0])
		clear(iov)
		w.iov = iov[:0]
		if cc.badBody != 0 {
			cc.keepAlive = false
			cc.closing(true)
			return
		}
		if n > 0 {
			_, _ = cc.io.Discard(n)
		}
		if done {
			cc.requestDone()
			return
		}
		if n == 0 {
			cc.lingerWait()
			return
		}
	}
}

// write writes b to the client and counts what went out in sent ($bytes_sent,
// the log phase's BytesSent). gnet keeps what the socket did not take, so
// b may be reused once write returns. A failed write closes the connection
// (cc.closed), which the caller checks where it goes on.
func (cc *clientConn) write(b []byte) {
	n, _ := cc.io.Write(b)
	cc.sent += int64(n)
}

// writev is write for a list of buffers, the iovecs of one writev(2).
func (cc *clientConn) writev(iov [][]byte) {
	n, _ := cc.io.Writev(iov)
	cc.sent += int64(n)
}

// answerAndClose answers a malformed or refused request and closes: nothing
// of it was forwarded.
func (cc *clientConn) answerAndClose(status int) {
	w := cc.w
	cc.keepAlive = false
	body := errorPages[status]
	b := cc.localHead(w.scratch[:0], status, ctHTML, len(body), false)
	if cc.localBody() {
		b = append(b, body...)
	}
	w.scratch = b
	cc.write(b)
	cc.closing(true) // the rest of the request may still be on its way
}

// requestDone ends the current exchange (resetExchange): the next head may be
// read, or the connection closes once its answer is flushed. The upstream
// connection, if any, was unlinked already.
func (cc *clientConn) requestDone() {
	keep, read := cc.keepAlive, cc.bodyRead()
	cc.logPhase()
	cc.accessLog()
	cc.resetExchange()
	if cc.closed {
		return
	}
	if !keep || !read {
		cc.closing(!read)
		return
	}
	cc.awaitHead()
}

// awaitHead waits for the next request head between two exchanges
// (csIdle), or reads the one already buffered.
func (cc *clientConn) awaitHead() {
	w := cc.w
	cc.state = csIdle
	cc.idleSince = w.now
	cc.parser.Reset()
	if cc.c.OutboundBuffered() > highWater {
		// As nginx does, the next request is read once this answer is
		// out: a client that pipelines requests and reads no answer
		// cannot pile answers up in the worker, and is closed after
		// send_timeout (resumePaused; flushed calls awaitHead again).
		w.clearDeadline(cc)
		cc.pauseFor(cc.c)
		return
	}
	w.setDeadline(cc, int64(w.cfg.KeepaliveTimeout))
	if cc.tls != nil {
		cc.tls.idle()
	}
	if cc.pause.on && cc.io.InboundBuffered() <= maxPipelined {
		// Over maxPipelined the reading stays paused while the buffered
		// requests are served (resumePaused resumes it below lowWater):
		// resuming here would let one more read in per request.
		cc.unpause()
	}
	if !cc.guard.held() && cc.io.InboundBuffered() > 0 {
		// Pipelined requests waited in the buffer for this answer.
		cc.guard.enter()
		cc.readHeads()
		if cc.guard.leave() {
			cc.w.closeConn(cc.c)
		}
	}
}

// closing makes the answer queued the connection's last (csClosing): it
// closes once that is flushed, lingering when linger says the client may
// still be sending.
func (cc *clientConn) closing(linger bool) {
	if cc.tls != nil {
		cc.tls.closeNotify()
	}
	cc.state = csClosing
	cc.linger = linger
	cc.closeWhenFlushed()
}

// closeWhenFlushed closes the connection once gnet has written everything
// queued on it. When the client may still be sending (a request body not
// read, input after the last request) it closes as nginx's lingering_close
// does: FIN first, then input read and thrown away until the client closes
// its side, so that the kernel does not answer that input with a reset
// which could destroy the answer before the client reads it.
func (cc *clientConn) closeWhenFlushed() {
	if cc.closed || cc.state == csLinger {
		return
	}
	if cc.c.OutboundBuffered() == 0 {
		if cc.linger || cc.io.InboundBuffered() > 0 {
			cc.startLinger()
			return
		}
		cc.closeSoon()
		return
	}
	cc.w.setDeadline(cc, int64(cc.w.cfg.SendTimeout))
	cc.pauseFor(cc.c)
}

// nginx's lingering_timeout and lingering_time.
const (
	lingeringTimeout = 5 * time.Second
	lingeringTime    = 30 * time.Second
)

// startLinger sends FIN after the flushed answer and reads on, discarding,
// until the client closes (gnet closes the connection at EOF), stays
// silent for lingeringTimeout, or lingeringTime has passed. It is also how
// a drain closes a quiet connection (sweepIdle), so that a request crossing
// the FIN is dropped with no reset.
func (cc *clientConn) startLinger() {
	w := cc.w
	if cc.pause.on {
		w.unpause(cc)
	}
	w.resumeRead(cc.c) // reading may have been paused until the flush
	if unix.Shutdown(cc.c.Fd(), unix.SHUT_WR) != nil {
		cc.closeSoon()
		return
	}
	cc.state = csLinger
	cc.lingerEnd = w.now + int64(lingeringTime)
	_, _ = cc.io.Discard(-1)
	cc.lingerWait()
}

// lingerWait gives the client lingeringTimeout to send more of what is
// being discarded, and no more than what is left until lingerEnd.
func (cc *clientConn) lingerWait() {
	w := cc.w
	w.setDeadline(cc, min(int64(lingeringTimeout), cc.lingerEnd-w.now))
}

// closeSoon closes the connection now or, while its guard is held, has
// the holder close it (a traffic call returns gnet.Close).
func (cc *clientConn) closeSoon() {
	if cc.guard.held() {
		cc.guard.closeAsked = true
	} else {
		cc.w.closeConn(cc.c)
	}
}

// closedByPeer runs when gnet closes the connection, for whatever reason.
func (cc *clientConn) closedByPeer() {
	w := cc.w
	cc.closed = true
	w.dropDeadline(cc) // a csDelay exchange's answer with it
	w.trackClose(cc)
	cc.logPhase()
	cc.accessLog()
	if cc.pause.on {
		cc.unpauseList()
	}
	if uc := cc.up; uc != nil {
		unlink(cc, uc)
		switch uc.state {
		case usDialing:
			// It joins the pool when the dial completes.
		case usBusy:
			// Half a response: the connection cannot be reused.
			uc.abort()
		case usTunnel:
			uc.clientGone()
		}
	}
	if t := cc.tls; t != nil {
		if t.hs != nil {
			t.hs.abortServer()
		}
		t.raw = nil
	}
	cc.c.SetContext(nil)
	cc.c = nil
	cc.io = nil
	cc.resetExchange()
	cc.req.Reset()
	// A close asked while the guard was held is done; the holder still on
	// the stack lets go of the guard as it returns.
	cc.guard.closeAsked = false
	if len(w.freeConns) < 1024 {
		w.freeConns = append(w.freeConns, cc)
	}
}

// closeConn closes a connection of this loop now (OnClose runs before it
// returns). Not for the connection whose callback is running: that one
// returns gnet.Close.
func (w *Worker) closeConn(c gnet.Conn) {
	if c != nil {
		_ = w.loop.Close(c)
	}
}
