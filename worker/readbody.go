package worker

import "coregate/httpparse"

// The request body read whole for the plugins (plugins.BodyReader,
// Ctx.RequestBody), before the request phases of a route, or of global
// rules, that have a BodyReader.
//
// The body is read where the worker reads every body: gnet's inbound
// buffer, behind the head, which is copied out first (keepHead) and
// dropped, as an Await does. Once the whole body is buffered its data is
// copied into exchangeBufs.reqBody, a Content-Length body as it came, a
// chunked one decoded; then the phases run, and the request goes on as
// start would have taken it. The body stays in gnet's buffer, where
// takeBody forwards it from, framed by the worker as it frames every
// body: the upstream gets the bytes the plugins saw, a chunked body
// decoded and re-framed by the same decoder.
//
// The limit is the largest BodyLimit of the route's and the global rules'
// readers, and client_max_body_size when it is set and smaller: a
// Content-Length over it is answered 413 at once, a chunked body as soon
// as its data passes it; a malformed chunked body 400, as takeBody
// answers. client_body_timeout bounds each wait for more of the body; past
// it the client gets 408 and the connection closes. A client that sent
// Expect: 100-continue gets its 100 Continue before the wait.
//
// A chunked body is scanned from where the last read stopped, but gnet's
// Peek copies what is buffered whenever it is split between its ring and
// the read just made (see bodylimit.go): the cost of a body read this way
// grows with the square of its size over the read size. A Content-Length
// body is counted, not scanned, until it is all there.

// bodyLimit is the limit of the body read for the plugins of rt (nil: no
// route matched) and the global rules of snap; 0 when none reads it.
func (cc *clientConn) bodyLimit(snap *Snapshot, rt *route) int64 {
	var n int64
	if snap.global != nil {
		n = snap.global.BodyLimit()
	}
	if rt != nil {
		n = max(n, rt.plugins.BodyLimit())
	}
	if max := cc.w.cfg.MaxBodySize; n > 0 && max > 0 && max < n {
		n = max
	}
	return n
}

// readBodyFirst starts reading the body of the request routed to cc.rt
// for its plugins, up to limit (csBody); the phases run once it is read
// (bodyRead). It discards the head, having copied it.
func (cc *clientConn) readBodyFirst(limit int64) {
	r := &cc.req
	if cc.reqBody == bodyLength && r.ContentLength > limit {
		cc.discardHead()
		cc.answerAndClose(413)
		return
	}
	if !cc.plugin.kept {
		cc.keepHead()
	}
	cc.discardHead()
	cc.takeReqBodyBuf(limit)
	cc.bodyMax = limit
	cc.state = csBody
	if r.Expect100 && cc.io.InboundBuffered() == 0 {
		if _, _ = cc.io.Write(continue100); cc.closed {
			return // the client reset: the exchange ended with it
		}
	}
	cc.readBody()
}

// readBody takes in what arrived of the body: once it is whole, the
// request phases run. Otherwise it waits client_body_timeout for more.
func (cc *clientConn) readBody() {
	if cc.reqBody == bodyLength {
		if int64(cc.io.InboundBuffered()) < cc.reqLeft {
			cc.w.setDeadline(cc, int64(cc.w.cfg.BodyTimeout))
			return
		}
		buf, _ := cc.io.Peek(int(cc.reqLeft))
		cc.reqBodyBuf = append(cc.reqBodyBuf, buf...)
		cc.bodyReady()
		return
	}
	buf, _ := cc.io.Peek(-1)
	for int64(len(buf)) > cc.holdSeen {
		n, data, done, err := cc.holdScan.Decode(buf[cc.holdSeen:])
		cc.holdSeen += int64(n)
		if err != nil {
			cc.badBody = 400
		} else if int64(len(cc.reqBodyBuf)+len(data)) > cc.bodyMax {
			cc.badBody = 413
		}
		if cc.badBody != 0 {
			cc.rejectBody(false)
			return
		}
		cc.reqBodyBuf = append(cc.reqBodyBuf, data...)
		if done {
			cc.bodyReady()
			return
		}
	}
	cc.w.setDeadline(cc, int64(cc.w.cfg.BodyTimeout))
}

// bodyReady runs the request phases once the body is read, and sends the
// request on as start does. The scan's state is cleared: the body is
// judged again, from its start, on its way upstream (holdForLimit,
// takeBody).
func (cc *clientConn) bodyReady() {
	cc.w.clearDeadline(cc)
	cc.holdScan, cc.holdSeen = httpparse.Chunked{}, 0
	cc.plugin.bodyRead = true
	cc.state = csHead
	if cc.startPlugins(cc.snap, cc.rt) {
		return
	}
	cc.routed()
}
