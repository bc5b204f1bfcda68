package worker

import (
	"context"
	"crypto/tls"
	"io"

	"github.com/panjf2000/gnet/v2"

	"coregate/tlsrec"
)

// connIO is what a connection's request and response code reads and
// writes through: the gnet connection itself for plain HTTP, the
// connection's recordStream once its TLS handshake is done (a client's
// tlsConn, an https node's upTLS). Its methods are gnet.Conn's, with
// gnet's semantics and buffer lifetimes (doc.go, Buffers).
type connIO interface {
	Peek(n int) ([]byte, error)
	Discard(n int) (int, error)
	InboundBuffered() int
	Write(b []byte) (int, error)
	Writev(bs [][]byte) (int, error)
}

// recordStream is the record half of a TLS connection, client or
// upstream, once its handshake is done: tlsrec protects and unprotects
// its records on the loop, without blocking or allocating. It is the
// connection's connIO: Peek, Discard and InboundBuffered read the
// plaintext fill decrypted from gnet's inbound buffer at the traffic call
// (everything gnet read, as gnet's own buffer would hold it: the pause
// thresholds bound both alike); Write and Writev seal records into
// Worker.tlsOut and write them to the socket. Before the handshake is
// done (rec nil) it reads nothing and refuses writes.
//
// Buffers: plain[off:] is the decrypted input not yet discarded; slices
// from Peek alias it until the next Discard or the next fill (the next
// traffic call), which moves and grows it, as gnet's Peek slices live
// until Discard or the handler's return. Owned by the loop.
type recordStream struct {
	w   *Worker
	raw gnet.Conn    // the socket; nil once closed
	rec *tlsrec.Conn // nil until the handshake is done
	// plain[off:] is decrypted input not yet discarded.
	plain []byte
	off   int
	// eof: the peer sent close_notify; failed: a record was malformed or
	// did not authenticate, or the peer sent a fatal alert (err).
	eof, failed bool
	err         error
}

// plainKeep is the capacity of a plaintext buffer kept once it is empty
// and the connection idle; a larger one (a held chunked body) is dropped.
const plainKeep = 64 << 10

// reset readies s for a connection on raw.
func (s *recordStream) reset(w *Worker, raw gnet.Conn) {
	s.w, s.raw, s.rec = w, raw, nil
	s.plain, s.off = s.plain[:0], 0
	s.eof, s.failed, s.err = false, false, nil
}

// Peek implements connIO.
func (s *recordStream) Peek(n int) ([]byte, error) {
	b := s.plain[s.off:]
	if n > len(b) {
		return nil, io.ErrShortBuffer
	}
	if n <= 0 {
		return b, nil
	}
	return b[:n], nil
}

// Discard implements connIO.
func (s *recordStream) Discard(n int) (int, error) {
	left := len(s.plain) - s.off
	if n <= 0 || n >= left {
		s.plain, s.off = s.plain[:0], 0
		return left, nil
	}
	s.off += n
	return n, nil
}

// InboundBuffered implements connIO.
func (s *recordStream) InboundBuffered() int { return len(s.plain) - s.off }

// Write implements connIO: b goes out in records (as few as fit).
func (s *recordStream) Write(b []byte) (int, error) {
	if s.rec == nil || s.raw == nil {
		return 0, io.ErrClosedPipe
	}
	s.w.tlsOut = s.rec.Seal(s.w.tlsOut[:0], b)
	if _, err := s.raw.Write(s.w.tlsOut); err != nil {
		return 0, err
	}
	return len(b), nil
}

// Writev implements connIO: bs go out in records, small pieces together.
func (s *recordStream) Writev(bs [][]byte) (int, error) {
	if s.rec == nil || s.raw == nil {
		return 0, io.ErrClosedPipe
	}
	n := 0
	for _, b := range bs {
		n += len(b)
	}
	s.w.tlsOut = s.rec.SealV(s.w.tlsOut[:0], bs)
	if _, err := s.raw.Write(s.w.tlsOut); err != nil {
		return 0, err
	}
	return n, nil
}

// start makes rec the stream's record layer once the handshake is done,
// with rest, the peer's records that came after its Finished (whole
// records: the loop fed only those), decrypted at once. It reports the
// stream's failure, if any.
func (s *recordStream) start(rec *tlsrec.Conn, rest []byte) error {
	s.rec = rec
	if len(rest) > 0 {
		out, _, err := rec.Open(s.plain[:0], rest, 1<<62)
		s.plain = out
		s.opened(err)
	}
	if s.failed {
		return s.err
	}
	return nil
}

