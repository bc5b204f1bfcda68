package tlsrec

import (
	"bytes"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"slices"
)

// Conn is the record layer of one connection after its handshake: it
// opens the peer's records and seals ours, with the keys crypto/tls
// negotiated. A Conn belongs to one goroutine (the event loop's); it is not
// safe for concurrent use.
type Conn struct {
	read, write halfConn
	version     uint16
	isClient    bool
	// rerr: the read side is finished (io.EOF after close_notify, or the
	// error); a fatal one finishes the write side too (werr).
	rerr, werr error
	// alert: a fatal alert to send (0: none); sent once.
	alert     byte
	alertDone bool
	// keyUpdateOwed: the peer asked for a KeyUpdate, which goes before
	// our next record.
	keyUpdateOwed bool
	closeSent     bool
	// hs holds an incomplete post-handshake message.
	hs []byte
	// rekeyAt: the write sequence number at which a TLS 1.3 Conn updates
	// its own key (RFC 8446 §5.5).
	rekeyAt uint64
}

// aesGCMRekey is when a TLS 1.3 Conn sealing with AES-GCM updates its key:
// RFC 8446 §5.5 allows 2^24.5 full-size records per key.
const aesGCMRekey = 1 << 24

// PeerAlert is the error Open returns for an alert from the peer other
// than close_notify: the alert's description (RFC 8446 §6).
type PeerAlert uint8

func (a PeerAlert) Error() string {
	return "tlsrec: peer sent alert: " + tls.AlertError(a).Error()
}

var errNoSecrets = errors.New("tlsrec: secrets of the handshake missing (is Secrets the Config's KeyLogWriter and told Sent and Received?)")

// New makes the record layer that continues the connection crypto/tls
// set up: state is the handshake's ConnectionState (Version, CipherSuite),
// isClient the role we played, s what the handshake told its Secrets.
// Supported: TLS 1.3 with TLS_AES_128_GCM_SHA256, TLS_AES_256_GCM_SHA384
// and TLS_CHACHA20_POLY1305_SHA256, TLS 1.2 with the ECDHE-ECDSA and
// ECDHE-RSA AEAD suites (AES-128/256-GCM, CHACHA20-POLY1305); anything else
// is an error. New tells the sequence numbers from the records s saw
// (see the package documentation). It allocates; a Conn's steady state
// does not.
func New(state *tls.ConnectionState, isClient bool, s *Secrets) (*Conn, error) {
	su, ok := suiteFor(state.Version, state.CipherSuite)
	if !ok {
		return nil, fmt.Errorf("tlsrec: unsupported %s with %s", tls.VersionName(state.Version), tls.CipherSuiteName(state.CipherSuite))
	}
	if s.sent.bad || s.recv.bad {
		return nil, errors.New("tlsrec: handshake bytes are not TLS records")
	}
	c := &Conn{version: state.Version, isClient: isClient}
	if state.Version == tls.VersionTLS13 {
		if s.clientTraffic == nil || s.serverTraffic == nil {
			return nil, errNoSecrets
		}
		rs, ws := s.serverTraffic, s.clientTraffic
		if !isClient {
			rs, ws = ws, rs
		}
		if err := c.read.setKey13(su, rs); err != nil {
			return nil, err
		}
		if err := c.write.setKey13(su, ws); err != nil {
			return nil, err
		}
		if !su.chacha {
			c.rekeyAt = aesGCMRekey
		}
	} else {
		if err := c.keys12(su, state.CipherSuite, isClient, s); err != nil {
			return nil, err
		}
	}
	var err error
	if c.read.seq, err = sequence(&c.read, &s.recv); err != nil {
		return nil, err
	}
	if c.write.seq, err = sequence(&c.write, &s.sent); err != nil {
		return nil, err
	}
	return c, nil
}

