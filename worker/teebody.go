package worker

// The request body copied for the plugins (plugins.BodyTee), as it goes
// upstream: the loggers' include_req_body and proxy-mirror's copy.
//
// A route, or its global rules, with a BodyTee does not change how the
// body is sent: it streams to the upstream as it would without the
// plugin, no wait, no limit added (readbody.go's whole read, and its 413,
// are for BodyReaders only). Once the request phases are done and the
// request is routed (startTee), takeBody copies the data of what it hands
// to the upstream, a Content-Length body as it came, a chunked one
// decoded, into exchangeBufs.reqBodyBuf, up to the largest TeeLimit of the
// exchange's phases (the route's, merged with its consumer's, and the
// global rules'). What passes the limit is not copied, and the copy is
// marked cut. The log phase reads the copy (Ctx.RequestBody) and whether
// it is the whole body (Ctx.RequestBodyWhole): the body ended within the
// limit before the exchange did. An attempt whose write failed before
// any of the body left the client buffer is replayed from the body's
// start: the copy is taken back to where it stood (teeMark).
//
// A request whose body a BodyReader read whole copies nothing: that body,
// already in reqBodyBuf, is the log phase's too.
//
// reqBodyBuf comes from the worker's pool of body buffers (takeBodyBuf),
// a large one for a body known to be large when the pool has one, when
// the exchange first needs it, for a read or a copy, and goes back
// to it when the exchange ends (resetExchange): it is valid until then.
// Exchanges without a body, or on routes without a BodyReader or BodyTee,
// take none. The copy, its buffer and the pool are the event loop's, as
// the exchange is: nothing here locks or blocks.

// startTee starts copying the body of the request just routed when the
// exchange's phases have a BodyTee and no BodyReader read the body.
func (cc *clientConn) startTee() {
	p := &cc.plugin
	if !p.active || p.bodyRead || cc.reqBody == bodyNone {
		return
	}
	var n int64
	if p.gl != nil {
		n = p.gl.TeeLimit()
	}
	if p.ph != nil {
		n = max(n, p.ph.TeeLimit())
	}
	if n <= 0 {
		return
	}
	cc.teeMax = n
	cc.takeReqBodyBuf(n)
}

// tee copies p, body data on its way upstream, up to the copy's limit;
// end: the body ends with p.
func (cc *clientConn) tee(p []byte, end bool) {
	if room := cc.teeMax - int64(len(cc.reqBodyBuf)); int64(len(p)) > room {
		p = p[:room]
		cc.teeCut = true
	}
	cc.reqBodyBuf = append(cc.reqBodyBuf, p...)
	cc.teeEnd = end
}

// teeRuns copies the data runs of a chunked body that reframe appended,
// framed, to iov: runs is what it appended, total the data bytes in it,
// done whether the body ends there. The runs are the chunk-size line,
// the data, the CRLF ending the chunk (when total > 0), then the last
// chunk (when done).
func (cc *clientConn) teeRuns(runs [][]byte, total int, done bool) {
	if total > 0 {
		data := runs[1 : len(runs)-1]
		if done {
			data = data[:len(data)-1]
		}
		for _, d := range data {
			cc.tee(d, false)
		}
	}
	cc.teeEnd = done
}

// teeMark is where the copy stood before a write that may be undone.
type teeMark struct {
	n        int
	cut, end bool
}

// markTee returns where the copy stands.
func (cc *clientConn) markTee() teeMark {
	return teeMark{len(cc.reqBodyBuf), cc.teeCut, cc.teeEnd}
}

// undoTee takes the copy back to m: the bytes copied since are to be sent
// again, and copied again then.
func (cc *clientConn) undoTee(m teeMark) {
	if cc.teeMax > 0 {
		cc.reqBodyBuf = cc.reqBodyBuf[:m.n]
		cc.teeCut, cc.teeEnd = m.cut, m.end
	}
}

// takeReqBodyBuf gives the exchange a body buffer, empty, from the pool
// unless it has one; limit is the most the body may put in it.
func (cc *clientConn) takeReqBodyBuf(limit int64) {
	if cc.reqBodyBuf == nil {
		need := limit
		if cc.reqBody == bodyLength {
			need = min(need, cc.reqLeft)
		} else {
			need = min(need, 4<<10) // a chunked body's length is not known
		}
		cc.reqBodyBuf = cc.w.takeBodyBuf(int(need))
	}
	cc.reqBodyBuf = cc.reqBodyBuf[:0]
}

// The worker's pool of body buffers: at most maxPooledBodies idle ones of
// up to maxPooledBody bytes of capacity, and maxLargeBodies of up to
// maxLargeBody, so that the pool holds 8 MiB at most; a larger buffer is
// left to the collector. A body up to maxLargeBody (proxy-mirror's cap),
// read or copied, allocates nothing in steady state while at most
// maxLargeBodies exchanges of the loop hold a body over maxPooledBody at
// once.
const (
	maxPooledBody   = 64 << 10
	maxPooledBodies = 64
	maxLargeBody    = 1 << 20
	maxLargeBodies  = 4
)

// takeBodyBuf returns an idle body buffer, empty: a large one when need
// is over maxPooledBody and the pool has one, else a small one, else a new
// one of need bytes, maxPooledBody at most, so that a client announcing a
// long body makes the worker hold no more than it sent. A buffer smaller
// than the body grows as the body comes. It is the loop's, as the pool is.
func (w *Worker) takeBodyBuf(need int) []byte {
	pool := &w.bodyBufs
	if need > maxPooledBody && len(w.largeBufs) > 0 {
		pool = &w.largeBufs
	}
	if n := len(*pool); n > 0 {
		b := (*pool)[n-1]
		(*pool)[n-1] = nil
		*pool = (*pool)[:n-1]
		return b[:0]
	}
	return make([]byte, 0, min(need, maxPooledBody))
}

// putBodyBuf gives b back to the pool once nothing refers to it any more
// (the exchange it served ended). A nil b, one too large, or one past the
// pool's size, is dropped.
func (w *Worker) putBodyBuf(b []byte) {
	switch c := cap(b); {
	case c == 0:
	case c <= maxPooledBody && len(w.bodyBufs) < maxPooledBodies:
		w.bodyBufs = append(w.bodyBufs, b[:0])
	case c > maxPooledBody && c <= maxLargeBody && len(w.largeBufs) < maxLargeBodies:
		w.largeBufs = append(w.largeBufs, b[:0])
	}
}
