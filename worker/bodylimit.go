package worker

// client_max_body_size for a chunked request body, whose length is known
// only at its end.
//
// A Content-Length over the limit is answered 413 before anything is
// forwarded (start). A chunked body can only be judged as it arrives, and
// the gateway streams bodies rather than buffer them, so when the limit is
// at most holdMax the request waits, neither dialed nor forwarded, until
// its body is complete within the limit or has passed it: a body over the
// limit is answered 413 and no byte of the request reaches an upstream.
// Above that size the body is streamed, and when it passes the limit the
// upstream connection is aborted before the body's last chunk: the
// upstream never receives a complete request (takeBody, rejectBody).
//
// The held bytes stay in gnet's inbound buffer, where takeBody forwards
// them from once the request is dispatched. Each read while holding
// rescans from where the last scan stopped, but gnet's Peek copies the
// buffered bytes whenever they are split between its ring and the read
// just made, so each read may cost a copy of all that is held: holdMax,
// one read buffer, keeps that copy as cheap as the read itself even for a
// client that sends its body a byte at a time.

// holdMax is the largest client_max_body_size for which a chunked body is
// held until it is judged.
const holdMax = 64 << 10

// holdForLimit decides, once the head is parsed and discarded, whether the
// request must wait for its chunked body before it is dispatched; if so it
// starts waiting (csHold) and reports true.
func (cc *clientConn) holdForLimit() bool {
	max := cc.w.cfg.MaxBodySize
	if cc.reqBody != bodyChunked || max <= 0 || max > holdMax {
		return false
	}
	cc.state = csHold
	cc.holdBody()
	return true
}

// holdBody scans the chunked body bytes buffered since the last call (they
// stay in the client buffer for takeBody to forward) and dispatches the
// request once the body ends within client_max_body_size; it answers 413
// when the body passes the limit and 400 when it is malformed. Otherwise it
// waits client_body_timeout for more.
func (cc *clientConn) holdBody() {
	buf, _ := cc.io.Peek(-1)
	for int64(len(buf)) > cc.holdSeen {
		n, data, done, err := cc.holdScan.Decode(buf[cc.holdSeen:])
		cc.holdSeen += int64(n)
		cc.holdData += int64(len(data))
		switch {
		case err != nil:
			cc.badBody = 400
		case cc.holdData > cc.w.cfg.MaxBodySize:
			// Counted in data bytes, as takeBody and nginx count them.
			cc.badBody = 413
		case done || cc.holdSeen > 2*holdMax:
			// Judged within the limit; or so much framing around so little
			// data that holding it would cost more than holdMax is meant
			// to: it is streamed, and the limit enforced as it goes.
			cc.state = csProxy
			cc.w.clearDeadline(cc)
			cc.dispatch()
			return
		}
		if cc.badBody != 0 {
			cc.rejectBody(false)
			return
		}
	}
	cc.w.setDeadline(cc, int64(cc.w.cfg.BodyTimeout))
}
