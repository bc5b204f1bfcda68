package tlsrec

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"hash"

	"golang.org/x/crypto/chacha20poly1305"
)

// suite is what the record layer needs of a cipher suite.
type suite struct {
	keyLen int
	// ivLen: the TLS 1.2 fixed IV (GCM's 4-byte salt) or the 12-byte IV
	// of TLS 1.3 and ChaCha20-Poly1305.
	ivLen int
	// explicit: TLS 1.2 GCM's 8-byte explicit nonce in each record.
	explicit bool
	chacha   bool
	hash     func() hash.Hash
}

// suiteFor returns the suite's parameters, or false when it is not one the
// record layer implements.
func suiteFor(version, id uint16) (suite, bool) {
	switch version {
	case tls.VersionTLS13:
		switch id {
		case tls.TLS_AES_128_GCM_SHA256:
			return suite{keyLen: 16, ivLen: 12, hash: sha256.New}, true
		case tls.TLS_AES_256_GCM_SHA384:
			return suite{keyLen: 32, ivLen: 12, hash: sha512.New384}, true
		case tls.TLS_CHACHA20_POLY1305_SHA256:
			return suite{keyLen: 32, ivLen: 12, chacha: true, hash: sha256.New}, true
		}
	case tls.VersionTLS12:
		switch id {
		case tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256, tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256:
			return suite{keyLen: 16, ivLen: 4, explicit: true, hash: sha256.New}, true
		case tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384, tls.TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384:
			return suite{keyLen: 32, ivLen: 4, explicit: true, hash: sha512.New384}, true
		case tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256, tls.TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256:
			return suite{keyLen: 32, ivLen: 12, chacha: true, hash: sha256.New}, true
		}
	}
	return suite{}, false
}

func (s suite) aead(key []byte) (cipher.AEAD, error) {
	if s.chacha {
		return chacha20poly1305.New(key)
	}
	b, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(b)
}

// expandLabel is TLS 1.3's HKDF-Expand-Label with an empty context (RFC
// 8446 §7.1).
func expandLabel(h func() hash.Hash, secret []byte, label string, length int) ([]byte, error) {
	info := make([]byte, 0, 4+6+len(label))
	info = binary.BigEndian.AppendUint16(info, uint16(length))
	info = append(info, byte(6+len(label)))
	info = append(info, "tls13 "...)
	info = append(info, label...)
	info = append(info, 0)
	return hkdf.Expand(h, secret, string(info), length)
}

// prf12 is TLS 1.2's PRF, P_hash(secret, label + seed) (RFC 5246 §5).
func prf12(h func() hash.Hash, secret []byte, label string, seed []byte, length int) []byte {
	ls := append([]byte(label), seed...)
	mac := hmac.New(h, secret)
	mac.Write(ls)
	a := mac.Sum(nil)
	out := make([]byte, 0, length+mac.Size())
	for len(out) < length {
		mac.Reset()
		mac.Write(a)
		mac.Write(ls)
		out = mac.Sum(out)
		mac.Reset()
		mac.Write(a)
		a = mac.Sum(a[:0])
	}
	return out[:length]
}

// halfConn protects the records of one direction.
type halfConn struct {
	aead cipher.AEAD
	iv   [12]byte
	// secret is the TLS 1.3 traffic secret, for KeyUpdate.
	secret []byte
	seq    uint64
	s      suite
	tls13  bool
	nonce  [12]byte
	aad    [13]byte
}

// setKey13 installs the keys derived from a TLS 1.3 traffic secret and
// resets the sequence number.
func (h *halfConn) setKey13(s suite, secret []byte) error {
	key, err := expandLabel(s.hash, secret, "key", s.keyLen)
	if err != nil {
		return err
	}
	iv, err := expandLabel(s.hash, secret, "iv", 12)
	if err != nil {
		return err
	}
	a, err := s.aead(key)
	if err != nil {
		return err
	}
	*h = halfConn{aead: a, secret: secret, s: s, tls13: true}
	copy(h.iv[:], iv)
	return nil
}

// update moves to the next TLS 1.3 traffic secret (RFC 8446 §7.2).
func (h *halfConn) update() error {
	next, err := expandLabel(h.s.hash, h.secret, "traffic upd", h.s.hash().Size())
	if err != nil {
		return err
	}
	return h.setKey13(h.s, next)
}

func (h *halfConn) setKey12(s suite, key, iv []byte) error {
	a, err := s.aead(key)
	if err != nil {
		return err
	}
	*h = halfConn{aead: a, s: s}
	copy(h.iv[:], iv)
	return nil
}

// overhead is how many bytes protection adds to a record's content,
// header included (for TLS 1.3: and the content type byte).
func (h *halfConn) overhead() int {
	n := headerLen + 16
	if h.tls13 {
		n++
	}
	if h.s.explicit {
		n += 8
	}
	return n
}

