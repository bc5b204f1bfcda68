package worker

import (
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/netip"
	"os"
	"time"

	"github.com/panjf2000/gnet/v2"

	"coregate/httpparse"
)

// Upstream connection states.
const (
	usDialing = iota // connect in progress
	usBusy           // serving cc's request
	usIdle           // in its pool, kept alive
	usClosed
	usTunnel // relaying bytes after a 101 (tunnel.go); never pooled
)

// Response phases.
const (
	rpHead = iota
	rpBody
)

// upConn is one connection to an upstream node, owned by the event loop.
// While busy it serves exactly one client request; response bytes are
// forwarded from gnet's read buffer to the client as they arrive. What
// belongs to that exchange is the embedded upExchange, reset by link.
type upConn struct {
	timerSlot
	w *Worker
	c gnet.Conn
	// io is what the response code reads and the request code writes
	// through: c, or tls once its handshake is done (an https node).
	io   connIO
	tls  *upTLS
	pool *pool
	// cc is the client whose request the connection serves, set and
	// cleared only by link and unlink (exchange.go).
	cc    *clientConn
	state uint8
	guard reentry

	requests int  // requests served, the current one excluded
	gone     bool // gnet closed the connection (OnClose ran); c must not be used

	// parser and resp hold the response head being read; resp's slices
	// alias gnet's read buffer until the head is discarded.
	parser httpparse.ResponseParser
	resp   httpparse.Response

	upExchange
	// sizeLine is the chunk-size line of the chunk takeBody frames, valid
	// until the next takeBody. Buffer: its capacity is reused, it is
	// written from its start each time.
	sizeLine []byte

	poolIdx int
	pause   pauseState

	// connFD is the socket of the loop's own connect while it is in
	// progress (gnet.ConnectTCP), -1 otherwise; ap is its address.
	connFD int
	ap     netip.AddrPort
	// connectTO bounds the TLS handshake of a connection to an https
	// node, once connected (Worker.dial sets it).
	connectTO time.Duration
}

func (uc *upConn) slot() *timerSlot { return &uc.timerSlot }

// pool is the keep-alive pool of one node address (scheme#host#port), shared
// by every upstream that names the node, kept across snapshots. The pool
// of an https node is also that of one server name and one TLS identity
// (verification, client certificate): a connection serves only requests
// that would have made the same one, as APISIX keys its pools
// scheme#host#port#sni#client_cert.
type pool struct {
	w    *Worker
	addr string // the node's host:port, for the error log
	// node is the key of its node (node.key), for prunePools.
	node string
	// name is the server name of an https pool (SNI, verification), tls
	// its connections' crypto/tls configuration; nil for plain http.
	name        string
	tls         *tls.Config
	idle        []*upConn // most recently used last
	size        int
	idleTO      time.Duration
	maxRequests int
	// dnsSeen is the node's addresses when its idle connections were last
	// checked against them (Worker.dnsPrune); nil for a node by IP.
	dnsSeen *dnsAddrs
}

func (p *pool) newConn() *upConn {
	uc := &upConn{w: p.w, pool: p, poolIdx: -1, state: usDialing, connFD: -1}
	uc.idx = -1
	uc.pause.idx = -1
	uc.parser.Limits = p.w.cfg.Limits
	return uc
}

// get pops the most recently used idle connection, or nil.
func (p *pool) get() *upConn {
	n := len(p.idle)
	if n == 0 {
		return nil
	}
	uc := p.idle[n-1]
	p.idle[n-1] = nil
	p.idle = p.idle[:n-1]
	uc.poolIdx = -1
	p.w.clearDeadline(uc)
	return uc
}

// put parks an idle connection, closing the oldest one when the pool is full.
func (p *pool) put(uc *upConn) {
	if p.size <= 0 {
		uc.close()
		return
	}
	if len(p.idle) >= p.size {
		old := p.idle[0]
		p.remove(old)
		old.close()
	}
	uc.state = usIdle
	if uc.tls != nil {
		uc.tls.idle()
	}
	uc.poolIdx = len(p.idle)
	p.idle = append(p.idle, uc)
	p.w.setDeadline(uc, int64(p.idleTO))
}

