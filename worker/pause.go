package worker

import "github.com/panjf2000/gnet/v2"

// pauseState tracks a connection whose reading is paused until dst, the
// peer it feeds, has flushed its outbound buffer below lowWater. dst nil
// means "until this connection's own inbound buffer is consumed"; dst equal
// to the connection itself means "until its own outbound buffer is flushed",
// then close (csClosing) or read the next request (csIdle).
type pauseState struct {
	on       bool
	idx      int32 // position in Worker.paused
	dst      gnet.Conn
	lastOut  int   // dst's outbound bytes at the last check
	progress int64 // Worker.now when dst last made progress
}

type pausable interface {
	pauseSlot() *pauseState
	conn() gnet.Conn
	resume()
	stalled()
	// flushed runs when a connection paused on itself ("close once
	// flushed") has written all its output.
	flushed()
}

func (cc *clientConn) pauseSlot() *pauseState { return &cc.pause }
func (cc *clientConn) conn() gnet.Conn        { return cc.c }
func (uc *upConn) pauseSlot() *pauseState     { return &uc.pause }
func (uc *upConn) conn() gnet.Conn            { return uc.c }

func (w *Worker) pause(p pausable, dst gnet.Conn) {
	s := p.pauseSlot()
	s.dst = dst
	s.progress = w.now
	if dst != nil {
		s.lastOut = dst.OutboundBuffered()
	}
	if !s.on {
		s.on = true
		w.paused.Add(p)
	}
	w.pauseRead(p.conn())
}

func (w *Worker) unpause(p pausable) {
	s := p.pauseSlot()
	if !s.on {
		return
	}
	w.paused.Remove(p)
	s.on = false
	s.dst = nil
}

// resumePaused runs each tick: connections whose peer drained resume;
// a peer that made no progress for send_timeout ends both.
func (w *Worker) resumePaused() {
	for i := 0; i < w.paused.Len(); {
		p := w.paused.At(i)
		s := p.pauseSlot()
		dst := s.dst
		var out int
		if dst == nil {
			out = p.conn().InboundBuffered()
		} else {
			out = dst.OutboundBuffered()
		}
		if out < s.lastOut {
			s.progress = w.now
		}
		s.lastOut = out
		switch {
		case dst == p.conn() && out == 0:
			w.unpause(p)
			p.flushed()
		case dst != p.conn() && out < lowWater:
			w.unpause(p)
			w.resumeRead(p.conn())
			p.resume()
		case dst != nil && w.now-s.progress > int64(w.cfg.SendTimeout):
			// A peer that does not read. (dst nil: pipelined input waiting
			// for a slow upstream, which its own read timeout bounds.)
			w.unpause(p)
			p.stalled()
		default:
			i++
			continue
		}
		// The entry at i changed; look at it again.
	}
}

func (cc *clientConn) pauseFor(dst gnet.Conn) { cc.w.pause(cc, dst) }

// waitsForFlush reports whether the connection waits for its own output to
// be flushed before it reads on.
func (cc *clientConn) waitsForFlush() bool { return cc.pause.on && cc.pause.dst == cc.c }

func (cc *clientConn) unpause() {
	cc.w.unpause(cc)
	cc.w.resumeRead(cc.c)
}
func (cc *clientConn) unpauseList() { cc.w.unpause(cc) }

// resume continues a client whose upload waited for the upstream, or whose
// pipelined input waited for the current answer.
func (cc *clientConn) resume() {
	if cc.closed {
		return
	}
	if cc.state == csTunnel {
		cc.guard.enter()
		cc.tunnelIn()
		if cc.guard.leave() {
			cc.w.closeConn(cc.c)
		}
		return
	}
	if cc.state != csProxy {
		return
	}
	if !cc.reqDone && cc.up != nil && cc.up.state == usBusy {
		cc.guard.enter()
		cc.pumpBody()
		if cc.guard.leave() {
			cc.w.closeConn(cc.c)
		}
	}
}

// stalled: the peer did not read for send_timeout.
func (cc *clientConn) stalled() { cc.w.closeConn(cc.c) }

// flushed: the answer is out. Between two requests the next one may be
// read (awaitHead); after the last one, close or linger
// (closeWhenFlushed).
func (cc *clientConn) flushed() {
	if cc.state == csIdle {
		cc.w.resumeRead(cc.c)
		cc.awaitHead()
		return
	}
	cc.closeWhenFlushed()
}

func (uc *upConn) pauseFor(dst gnet.Conn) { uc.w.pause(uc, dst) }
func (uc *upConn) unpauseList()           { uc.w.unpause(uc) }

// resume forwards the response bytes that waited in the buffer.
func (uc *upConn) resume() {
	if uc.state != usBusy && uc.state != usTunnel || uc.cc == nil || uc.io.InboundBuffered() == 0 {
		return
	}
	if uc.traffic() == gnet.Close {
		uc.close()
	}
}

// stalled: the client did not read the response for send_timeout.
// flushed closes: an upstream connection is paused on itself only to
// flush a tunnel whose client is gone (clientGone).
func (uc *upConn) flushed() { uc.close() }

func (uc *upConn) stalled() {
	cc := uc.cc
	unlink(cc, uc)
	uc.close()
	if cc != nil && !cc.closed {
		cc.w.closeConn(cc.c)
	}
}
