// Package tlsrec (stand-in until the real package lands): TLS 1.3 AES-GCM only.
package tlsrec

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/sha256"
	"crypto/tls"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"time"
)

type Secrets struct {
	mu           sync.Mutex
	client, serv []byte
	sent, recv   []byte
}

func (s *Secrets) Write(line []byte) (int, error) {
	f := strings.Fields(string(line))
	if len(f) == 3 {
		b, _ := hex.DecodeString(f[2])
		s.mu.Lock()
		switch f[0] {
		case "CLIENT_TRAFFIC_SECRET_0":
			s.client = b
		case "SERVER_TRAFFIC_SECRET_0":
			s.serv = b
		}
		s.mu.Unlock()
	}
	return len(line), nil
}
func (s *Secrets) Sent(b []byte)     { s.mu.Lock(); s.sent = append(s.sent, b...); s.mu.Unlock() }
func (s *Secrets) Received(b []byte) { s.mu.Lock(); s.recv = append(s.recv, b...); s.mu.Unlock() }

type half struct {
	aead  cipher.AEAD
	iv    [12]byte
	seq   uint64
	nonce [12]byte
}

func expand(secret []byte, label string, n int) []byte {
	var info []byte
	info = binary.BigEndian.AppendUint16(info, uint16(n))
	info = append(info, byte(6+len(label)))
	info = append(info, "tls13 "...)
	info = append(info, label...)
	info = append(info, 0)
	out, _ := hkdf.Expand(sha256.New, secret, string(info), n)
	return out
}

func newHalf(secret []byte) *half {
	blk, _ := aes.NewCipher(expand(secret, "key", 16))
	a, _ := cipher.NewGCM(blk)
	h := &half{aead: a}
	copy(h.iv[:], expand(secret, "iv", 12))
	return h
}

func (h *half) next() []byte {
	h.nonce = h.iv
	for i := 0; i < 8; i++ {
		h.nonce[4+i] ^= byte(h.seq >> (56 - 8*i))
	}
	h.seq++
	return h.nonce[:]
}

type Conn struct {
	in, out *half
	err     error
	scratch []byte
}

func countApp(h *half, stream []byte) {
	var tmp []byte
	for len(stream) >= 5 {
		n := RecordLen(stream)
		if n <= 0 {
			return
		}
		if stream[0] == 23 {
			save := h.seq
			nonce := h.next()
			if _, err := h.aead.Open(tmp[:0], nonce, stream[5:n], stream[:5]); err != nil {
				h.seq = save
			}
		}
		stream = stream[n:]
	}
}

func New(state *tls.ConnectionState, isClient bool, s *Secrets) (*Conn, error) {
	if state.Version != tls.VersionTLS13 || state.CipherSuite != tls.TLS_AES_128_GCM_SHA256 {
		return nil, errors.New("tlsrec stub: TLS 1.3 AES-128-GCM only")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	c := &Conn{in: newHalf(s.client), out: newHalf(s.serv)}
	countApp(c.out, s.sent)
	return c, nil
}

func (c *Conn) Open(dst, src []byte, limit int) ([]byte, int, error) {
	used := 0
	for c.err == nil {
		n := RecordLen(src[used:])
		if n == 0 {
			break
		}
		if n < 0 {
			c.err = errors.New("tlsrec: bad record")
			break
		}
		rec := src[used : used+n]
		start := len(dst)
		pt, err := c.in.aead.Open(dst[start:], c.in.next(), rec[5:], rec[:5])
		if err != nil {
			c.err = err
			break
		}
		i := len(pt) - 1
		for i >= 0 && pt[i] == 0 {
			i--
		}
		if i < 0 {
			c.err = errors.New("tlsrec: empty inner")
			break
		}
		used += n
		switch pt[i] {
		case 23:
			dst = append(dst[:start], pt[:i]...)
		case 21:
			if i >= 2 && pt[1] == 0 {
				c.err = io.EOF
			} else {
				c.err = errors.New("tlsrec: alert")
			}
		default:
			c.err = errors.New("tlsrec: unexpected record")
		}
	}
	return dst, used, c.err
}

func (c *Conn) seal(dst []byte, typ byte, parts [][]byte, one []byte) []byte {
	start := len(dst)
	dst = append(dst, 23, 3, 3, 0, 0)
	for _, p := range parts {
		dst = append(dst, p...)
	}
	dst = append(dst, one...)
	dst = append(dst, typ)
	n := len(dst) - start - 5 + 16
	dst[start+3], dst[start+4] = byte(n>>8), byte(n)
	return c.out.aead.Seal(dst[:start+5], c.out.next(), dst[start+5:], dst[start:start+5])
}

func (c *Conn) SealV(dst []byte, parts [][]byte) []byte {
	total := 0
	for _, p := range parts {
		total += len(p)
	}
	if total <= 16384 {
		return c.seal(dst, 23, parts, nil)
	}
	for _, p := range parts {
		dst = c.Seal(dst, p)
	}
	return dst
}

func (c *Conn) Seal(dst, data []byte) []byte {
	for len(data) > 0 {
		n := min(len(data), 16384)
		dst = c.seal(dst, 23, nil, data[:n])
		data = data[n:]
	}
	return dst
}

func (c *Conn) Pending() bool                       { return false }
func (c *Conn) AppendPending(dst []byte) []byte     { return dst }
func (c *Conn) CloseNotify(dst []byte) []byte       { return c.seal(dst, 21, nil, []byte{1, 0}) }

func RecordLen(b []byte) int {
	if len(b) < 5 {
		return 0
	}
	if b[0] < 20 || b[0] > 23 {
		return -1
	}
	n := int(b[3])<<8 | int(b[4])
	if n > 16384+256 {
		return -1
	}
	if len(b) < 5+n {
		return 0
	}
	return 5 + n
}

type HandshakeConn struct {
	mu     sync.Mutex
	cond   sync.Cond
	in     []byte
	closed bool
	sec    *Secrets
	send   func([]byte)
}

func NewHandshakeConn(s *Secrets, send func(b []byte)) *HandshakeConn {
	h := &HandshakeConn{sec: s, send: send}
	h.cond.L = &h.mu
	return h
}

func (h *HandshakeConn) Feed(b []byte) {
	h.mu.Lock()
	h.in = append(h.in, b...)
	h.mu.Unlock()
	h.cond.Signal()
}

func (h *HandshakeConn) Read(b []byte) (int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for len(h.in) == 0 && !h.closed {
		h.cond.Wait()
	}
	if h.closed {
		return 0, net.ErrClosed
	}
	lim := len(h.in)
	if n := RecordLen(h.in); n > 0 {
		lim = n
	}
	n := copy(b[:min(len(b), lim)], h.in)
	h.sec.Received(h.in[:n])
	h.in = h.in[n:]
	return n, nil
}

func (h *HandshakeConn) Write(b []byte) (int, error) {
	h.sec.Sent(b)
	h.send(append([]byte(nil), b...))
	return len(b), nil
}

func (h *HandshakeConn) Close() error {
	h.mu.Lock()
	h.closed = true
	h.mu.Unlock()
	h.cond.Broadcast()
	return nil
}

func (h *HandshakeConn) Rest() []byte {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.in
}

func (h *HandshakeConn) LocalAddr() net.Addr                { return &net.TCPAddr{} }
func (h *HandshakeConn) RemoteAddr() net.Addr               { return &net.TCPAddr{} }
func (h *HandshakeConn) SetDeadline(time.Time) error      { return nil }
func (h *HandshakeConn) SetReadDeadline(time.Time) error  { return nil }
func (h *HandshakeConn) SetWriteDeadline(time.Time) error { return nil }