func (p *pool) remove(uc *upConn) {
	i := uc.poolIdx
	if i < 0 || i >= len(p.idle) || p.idle[i] != uc {
		return
	}
	copy(p.idle[i:], p.idle[i+1:])
	p.idle[len(p.idle)-1] = nil
	p.idle = p.idle[:len(p.idle)-1]
	for j := i; j < len(p.idle); j++ {
		p.idle[j].poolIdx = j
	}
	uc.poolIdx = -1
}

// write sends request bytes on the connection. gnet closes the connection
// inside Writev when the write fails; the guard leaves that failure to the
// caller, which sees usClosed.
func (uc *upConn) write(iov [][]byte) {
	uc.sentAny = true
	uc.guard.enter()
	_, _ = uc.io.Writev(iov)
	if uc.guard.leave() {
		uc.close()
	}
}

// opened runs on the loop when a dial completed and gnet enrolled the
// connection. To an https node the TLS handshake follows, and the
// connection is ready at its end.
func (uc *upConn) opened(c gnet.Conn) {
	uc.w.clearDeadline(uc) // the connect's
	uc.connFD = -1
	uc.c = c
	uc.io = c
	if uc.pool.tls != nil {
		uc.startTLS(int64(uc.connectTO))
		return
	}
	uc.ready()
}

// ready runs when the connection can carry a request: its request goes,
// or it waits in its pool when its client left meanwhile.
func (uc *upConn) ready() {
	cc := uc.cc
	if cc == nil {
		// The client left while we dialed: keep the connection for later.
		uc.state = usBusy
		uc.pool.put(uc)
		return
	}
	uc.state = usBusy
	cc.connected()
}

// dialFailed runs on the loop when a dial failed.
func (uc *upConn) dialFailed(err error) {
	uc.w.dropDeadline(uc)
	uc.connFD = -1
	uc.state = usClosed
	if cc := uc.cc; cc != nil {
		uc.setFault(faultConnect, err)
		cc.upstreamFailed(uc, dialStatus(err))
	}
}

// expire: connect/send/read timeout of a busy connection (504 or a
// truncated response), or the idle timeout of a pooled one.
func (uc *upConn) expire() {
	switch uc.state {
	case usDialing:
		if uc.tls != nil && uc.tls.hs != nil {
			uc.handshakeExpired()
			return
		}
		// Only the loop's own connects have a deadline (Worker.dial).
		if gnet.CancelConnect(uc.w.loop, uc.connFD) {
			uc.dialFailed(&net.OpError{Op: "dial", Net: "tcp", Addr: net.TCPAddrFromAddrPort(uc.ap), Err: os.ErrDeadlineExceeded})
		}
	case usIdle:
		uc.pool.remove(uc)
		uc.close()
	case usTunnel:
		// Idle for the route's timeout.read, or a flush to a client's
		// tunnel that is gone took as long.
		cc := uc.cc
		unlink(cc, uc)
		uc.close()
		if cc != nil && !cc.closed {
			cc.keepAlive = false
			cc.requestDone()
		}
	case usBusy:
		cc := uc.cc
		unlink(cc, uc)
		uc.close()
		if cc != nil {
			uc.gotBytes = true // a timeout is no stale keep-alive connection
			uc.setFault(faultTimeout, nil)
			cc.upstreamFailed(uc, 504)
		}
	}
}

// close closes the connection (OnClose runs before it returns).
func (uc *upConn) close() {
	uc.state = usClosed
	if uc.gone || uc.c == nil {
		return
	}
	uc.w.closeConn(uc.c)
}

// abort drops a busy connection whose client went away: now, or when the
// holder of its guard lets go.
func (uc *upConn) abort() {
	if uc.guard.held() {
		uc.guard.closeAsked = true
		return
	}
	uc.close()
}

