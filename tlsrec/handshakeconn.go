package tlsrec

import (
	"bytes"
	"net"
	"sync"
	"time"
)

// HandshakeConn is the net.Conn a crypto/tls handshake runs over, on a
// goroutine of its own, while an event loop owns the socket. The loop
// hands it the bytes it reads (Feed; whole records are best, but any cut
// works); Read blocks until it has bytes and returns at most the rest of
// the current record, so that crypto/tls never reads past the record that
// ends the handshake. Write passes a copy of the bytes to send to the
// function given to NewHandshakeConn, called on the handshake goroutine.
// Both tell the Secrets.
//
// Feed, Close and Rest may be called from any goroutine (the loop's); Read
// and Write are the handshake goroutine's. Close makes a blocked Read, and
// every later Read and Write, fail with net.ErrClosed: it is how a
// handshake is abandoned (tls.Conn.HandshakeContext closes the conn when
// its context ends). Deadlines are accepted and ignored; a handshake
// timeout is a Close (or a context) from the loop.
type HandshakeConn struct {
	s    *Secrets
	send func(b []byte)

	mu   sync.Mutex
	cond sync.Cond
	in   []byte
	off  int
	// cur: bytes left of the record being read.
	cur    int
	closed bool

	local, remote net.Addr
}

// NewHandshakeConn returns a HandshakeConn telling s what goes through
// it, which passes the bytes crypto/tls writes to send (a copy the
// function may keep).
func NewHandshakeConn(s *Secrets, send func(b []byte)) *HandshakeConn {
	h := &HandshakeConn{s: s, send: send}
	h.cond.L = &h.mu
	return h
}

// SetAddrs sets what LocalAddr and RemoteAddr return (crypto/tls does not
// use them; the handshake's callbacks may). Call it before the handshake.
func (h *HandshakeConn) SetAddrs(local, remote net.Addr) {
	h.mu.Lock()
	h.local, h.remote = local, remote
	h.mu.Unlock()
}

// Feed hands the handshake bytes read from the peer; it copies them.
func (h *HandshakeConn) Feed(records []byte) {
	if len(records) == 0 {
		return
	}
	h.mu.Lock()
	if h.off == len(h.in) {
		h.in, h.off = h.in[:0], 0
	}
	h.in = append(h.in, records...)
	h.mu.Unlock()
	h.cond.Signal()
}

// Read returns fed bytes, at most to the end of the current record,
// waiting for them; it fails with net.ErrClosed after Close.
func (h *HandshakeConn) Read(b []byte) (int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for {
		if h.closed {
			return 0, net.ErrClosed
		}
		avail := len(h.in) - h.off
		if avail > 0 && (h.cur > 0 || avail >= headerLen) {
			break
		}
		h.cond.Wait()
	}
	if h.cur == 0 {
		hdr := h.in[h.off:]
		h.cur = headerLen + (int(hdr[3])<<8 | int(hdr[4]))
	}
	n := copy(b[:min(len(b), h.cur)], h.in[h.off:])
	h.off += n
	h.cur -= n
	h.s.Received(b[:n])
	return n, nil
}

// Write passes a copy of b to the send function.
func (h *HandshakeConn) Write(b []byte) (int, error) {
	h.mu.Lock()
	closed := h.closed
	h.mu.Unlock()
	if closed {
		return 0, net.ErrClosed
	}
	h.s.Sent(b)
	h.send(bytes.Clone(b))
	return len(b), nil
}

// Close makes Read and Write fail from now on, a blocked Read included.
func (h *HandshakeConn) Close() error {
	h.mu.Lock()
	h.closed = true
	h.mu.Unlock()
	h.cond.Broadcast()
	return nil
}

// Rest returns the bytes fed but not read: after the handshake returned,
// the peer's first records after it, for Conn.Open. The slice is the
// HandshakeConn's and valid until the next Feed.
func (h *HandshakeConn) Rest() []byte {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.in[h.off:]
}

// LocalAddr returns the address set by SetAddrs, or an empty TCP address.
func (h *HandshakeConn) LocalAddr() net.Addr {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.local == nil {
		return &net.TCPAddr{}
	}
	return h.local
}

// RemoteAddr returns the address set by SetAddrs, or an empty TCP address.
func (h *HandshakeConn) RemoteAddr() net.Addr {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.remote == nil {
		return &net.TCPAddr{}
	}
	return h.remote
}

// SetDeadline is accepted and ignored.
func (h *HandshakeConn) SetDeadline(time.Time) error { return nil }

// SetReadDeadline is accepted and ignored.
func (h *HandshakeConn) SetReadDeadline(time.Time) error { return nil }

// SetWriteDeadline is accepted and ignored.
func (h *HandshakeConn) SetWriteDeadline(time.Time) error { return nil }