// keys12 derives the TLS 1.2 key block (RFC 5246 §6.3).
func (c *Conn) keys12(su suite, id uint16, isClient bool, s *Secrets) error {
	cr, sr := s.sent.random(), s.recv.random()
	if !isClient {
		cr, sr = sr, cr
	}
	if cr == nil || sr == nil {
		return errors.New("tlsrec: the handshake's hellos were not seen (is Secrets told Sent and Received?)")
	}
	master := s.master
	if master == nil || !bytes.Equal(s.clientRandom, cr) {
		if s.resumed == nil || s.resumedSuit != id {
			return errors.New("tlsrec: no TLS 1.2 master secret (a resumed session needs Secrets.UnwrapSession or Secrets.ClientSessionCache)")
		}
		master = s.resumed
	}
	kb := prf12(su.hash, master, "key expansion", append(slices.Clone(sr), cr...), 2*su.keyLen+2*su.ivLen)
	ck, sk := kb[:su.keyLen], kb[su.keyLen:2*su.keyLen]
	civ, siv := kb[2*su.keyLen:2*su.keyLen+su.ivLen], kb[2*su.keyLen+su.ivLen:]
	if isClient {
		ck, sk, civ, siv = sk, ck, siv, civ
	}
	// Now ck, civ are the peer's (read); sk, siv ours (write).
	if err := c.read.setKey12(su, ck, civ); err != nil {
		return err
	}
	return c.write.setKey12(su, sk, siv)
}

// sequence tells the sequence number a direction continues from: the
// number of records in st protected with h's key. TLS 1.2: every record
// after ChangeCipherSpec is, the Finished first. TLS 1.3: the records
// under the application key are those after the handshake's last, found by
// trying the first records with it (a record under the handshake key fails
// authentication). Every record counted must open.
func sequence(h *halfConn, st *stream) (uint64, error) {
	rs := st.records()
	if h.tls13 {
		rs = slices.DeleteFunc(rs, func(r []byte) bool { return r[0] != typeApplicationData })
	} else if len(rs) == 0 {
		return 0, errors.New("tlsrec: the handshake's Finished messages were not seen (is Secrets told Sent and Received?)")
	}
	var scratch []byte
	trial := *h
	first := 0
	if h.tls13 {
		for first < len(rs) {
			trial.seq = 0
			if _, _, _, err := trial.open(scratch[:0], rs[first]); err == nil {
				break
			}
			first++
		}
	}
	trial.seq = 0
	for _, r := range rs[first:] {
		typ, out, _, err := trial.open(scratch[:0], r)
		if err != nil {
			return 0, fmt.Errorf("tlsrec: a record of the handshake does not open with the negotiated keys: %w", err)
		}
		if !h.tls13 && trial.seq == 1 && (typ != typeHandshake || len(out) < 4 || out[0] != 20) {
			return 0, errors.New("tlsrec: the first TLS 1.2 record after ChangeCipherSpec is not a Finished")
		}
		scratch = out
	}
	return trial.seq, nil
}

// Open decrypts the complete records at the start of src and appends their
// application data to dst, stopping before a record that would take
// len(out) past limit (the measure is the record's decrypted body, at most
// MaxPlaintext+1 bytes: keep that much room for progress); used is how many
// bytes of src it consumed (the rest: a partial record, or records left for
// later). src is not modified; out aliases dst (it is dst, grown when dst
// lacks room). Post-handshake messages are handled inside: a TLS 1.3
// KeyUpdate updates the read key (with our answer queued when the peer
// requested one, see Pending); a NewSessionTicket on the client side is
// dropped; anything else (a renegotiation, a ticket sent to a server, a
// post-handshake CertificateRequest) is an error. A close_notify gives
// io.EOF with the data before it. Any other alert (PeerAlert), a bad record
// MAC, an oversized or malformed record give an error, and the Conn is
// finished: later calls return the same error. Once dst has room, Open
// allocates nothing (a KeyUpdate does).
func (c *Conn) Open(dst, src []byte, limit int) (out []byte, used int, err error) {
	if c.rerr != nil {
		return dst, 0, c.rerr
	}
	for {
		rec := src[used:]
		n := RecordLen(rec)
		if n == 0 {
			return dst, used, nil
		}
		if n < 0 {
			return dst, used, c.fail(alertDecodeError, errors.New("tlsrec: malformed record header"))
		}
		rec = rec[:n]
		if rec[0] == typeChangeCipherSpec {
			return dst, used, c.fail(alertUnexpectedMessage, errors.New("tlsrec: change_cipher_spec after the handshake"))
		}
		// room: the decrypted body's length.
		room := n - headerLen - 16
		if c.read.s.explicit {
			room -= 8
		}
		if room > 0 && len(dst)+room > limit {
			return dst, used, nil
		}
		typ, o, alert, err := c.read.open(dst, rec)
		if err != nil {
			return dst, used, c.fail(alert, err)
		}
		used += n
		content := o[len(dst):]
		switch typ {
		case typeApplicationData:
			dst = o
		case typeAlert:
			if len(content) != 2 {
				return dst, used, c.fail(alertDecodeError, errors.New("tlsrec: malformed alert"))
			}
			if content[1] == alertCloseNotify {
				c.rerr = io.EOF
				return dst, used, io.EOF
			}
			c.rerr = PeerAlert(content[1])
			c.werr = c.rerr
			return dst, used, c.rerr
		case typeHandshake:
			if err := c.handshake(content); err != nil {
				return dst, used, err
			}
		default:
			return dst, used, c.fail(alertUnexpectedMessage, fmt.Errorf("tlsrec: unexpected record of type %d", typ))
		}
	}
}