// closedByPeer runs when gnet closes the connection.
func (uc *upConn) closedByPeer(err error) {
	w := uc.w
	prev := uc.state
	uc.state = usClosed
	uc.gone = true
	w.dropDeadline(uc)
	if uc.pause.on {
		uc.unpauseList()
	}
	tlsEOF := false
	if t := uc.tls; t != nil {
		t.raw = nil
		if hs := t.hs; hs != nil {
			// Closed mid-handshake: the handshake's own error, once its
			// goroutine ends (its read returns now), is the attempt's
			// cause, which the close only follows when the node answered
			// a certificate it refused with an alert; done fails the
			// attempt with it.
			hs.closed, hs.closeErr = true, err
			hs.abort()
			return
		}
		tlsEOF = t.eof
	}
	if prev == usIdle {
		uc.pool.remove(uc)
		return
	}
	if prev == usTunnel {
		uc.tunnelClosed()
		return
	}
	cc := uc.cc
	if cc == nil {
		return
	}
	if uc.phase == rpBody && uc.mode == httpparse.BodyUntilClose && (errors.Is(err, io.EOF) || tlsEOF) {
		// The end of a close-delimited response: the upstream's FIN, or
		// its close_notify.
		// Anything else cuts it short (a reset; the worker's own close,
		// at a stop), and the client connection closes below without
		// the last chunk, as nginx's does.
		unlink(cc, uc)
		switch {
		case cc.plugin.reframe:
			cc.finishFiltered()
		case cc.chunkClose && !cc.closed:
			cc.write(lastChunk)
		}
		cc.requestDone()
		return
	}
	uc.closeFault(err)
	if uc.guard.held() {
		return // the code on the stack sees usClosed
	}
	cc.upstreamFailed(uc, 502)
}

// traffic forwards response bytes to the client. On an https node's
// connection it feeds the handshake until that is done, then decrypts
// what arrived first (upTLS.fill); the node's close_notify, or a record
// that fails, closes the connection once the plaintext before it is
// forwarded.
func (uc *upConn) traffic() gnet.Action {
	t := uc.tls
	if t != nil {
		if t.hs != nil {
			return t.hs.feedClient()
		}
		t.fill()
		if t.failed && uc.cc != nil {
			uc.setFault(faultIOError, t.err)
		}
		if t.InboundBuffered() == 0 && !t.eof && !t.failed {
			// A partial record, or a record of the TLS layer's own (a
			// session ticket): nothing for the response code.
			return gnet.None
		}
	}
	uc.guard.enter()
	act := uc.traffic0()
	if uc.guard.leave() || uc.state == usClosed {
		return gnet.Close
	}
	if t != nil && (t.eof || t.failed) && (t.InboundBuffered() == 0 || uc.state != usBusy && uc.state != usTunnel) {
		return gnet.Close
	}
	return act
}

// traffic0 is traffic under the guard: the response head, while it is
// being read (readHead, then sendHead), else the body (relayBody).
func (uc *upConn) traffic0() gnet.Action {
	if uc.state == usTunnel {
		return uc.tunnelOut()
	}
	cc := uc.cc
	if cc == nil || uc.state != usBusy {
		// Bytes on an idle connection: the origin broke the protocol.
		uc.pool.remove(uc)
		uc.state = usClosed
		return gnet.Close
	}
	if uc.pause.on {
		uc.w.pauseRead(uc.c)
		return gnet.None
	}
	buf, _ := uc.io.Peek(-1)
	if len(buf) == 0 {
		return gnet.None
	}
	uc.gotBytes = true
	if uc.phase == rpHead {
		consumed, act, ok := uc.readHead(cc, buf)
		if !ok {
			return act
		}
		if uc.resp.Status == 101 {
			return uc.openTunnel(cc, buf, consumed)
		}
		return uc.sendHead(cc, buf, consumed)
	}
	uc.w.setDeadline(uc, int64(cc.rt.to.read))
	return uc.relayBody(cc, buf, 0)
}

