package tlsrec

import (
	"bytes"
	"crypto/tls"
	"encoding/hex"
)

// Secrets collects what Conn needs from one crypto/tls handshake. It is
// the handshake's Config.KeyLogWriter (Write gets NSS key log lines), and
// is told every byte the handshake sent and received (Sent, Received;
// HandshakeConn does that). One Secrets serves one handshake. It is used by
// the handshake goroutine only, then handed to New; it is not safe for
// concurrent use.
//
// It keeps the secrets of the lines it needs (CLIENT_TRAFFIC_SECRET_0,
// SERVER_TRAFFIC_SECRET_0, CLIENT_RANDOM), the first bytes of each
// direction's hello (for the TLS 1.2 randoms) and the protected records of
// each direction (a few kilobytes: for TLS 1.3 the encrypted handshake, for
// TLS 1.2 the Finished), which New needs to tell the sequence numbers.
type Secrets struct {
	line          []byte
	clientRandom  []byte
	clientTraffic []byte
	serverTraffic []byte
	master        []byte
	// resumed: a TLS 1.2 session's master secret and the suite it was
	// made with, from Resumed.
	resumed     []byte
	resumedSuit uint16
	sent, recv  stream
}

// Write takes NSS key log lines (crypto/tls writes one per call; a line
// may also come in pieces). It always succeeds.
func (s *Secrets) Write(line []byte) (int, error) {
	s.line = append(s.line, line...)
	for {
		i := bytes.IndexByte(s.line, '\n')
		if i < 0 {
			break
		}
		s.logLine(s.line[:i])
		s.line = s.line[i+1:]
	}
	if len(s.line) == 0 {
		s.line = nil
	}
	return len(line), nil
}

func (s *Secrets) logLine(l []byte) {
	f := bytes.Fields(l)
	if len(f) != 3 {
		return
	}
	random, err1 := hex.DecodeString(string(f[1]))
	secret, err2 := hex.DecodeString(string(f[2]))
	if err1 != nil || err2 != nil {
		return
	}
	switch string(f[0]) {
	case "CLIENT_TRAFFIC_SECRET_0":
		s.clientTraffic = secret
	case "SERVER_TRAFFIC_SECRET_0":
		s.serverTraffic = secret
	case "CLIENT_RANDOM":
		s.master = secret
	default:
		return
	}
	s.clientRandom = random
}

// Sent is told bytes the handshake sent, in order.
func (s *Secrets) Sent(b []byte) { s.sent.add(b) }

// Received is told bytes the handshake read, in order.
func (s *Secrets) Received(b []byte) { s.recv.add(b) }

// Resumed is told the session a TLS 1.2 handshake resumes: crypto/tls
// writes no key log line for a resumed TLS 1.2 session, so its master
// secret comes from the session state. UnwrapSession (server) and
// ClientSessionCache (client) call it; a TLS 1.3 session is ignored (its
// traffic secrets are logged).
func (s *Secrets) Resumed(ss *tls.SessionState) {
	if ss == nil {
		return
	}
	b, err := ss.Bytes()
	if err != nil {
		return
	}
	// SessionState's encoding (crypto/tls ticket.go, kept compatible
	// across Go versions since tickets are shared between them): uint16
	// version, uint8 type, uint16 cipher_suite, uint64 created_at, then
	// the secret as opaque<1..2^8-1>.
	if len(b) < 14 || b[0] != 3 || b[1] != 3 || len(b) < 14+int(b[13]) {
		return
	}
	s.resumedSuit = uint16(b[3])<<8 | uint16(b[4])
	s.resumed = bytes.Clone(b[14 : 14+int(b[13])])
}

// UnwrapSession returns a Config.UnwrapSession for the server handshake s
// follows: it decrypts the ticket with cfg's keys, as crypto/tls does
// without the hook, and tells s the session (Resumed).
func (s *Secrets) UnwrapSession(cfg *tls.Config) func([]byte, tls.ConnectionState) (*tls.SessionState, error) {
	return func(identity []byte, cs tls.ConnectionState) (*tls.SessionState, error) {
		ss, err := cfg.DecryptTicket(identity, cs)
		if err == nil && ss != nil && cs.Version == tls.VersionTLS12 {
			s.Resumed(ss)
		}
		return ss, err
	}
}

// ClientSessionCache wraps the session cache of a client handshake s
// follows: the session it offers is told to s (Resumed), for the case the
// server resumes it. The wrapper is for one handshake; c may be shared.
func (s *Secrets) ClientSessionCache(c tls.ClientSessionCache) tls.ClientSessionCache {
	return &clientCache{c: c, s: s}
}

type clientCache struct {
	c tls.ClientSessionCache
	s *Secrets
}

func (cc *clientCache) Get(key string) (*tls.ClientSessionState, bool) {
	cs, ok := cc.c.Get(key)
	if ok && cs != nil {
		if _, ss, err := cs.ResumptionState(); err == nil {
			cc.s.Resumed(ss)
		}
	}
	return cs, ok
}

func (cc *clientCache) Put(key string, cs *tls.ClientSessionState) { cc.c.Put(key, cs) }

// stream follows one direction of the handshake: it keeps the start of the
// hello and the records protected under negotiated keys.
type stream struct {
	// buf holds the kept records, then the bytes of an incomplete one.
	buf      []byte
	kept     int
	hello    [38]byte
	helloN   int
	afterCCS bool
	bad      bool
}

func (st *stream) add(b []byte) {
	if st.bad {
		return
	}
	st.buf = append(st.buf, b...)
	for {
		rest := st.buf[st.kept:]
		n := RecordLen(rest)
		if n == 0 {
			return
		}
		if n < 0 {
			st.bad = true
			return
		}
		keep := false
		switch rest[0] {
		case typeHandshake:
			if st.afterCCS {
				keep = true // TLS 1.2: Finished
			} else if st.helloN < len(st.hello) {
				st.helloN += copy(st.hello[st.helloN:], rest[headerLen:n])
			}
		case typeChangeCipherSpec:
			st.afterCCS = true
		case typeApplicationData:
			keep = true
		}
		if keep {
			st.kept += n
		} else {
			st.buf = append(st.buf[:st.kept], rest[n:]...)
		}
	}
}

// records returns the kept records one by one.
func (st *stream) records() [][]byte {
	var rs [][]byte
	for b := st.buf[:st.kept]; len(b) > 0; {
		n := RecordLen(b)
		rs = append(rs, b[:n])
		b = b[n:]
	}
	return rs
}

// random returns the 32-byte random of the direction's hello (RFC 5246
// §7.4.1.2: handshake header 4 bytes, version 2, random 32), or nil.
func (st *stream) random() []byte {
	if st.helloN < len(st.hello) {
		return nil
	}
	return st.hello[6:38]
}