// fill decrypts the whole records gnet holds into plain and discards
// them; a partial record stays for the next read. It runs at each traffic
// call once the handshake is done, before the request or response code
// looks at the input, and is where plain moves: its unread bytes to its
// start, or into a larger buffer. What the record layer has to send of
// its own (a KeyUpdate's answer) goes out.
func (s *recordStream) fill() {
	raw, _ := s.raw.Peek(-1)
	if len(raw) == 0 || s.failed || s.eof {
		return
	}
	if s.off > 0 {
		n := copy(s.plain, s.plain[s.off:])
		s.plain, s.off = s.plain[:n], 0
	}
	out, used, err := s.rec.Open(s.plain, raw, 1<<62)
	s.plain = out
	if used > 0 {
		_, _ = s.raw.Discard(used)
	}
	s.opened(err)
	if s.rec.Pending() {
		s.w.tlsOut = s.rec.AppendPending(s.w.tlsOut[:0])
		_, _ = s.raw.Write(s.w.tlsOut)
	}
}

// opened records the end Open reported, if any.
func (s *recordStream) opened(err error) {
	switch {
	case err == io.EOF:
		s.eof = true
	case err != nil:
		s.failed, s.err = true, err
	}
}

// ended reports whether the peer's side of the stream is over
// (close_notify, a fatal alert, a record that fails): once the plaintext
// before it is read, the connection closes as at an EOF.
func (s *recordStream) ended() bool { return s.eof || s.failed }

// closeNotify queues a close_notify after the last answer: the peer
// tells a complete answer from one cut short by a close.
func (s *recordStream) closeNotify() {
	if s.rec == nil || s.failed || s.raw == nil {
		return
	}
	s.w.tlsOut = s.rec.CloseNotify(s.w.tlsOut[:0])
	_, _ = s.raw.Write(s.w.tlsOut)
}

// idle drops a large plaintext buffer once it is empty.
func (s *recordStream) idle() {
	if s.off == len(s.plain) && cap(s.plain) > plainKeep {
		s.plain, s.off = nil, 0
	}
}

// pipe is the loop's end of a TLS handshake that crypto/tls runs on a
// goroutine (goHandshake), over a tlsrec.HandshakeConn: the loop feeds it
// the peer's whole records (feed); what crypto/tls writes (send) and the
// handshake's end (run) come back to the loop as tasks
// (EventLoop.Execute), in the order they were made. A client's handshake
// and an upstream's embed it.
type pipe struct {
	el  gnet.EventLoop
	raw gnet.Conn
	sec tlsrec.Secrets
	hc  *tlsrec.HandshakeConn
	tc  *tls.Conn
	// live tells, on the loop, whether the handshake is still its
	// connection's and the connection open.
	live func() bool
}

// init readies p for a handshake on raw, a connection of loop el.
func (p *pipe) init(el gnet.EventLoop, raw gnet.Conn, live func() bool) {
	p.el, p.raw, p.live = el, raw, live
	p.hc = tlsrec.NewHandshakeConn(&p.sec, p.send)
}

// feed hands the whole records gnet holds to the handshake, and discards
// them; a partial one waits for more. bad: what arrived is not TLS.
func (p *pipe) feed() (bad bool) {
	raw, _ := p.raw.Peek(-1)
	n := 0
	for {
		l := tlsrec.RecordLen(raw[n:])
		if l < 0 {
			return true
		}
		if l == 0 {
			break
		}
		n += l
	}
	if n > 0 {
		p.hc.Feed(raw[:n])
		_, _ = p.raw.Discard(n)
	}
	return false
}

// send runs on the handshake's goroutine: b (a copy) goes to the peer
// from the loop, unless the connection is gone.
func (p *pipe) send(b []byte) {
	_ = p.el.Execute(context.Background(), gnet.RunnableFunc(func(context.Context) error {
		if p.live() {
			_, _ = p.raw.Write(b)
		}
		return nil
	}))
}

// run is the handshake's goroutine body: crypto/tls's handshake, then
// after, on the goroutine (work the loop must not do: a chain to verify),
// then done on the loop.
func (p *pipe) run(after func(error), done func(error)) {
	err := p.tc.Handshake()
	if after != nil {
		after(err)
	}
	_ = p.el.Execute(context.Background(), gnet.RunnableFunc(func(context.Context) error {
		done(err)
		return nil
	}))
}

// abort ends a handshake whose connection closed or timed out: its
// goroutine's read returns; its tasks find it gone (live).
func (p *pipe) abort() { _ = p.hc.Close() }