// readHead parses the response head at the start of buf, skipping the
// interim (1xx) heads before it: ok true when uc.resp holds the final
// head, which starts consumed bytes into buf. Otherwise traffic0 returns
// act: the head is incomplete (what was read of it waits in gnet's
// buffer, the interim heads before it discarded), or unusable (502, the
// connection closes).
func (uc *upConn) readHead(cc *clientConn, buf []byte) (consumed int, act gnet.Action, ok bool) {
	if cc.reqDone {
		// timeout.read is the longest wait between two reads, as
		// nginx's proxy_read_timeout: a head that trickles in is no
		// timeout.
		uc.w.setDeadline(uc, int64(cc.rt.to.read))
	}
	for {
		err := uc.parser.Parse(buf[consumed:], &uc.resp)
		if err == httpparse.ErrNeedMore && notHTTP(buf[consumed:]) {
			// Seen at the first wrong byte, not after a status line's
			// worth of them.
			err = errNotHTTP
		}
		if err == httpparse.ErrNeedMore {
			// The interim heads parsed are done with; the parser goes on
			// from the start of the next head.
			if consumed > 0 { // Discard(0) drops everything
				_, _ = uc.io.Discard(consumed)
			}
			return 0, gnet.None, false
		}
		if err != nil {
			uc.headFault(err)
			return 0, uc.failHead(cc), false
		}
		if uc.resp.Status < 100 || uc.resp.Status >= 200 {
			return consumed, gnet.None, true
		}
		if uc.resp.Status == 101 && cc.upgrade {
			return consumed, gnet.None, true // the tunnel's (openTunnel)
		}
		if uc.resp.Status == 101 {
			uc.setFault(faultSwitching, nil)
			return 0, uc.failHead(cc), false
		}
		// Interim answers are not forwarded; 100 Continue was sent to
		// the client by the gateway itself. Together they stay within
		// the head limit (in nginx they share the header buffer with the
		// final head).
		uc.interim += uc.resp.HeadLen
		if uc.interim > uc.maxHead() {
			uc.setFault(faultBigHead, nil)
			return 0, uc.failHead(cc), false
		}
		consumed += uc.resp.HeadLen
		uc.parser.Reset()
		if consumed == len(buf) {
			_, _ = uc.io.Discard(consumed)
			return 0, gnet.None, false
		}
	}
}

// sendHead answers the client with the final head readHead parsed, which
// starts consumed bytes into buf, and the body that follows it in buf,
// written together; then the body goes on (relayBody). The response's
// framing is chosen here (uc.mode); the client's side of the answer (the
// plugins' header_filter, the head it gets) is beginResponse's.
func (uc *upConn) sendHead(cc *clientConn, buf []byte, consumed int) gnet.Action {
	w := uc.w
	uc.mode = httpparse.ResponseBody(&uc.resp, cc.isHead)
	if cc.http10 && uc.mode != httpparse.BodyNone && uc.resp.Coded {
		// HTTP/1.0 has no Transfer-Encoding: a body in another coding
		// would reach this client still coded, with nothing saying so.
		uc.setFault(faultCoding, nil)
		return uc.failHead(cc)
	}
	uc.left = uc.resp.ContentLength
	uc.chunk.Reset()
	head := cc.beginResponse(w.scratch[:0], &uc.resp, uc.mode)
	w.scratch = head
	consumed += uc.resp.HeadLen
	uc.phase = rpBody
	w.setDeadline(uc, int64(cc.rt.to.read))
	n, done, broken := uc.forward(cc, append(w.iov[:0], head), buf[consumed:])
	consumed += n
	if done || broken || consumed == len(buf) || cc.closed {
		return uc.afterWrite(cc, consumed, len(buf), done)
	}
	return uc.relayBody(cc, buf, consumed)
}

// relayBody forwards the response body in buf from consumed on, as many
// writes as it takes (a chunked body's chunks past one write's worth),
// and ends the exchange once the body is complete (afterWrite).
func (uc *upConn) relayBody(cc *clientConn, buf []byte, consumed int) gnet.Action {
	for {
		n, done, broken := uc.forward(cc, uc.w.iov[:0], buf[consumed:])
		consumed += n
		if done || broken || consumed == len(buf) || cc.closed {
			return uc.afterWrite(cc, consumed, len(buf), done)
		}
	}
}

// forward writes to the client iov (the head alone, or nothing) and what
// takeBody takes of buf for one write, through the plugins' body_filter
// when they reframe the body; it returns how many bytes of buf it took,
// whether the body ends there, and broken: the chunked body is
// malformed (the connection is closed; afterWrite truncates the
// response). iov is w.iov's storage, which it clears and gives back.
func (uc *upConn) forward(cc *clientConn, iov [][]byte, buf []byte) (n int, done, broken bool) {
	head := len(iov)
	reframe := cc.plugin.reframe
	iov, n, done, err := uc.takeBody(iov, buf, !cc.http10 && !reframe)
	if err != nil {
		uc.setFault(faultBadChunk, err)
		uc.state = usClosed
	}
	if reframe {
		iov = cc.filterResponse(iov, head, done && err == nil)
	} else if cc.plugin.respMax > 0 {
		cc.teeRelayed(uc, iov[head:])
	}
	if len(iov) > 0 {
		cc.writev(iov)
	}
	clear(iov)
	uc.w.iov = iov[:0]
	return n, done, err != nil
}

