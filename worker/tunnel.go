package worker

import (
	"github.com/panjf2000/gnet/v2"

	"coregate/admin/spec"
	"coregate/httpparse"
)

// The tunnel: a request that asks for a protocol upgrade (Upgrade and
// Connection: upgrade) on a route with enable_websocket goes upstream
// with both fields, as APISIX's proxy_set_header Upgrade $upstream_upgrade
// and Connection $upstream_connection; the upstream's 101 goes to the
// client, and from then on the client and upstream connections relay
// bytes both ways as they arrive (csTunnel, usTunnel), with the same
// back-pressure as a response body (pause.go), until either side closes.
// The other side is closed once what is queued for it is flushed; the
// exchange, with its access log line and log phase, ends with the client
// connection's close or answer's flush (status 101). The tunnel closes
// once no byte crossed it either way for the route's timeout.read, as
// nginx's does for proxy_read_timeout. The upstream connection is never
// put back in its pool.
//
// An Upgrade on a route without enable_websocket goes as plain HTTP
// (Upgrade and Connection dropped) and a 101 to it is a bad answer (502),
// as is a 101 to a request with a body or from an HTTP/1.0 client, which
// the worker never upgrades.

// websocketOf is enable_websocket for a route: its own, or else its
// service's (APISIX's http_access_phase).
func websocketOf(r *spec.Route, svc *spec.Service) bool {
	ws := r.Rare().EnableWebsocket
	if ws == nil && svc != nil {
		ws = svc.EnableWebsocket
	}
	return ws != nil && *ws
}

// wantsUpgrade reports whether the exchange's request goes upstream as an
// upgrade: the route allows it, and the request names a protocol in
// Upgrade and "upgrade" in Connection, with no body, from an HTTP/1.1
// client. Called by buildHead, while cc.req is valid.
func (cc *clientConn) wantsUpgrade() bool {
	r := &cc.req
	return cc.rt != nil && cc.rt.websocket && len(r.Upgrade) > 0 &&
		r.Conn&httpparse.ConnUpgrade != 0 && cc.reqBody == bodyNone && !cc.http10
}

// openTunnel answers the client with the upstream's 101, parsed by
// readHead and starting consumed bytes into buf, and whatever the
// upstream sent after it; then both connections become the tunnel's. The
// client's bytes already buffered (its first frames) go upstream at once.
// Called from upConn.traffic0, under uc's guard.
func (uc *upConn) openTunnel(cc *clientConn, buf []byte, consumed int) gnet.Action {
	w := uc.w
	cc.keepAlive = false
	head := cc.beginResponse(w.scratch[:0], &uc.resp, httpparse.BodyNone)
	w.scratch = head
	consumed += uc.resp.HeadLen
	uc.state = usTunnel
	cc.state = csTunnel
	w.clearDeadline(cc)
	iov := append(w.iov[:0], head)
	if consumed < len(buf) {
		iov = append(iov, buf[consumed:])
	}
	cc.writev(iov)
	clear(iov)
	w.iov = iov[:0]
	_, _ = uc.io.Discard(len(buf))
	if cc.closed {
		return gnet.None // clientGone took care of uc
	}
	w.setDeadline(uc, int64(cc.rt.to.read))
	if cc.c.OutboundBuffered() > highWater {
		uc.pauseFor(cc.c)
	}
	if cc.pause.on {
		// Paused while the request was with the upstream (maxPipelined):
		// what it held back is the tunnel's now.
		cc.unpause()
	}
	if cc.io.InboundBuffered() > 0 {
		cc.guard.enter()
		cc.tunnelIn()
		if cc.guard.leave() {
			w.closeConn(cc.c)
		}
	}
	return gnet.None
}

// tunnelIn relays the client's buffered bytes to the upstream, and pauses
// the client's reading while the upstream's outbound buffer is past
// highWater.
func (cc *clientConn) tunnelIn() {
	w := cc.w
	if cc.pause.on {
		w.pauseRead(cc.c)
		return
	}
	uc := cc.up
	if uc == nil {
		_, _ = cc.io.Discard(-1)
		return
	}
	buf, _ := cc.io.Peek(-1)
	if len(buf) == 0 {
		return
	}
	iov := append(w.iov[:0], buf)
	uc.write(iov)
	clear(iov)
	w.iov = iov[:0]
	_, _ = cc.io.Discard(len(buf))
	if cc.up != uc || uc.state != usTunnel {
		// The upstream closed inside the write: tunnelClosed ended the
		// exchange.
		return
	}
	w.setDeadline(uc, int64(cc.rt.to.read))
	if uc.c.OutboundBuffered() > highWater {
		cc.pauseFor(uc.c)
	}
}

// tunnelOut relays the upstream's buffered bytes to the client, and
// pauses the upstream's reading while the client's outbound buffer is
// past highWater. Once the client is gone (the upstream flushes what it
// was sent, clientGone), what the upstream sends is dropped.
func (uc *upConn) tunnelOut() gnet.Action {
	w := uc.w
	cc := uc.cc
	if cc == nil {
		_, _ = uc.io.Discard(-1)
		return gnet.None
	}
	if uc.pause.on {
		w.pauseRead(uc.c)
		return gnet.None
	}
	buf, _ := uc.io.Peek(-1)
	if len(buf) == 0 {
		return gnet.None
	}
	cc.write(buf)
	_, _ = uc.io.Discard(len(buf))
	if cc.closed {
		return gnet.None // clientGone took care of uc
	}
	w.setDeadline(uc, int64(cc.rt.to.read))
	if cc.c.OutboundBuffered() > highWater {
		uc.pauseFor(cc.c)
	}
	return gnet.None
}

// tunnelClosed runs when the upstream side of a tunnel closed (its FIN, a
// reset, the idle timeout): the client gets what is queued for it, then
// the close.
func (uc *upConn) tunnelClosed() {
	cc := uc.cc
	if cc == nil {
		return
	}
	unlink(cc, uc)
	if cc.closed {
		return
	}
	if cc.pause.on {
		cc.unpauseList() // it waited for the upstream to read
	}
	cc.keepAlive = false
	cc.requestDone()
}

// clientGone runs when the client side of a tunnel closed: the upstream
// connection closes once what the client sent is flushed to it (a pause
// on itself: flushed, or stalled after send_timeout without progress,
// closes it; so does the idle deadline still running).
func (uc *upConn) clientGone() {
	if uc.gone {
		return
	}
	if uc.c.OutboundBuffered() == 0 {
		uc.abort()
		return
	}
	uc.w.pause(uc, uc.c)
}