// setNonce fills h.nonce for the current sequence number.
func (h *halfConn) setNonce() {
	if h.s.explicit {
		copy(h.nonce[:4], h.iv[:4])
		binary.BigEndian.PutUint64(h.nonce[4:], h.seq)
		return
	}
	h.nonce = h.iv
	for i := 0; i < 8; i++ {
		h.nonce[4+i] ^= byte(h.seq >> (56 - 8*i))
	}
}

// setAAD12 fills h.aad, TLS 1.2's additional data (RFC 5246 §6.2.3.3).
func (h *halfConn) setAAD12(typ byte, n int) {
	binary.BigEndian.PutUint64(h.aad[:8], h.seq)
	h.aad[8] = typ
	h.aad[9], h.aad[10] = 3, 3
	h.aad[11], h.aad[12] = byte(n>>8), byte(n)
}

// begin appends the start of a record of type typ to dst: its header (the
// length is filled in by seal) and, for TLS 1.2 GCM, the explicit nonce.
// The content goes after it; seal protects it in place.
func (h *halfConn) begin(dst []byte, typ byte) []byte {
	if h.tls13 {
		typ = typeApplicationData
	}
	dst = append(dst, typ, 3, 3, 0, 0)
	if h.s.explicit {
		dst = binary.BigEndian.AppendUint64(dst, h.seq)
	}
	return dst
}

// seal protects the record begun at dst[start:] by begin, its content
// being the rest of dst, and returns dst with the record complete.
// Nothing is allocated when dst has room for h.overhead() more bytes
// than begin took.
func (h *halfConn) seal(dst []byte, start int, typ byte) []byte {
	body := start + headerLen
	if h.s.explicit {
		body += 8
	}
	h.setNonce()
	var aad []byte
	if h.tls13 {
		dst = append(dst, typ)
		n := len(dst) - body + 16
		dst[start+3], dst[start+4] = byte(n>>8), byte(n)
		aad = dst[start : start+headerLen]
	} else {
		h.setAAD12(typ, len(dst)-body)
		n := len(dst) - start - headerLen + 16
		dst[start+3], dst[start+4] = byte(n>>8), byte(n)
		aad = h.aad[:]
	}
	h.seq++
	return h.aead.Seal(dst[:body], h.nonce[:], dst[body:], aad)
}

var (
	errBadRecordMAC   = errors.New("tlsrec: record authentication failed (bad record MAC)")
	errRecordOverflow = errors.New("tlsrec: record too long")
	errNoContentType  = errors.New("tlsrec: TLS 1.3 record without a content type")
	errRecordVersion  = errors.New("tlsrec: record version is not TLS 1.2")
	errOuterType      = errors.New("tlsrec: TLS 1.3 record of a type other than application_data")
)

// open authenticates and decrypts rec, one whole record, appending its
// content to dst. It returns the content type, dst with the content, and
// for an error the alert to send. The sequence number moves on success only.
func (h *halfConn) open(dst, rec []byte) (typ byte, out []byte, alert byte, err error) {
	body := rec[headerLen:]
	typ = rec[0]
	var aad []byte
	if h.tls13 {
		if typ != typeApplicationData {
			return 0, dst, alertUnexpectedMessage, errOuterType
		}
		if len(body) < 17 {
			return 0, dst, alertBadRecordMAC, errBadRecordMAC
		}
		aad = rec[:headerLen]
	} else {
		if rec[1] != 3 || rec[2] != 3 {
			return 0, dst, alertProtocolVersion, errRecordVersion
		}
		min := 16
		if h.s.explicit {
			min += 8
		}
		if len(body) < min {
			return 0, dst, alertBadRecordMAC, errBadRecordMAC
		}
		if len(body)-min > MaxPlaintext {
			return 0, dst, alertRecordOverflow, errRecordOverflow
		}
		h.setAAD12(typ, len(body)-min)
		aad = h.aad[:]
	}
	h.setNonce()
	if h.s.explicit {
		copy(h.nonce[4:], body[:8])
		body = body[8:]
	}
	start := len(dst)
	out, err = h.aead.Open(dst, h.nonce[:], body, aad)
	if err != nil {
		return 0, dst, alertBadRecordMAC, errBadRecordMAC
	}
	if h.tls13 {
		i := len(out) - 1
		for i >= start && out[i] == 0 {
			i--
		}
		if i < start {
			return 0, dst, alertUnexpectedMessage, errNoContentType
		}
		typ = out[i]
		out = out[:i]
		if i-start > MaxPlaintext {
			return 0, dst, alertRecordOverflow, errRecordOverflow
		}
	}
	h.seq++
	return typ, out, 0, nil
}