// takeBody appends to iov what of buf, response bytes after the head, the
// client gets now, and returns iov, how many bytes of buf that stands for,
// and whether the body ends there. A Content-Length body goes as it came;
// a chunked one is decoded and written again by the gateway (as
// clientConn.takeBody does for requests): one chunk of the data decoded
// so far and, at the end, the last chunk, for an HTTP/1.1 client (framed);
// the data alone for an HTTP/1.0 client. Chunk extensions and trailer
// fields are checked and dropped, as nginx drops them. A close-delimited
// body goes as one chunk of buf when framed (its last chunk follows a
// clean close, closedByPeer), as it came otherwise. The slices alias buf
// and uc.sizeLine, valid until buf is discarded and the next takeBody. An
// error is a malformed chunked body: nothing of the bad part is appended.
func (uc *upConn) takeBody(iov [][]byte, buf []byte, framed bool) ([][]byte, int, bool, error) {
	switch uc.mode {
	case httpparse.BodyNone:
		return iov, 0, true, nil
	case httpparse.BodyLength:
		n := len(buf)
		if int64(n) > uc.left {
			n = int(uc.left)
		}
		uc.left -= int64(n)
		if n > 0 {
			iov = append(iov, buf[:n])
		}
		return iov, n, uc.left == 0, nil
	case httpparse.BodyUntilClose:
		if len(buf) == 0 {
			return iov, 0, false, nil
		}
		if framed {
			uc.sizeLine = httpparse.AppendChunkSize(uc.sizeLine[:0], len(buf))
			return append(iov, uc.sizeLine, buf, crlf), len(buf), false, nil
		}
		return append(iov, buf), len(buf), false, nil
	}
	iov, n, _, done, err := reframe(&uc.chunk, iov, buf, &uc.sizeLine, framed)
	return iov, n, done, err
}

// afterWrite consumes what was forwarded and ends the exchange when the
// response is complete.
func (uc *upConn) afterWrite(cc *clientConn, consumed, total int, done bool) gnet.Action {
	w := uc.w
	_, _ = uc.io.Discard(consumed)
	if cc.closed {
		unlink(cc, uc)
		return gnet.Close
	}
	if uc.state == usClosed {
		// A broken chunked body: the client gets a truncated response.
		unlink(cc, uc)
		w.logFault(uc, cc, 0)
		w.closeConn(cc.c)
		return gnet.Close
	}
	if !done {
		if cc.c.OutboundBuffered() > highWater {
			uc.pauseFor(cc.c)
		}
		return gnet.None
	}
	// The response is complete.
	if consumed != total {
		// The rest is not for this request, and no other asked for it.
		uc.setFault(faultExtraData, nil)
		w.logFault(uc, cc, 0)
	}
	uc.requests++
	reuse := uc.resp.KeepAlive && cc.reqDone && consumed == total &&
		(uc.pool.maxRequests <= 0 || uc.requests < uc.pool.maxRequests)
	unlink(cc, uc)
	w.clearDeadline(uc)
	act := gnet.None
	if reuse {
		uc.pool.put(uc)
	} else {
		uc.state = usClosed
		act = gnet.Close
	}
	cc.requestDone()
	return act
}

// failHead ends an exchange whose response head is unusable: 502, and the
// connection closes.
func (uc *upConn) failHead(cc *clientConn) gnet.Action {
	unlink(cc, uc)
	uc.state = usClosed
	cc.upstreamFailed(uc, 502)
	return gnet.Close
}

// maxHead is the head limit: the most bytes of one response head, and of
// the 1xx heads before it together.
func (uc *upConn) maxHead() int {
	if n := uc.parser.Limits.MaxHeaderBytes; n > 0 {
		return n
	}
	return httpparse.DefaultLimits().MaxHeaderBytes
}

// errNotHTTP is the cause logged for a response that does not start as
// HTTP/1.x does.
var errNotHTTP = errors.New("no HTTP/1.x status line")

// notHTTP reports whether b, shorter than a status line, cannot be the
// start of an HTTP/1.x one.
func notHTTP(b []byte) bool {
	const v = "HTTP/1."
	n := min(len(b), len(v))
	return string(b[:n]) != v[:n]
}