// fail finishes the Conn with err, a fatal alert queued.
func (c *Conn) fail(alert byte, err error) error {
	c.rerr, c.werr = err, err
	c.alert = alert
	return err
}

// Post-handshake handshake message types (RFC 8446 §4).
const (
	msgNewSessionTicket = 4
	msgKeyUpdate        = 24
	maxHandshakeMsg     = 1 << 16
)

// handshake takes the content of a handshake record: post-handshake
// messages, possibly continuing one begun in an earlier record.
func (c *Conn) handshake(b []byte) error {
	if c.version != tls.VersionTLS13 {
		return c.fail(alertUnexpectedMessage, errors.New("tlsrec: TLS 1.2 handshake message after the handshake (renegotiation is not supported)"))
	}
	if len(b) == 0 {
		return c.fail(alertUnexpectedMessage, errors.New("tlsrec: empty handshake record"))
	}
	if len(c.hs) > 0 {
		c.hs = append(c.hs, b...)
		b = c.hs
	}
	for len(b) >= 4 {
		n := int(b[1])<<16 | int(b[2])<<8 | int(b[3])
		if n > maxHandshakeMsg {
			return c.fail(alertDecodeError, errors.New("tlsrec: post-handshake message too long"))
		}
		if len(b) < 4+n {
			break
		}
		msg := b[:4+n]
		b = b[4+n:]
		switch msg[0] {
		case msgNewSessionTicket:
			if !c.isClient {
				return c.fail(alertUnexpectedMessage, errors.New("tlsrec: NewSessionTicket sent to a server"))
			}
		case msgKeyUpdate:
			if n != 1 || msg[4] > 1 {
				return c.fail(alertDecodeError, errors.New("tlsrec: malformed KeyUpdate"))
			}
			if len(b) != 0 {
				// RFC 8446 §5.1: handshake messages must not span key
				// changes.
				return c.fail(alertUnexpectedMessage, errors.New("tlsrec: KeyUpdate not at the end of its record"))
			}
			if err := c.read.update(); err != nil {
				return c.fail(alertUnexpectedMessage, err)
			}
			if msg[4] == 1 {
				c.keyUpdateOwed = true
			}
		default:
			return c.fail(alertUnexpectedMessage, fmt.Errorf("tlsrec: unexpected post-handshake message of type %d", msg[0]))
		}
	}
	if len(b) > 0 {
		// b may lie in c.hs already: copy moves it to the front.
		if len(c.hs) > 0 {
			c.hs = c.hs[:copy(c.hs, b)]
		} else {
			c.hs = append(c.hs, b...)
		}
	} else {
		c.hs = c.hs[:0]
	}
	return nil
}

