package worker

import "coregate/httpparse"

// exchange is the state of one request and its answer on a client
// connection, from the routing of a parsed head (start) to the end of the
// answer (requestDone) or of the connection (closedByPeer). It is embedded
// in clientConn and starts over by one assignment (reset): outside an
// exchange (csIdle, csHead) it is zero but for the capacity of its buffers.
// State added per request, that of plugins included, goes here and nowhere
// else, so that nothing of one request can leak into the next.
type exchange struct {
	snap *Snapshot // the snapshot the request was routed with
	rt   *route

	// Attempts at the route's upstream nodes.
	node        int      // the node of the current attempt
	tried       triedSet // nodes that failed
	tries       int
	freeRetries int   // replays after a stale kept-alive connection
	started     int64 // Worker.now when the request was routed, for retry_timeout
	// statuses are the upstream statuses of the failed attempts, for
	// X-APISIX-Upstream-Status. Buffer: capacity reused.
	statuses []int

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
	// sizeLine is the chunk-size line of the chunk takeBody frames, valid
	// until the next takeBody. Buffer: capacity reused.
	sizeLine []byte

	// respStarted: the response head went to the client; a failure now can
	// only cut the answer short.
	respStarted bool

	// A chunked request held in csHold (bodylimit.go): holdSeen body bytes,
	// framing included, read by holdScan so far, holdData of them chunk
	// data.
	holdScan httpparse.Chunked
	holdSeen int64
	holdData int64

	// head is the outbound request head, kept for retries: the request line
	// is head[:lineEnd], the Host line is written per attempt into hostLine,
	// and head[lineEnd:] holds the other fields and the final CRLF.
	// head, hostLine, hostValue, hostBuf and pathBuf are buffers: their
	// capacity is reused, their contents written before they are read.
	head      []byte
	lineEnd   int
	hostLine  []byte
	hostValue []byte // the client's Host, for pass_host=pass
	// host is nginx's $host: the request's host without port, lower-case.
	// It aliases the head (valid until discardHead) or hostBuf.
	host    []byte
	hostBuf []byte
	// curPath is the normalised path the request was routed by: it aliases
	// the head (valid until discardHead) or pathBuf.
	curPath []byte
	pathBuf []byte

	// plugin is where the per-request state of the route's plugins lives.
	//lint:ignore U1000 the place kept for the plugin phases' state
	plugin pluginState
}

// pluginState is the per-request state of plugins: empty until the plugin
// phases run in the worker. Whatever a plugin keeps for one request goes
// here, so that the exchange's reset clears it, and nowhere else.
type pluginState struct{}

// reset ends the exchange: everything is zeroed but the buffers, which keep
// their capacity (their contents are not kept: each is written before it is
// read). This is the only way an exchange's state is cleared.
func (ex *exchange) reset() {
	*ex = exchange{
		statuses:  ex.statuses[:0],
		sizeLine:  ex.sizeLine[:0],
		head:      ex.head[:0],
		hostLine:  ex.hostLine[:0],
		hostValue: ex.hostValue[:0],
		hostBuf:   ex.hostBuf[:0],
		pathBuf:   ex.pathBuf[:0],
	}
}

// upExchange is an upstream connection's share of the exchange it serves:
// what it sent and received of one request and response. It starts over by
// one assignment (reset) when the connection is linked to a client.
type upExchange struct {
	reused   bool  // the connection served a request before this one
	gotBytes bool  // a response byte arrived
	sentAny  bool  // request bytes were written
	phase    uint8 // rpHead, rpBody
	interim  int   // bytes of 1xx heads before the final one
	mode     httpparse.BodyMode
	left     int64 // BodyLength: response body bytes still to come
	chunk    httpparse.Chunked
	// sizeLine is the chunk-size line of the chunk takeBody frames, valid
	// until the next takeBody. Buffer: capacity reused.
	sizeLine []byte

	// Why the exchange failed, for the error log (faultlog.go).
	fault upFault
	err   error
}

// reset starts a new exchange on the connection; sizeLine keeps its
// capacity.
func (ux *upExchange) reset(reused bool) {
	*ux = upExchange{reused: reused, sizeLine: ux.sizeLine[:0]}
}

// link makes uc serve cc's request. With unlink it is the only place where
// clientConn.up and upConn.cc change, so that cc.up == uc exactly when
// uc.cc == cc. uc is fresh from pool.newConn (usDialing) or taken from its
// pool (idle, now busy); cc serves no other upstream connection.
func link(cc *clientConn, uc *upConn) {
	cc.up, uc.cc = uc, cc
	uc.upExchange.reset(uc.requests > 0)
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