// Pending tells whether the record layer has bytes of its own to send: a
// KeyUpdate answer, or the alert after an error.
func (c *Conn) Pending() bool {
	return (c.alert != 0 && !c.alertDone) || (c.keyUpdateOwed && c.werr == nil && !c.closeSent)
}

// AppendPending appends the records Pending tells of (sealed) to dst and
// clears them. Seal, SealV and CloseNotify do the same first, so that a
// KeyUpdate answer always precedes records sealed after it.
func (c *Conn) AppendPending(dst []byte) []byte {
	if c.alert != 0 {
		if !c.alertDone {
			c.alertDone = true
			dst = c.sealAlert(dst, alertLevelFatal, c.alert)
		}
		return dst
	}
	if c.keyUpdateOwed && c.werr == nil && !c.closeSent {
		c.keyUpdateOwed = false
		dst = c.sealKeyUpdate(dst, false)
	}
	return dst
}

func (c *Conn) sealAlert(dst []byte, level, desc byte) []byte {
	dst = slices.Grow(dst, 2+c.write.overhead())
	start := len(dst)
	dst = c.write.begin(dst, typeAlert)
	dst = append(dst, level, desc)
	return c.write.seal(dst, start, typeAlert)
}

// sealKeyUpdate appends a KeyUpdate under the current write key, then
// moves the write side to the next key.
func (c *Conn) sealKeyUpdate(dst []byte, requested bool) []byte {
	dst = slices.Grow(dst, 5+c.write.overhead())
	start := len(dst)
	dst = c.write.begin(dst, typeHandshake)
	var r byte
	if requested {
		r = 1
	}
	dst = append(dst, msgKeyUpdate, 0, 0, 1, r)
	dst = c.write.seal(dst, start, typeHandshake)
	if err := c.write.update(); err != nil {
		c.fail(alertUnexpectedMessage, err)
	}
	return dst
}

// Seal appends to dst the records carrying data; see SealV.
func (c *Conn) Seal(dst, data []byte) []byte {
	one := [1][]byte{data}
	return c.SealV(dst, one[:])
}

// SealV appends to dst the records carrying parts' bytes in order, as few
// records as fit (at most MaxPlaintext bytes of plaintext each), copying
// then sealing in place: nothing is allocated once dst has room (the
// parts' length plus 30 bytes per record). Records pending (a KeyUpdate
// answer) go first. Nothing is sealed when the parts are empty, after
// CloseNotify or after a fatal error. A TLS 1.3 AES-GCM Conn updates its
// write key (a KeyUpdate record of its own) every 2^24 records.
func (c *Conn) SealV(dst []byte, parts [][]byte) []byte {
	if c.Pending() {
		dst = c.AppendPending(dst)
	}
	if c.werr != nil || c.closeSent {
		return dst
	}
	total := 0
	for _, p := range parts {
		total += len(p)
	}
	if total == 0 {
		return dst
	}
	recs := (total + MaxPlaintext - 1) / MaxPlaintext
	dst = slices.Grow(dst, total+recs*c.write.overhead())
	pi, po := 0, 0
	for total > 0 {
		if c.rekeyAt != 0 && c.write.seq >= c.rekeyAt {
			dst = c.sealKeyUpdate(dst, false)
		}
		n := min(total, MaxPlaintext)
		total -= n
		start := len(dst)
		dst = c.write.begin(dst, typeApplicationData)
		for n > 0 {
			p := parts[pi][po:]
			m := min(len(p), n)
			dst = append(dst, p[:m]...)
			n -= m
			po += m
			if po == len(parts[pi]) {
				pi, po = pi+1, 0
			}
		}
		dst = c.write.seal(dst, start, typeApplicationData)
	}
	return dst
}

// CloseNotify appends a close_notify alert record (after anything
// pending); later Seal and SealV append nothing. It appends nothing after a
// fatal error or a first CloseNotify.
func (c *Conn) CloseNotify(dst []byte) []byte {
	if c.Pending() {
		dst = c.AppendPending(dst)
	}
	if c.werr != nil || c.closeSent {
		return dst
	}
	c.closeSent = true
	return c.sealAlert(dst, alertLevelWarning, alertCloseNotify)
}
