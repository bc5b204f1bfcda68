package jwtauth

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/x509"
	"encoding"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"hash"
	"math/big"
	"strings"
)

// consumerConf is a consumer's (or a credential's) configuration, with
// APISIX's defaults.
type consumerConf struct {
	Key                 string `json:"key"`
	Secret              string `json:"secret"`
	PublicKey           string `json:"public_key"`
	Algorithm           string `json:"algorithm"`
	Exp                 int64  `json:"exp"`
	Base64Secret        bool   `json:"base64_secret"`
	LifetimeGracePeriod int64  `json:"lifetime_grace_period"`
}

func decodeConsumer(raw json.RawMessage) (consumerConf, error) {
	c := consumerConf{Algorithm: "HS256", Exp: 86400}
	err := json.Unmarshal(raw, &c)
	return c, err
}

// isHS reports whether alg is an HMAC algorithm.
func isHS(alg string) bool { return strings.HasPrefix(alg, "HS") }

// decodeSecret is ngx.decode_base64 of a base64_secret: the standard
// alphabet, read up to a first '='. A secret that decodes to no bytes
// ("====", or '=' first) is refused: an empty HMAC key would let anyone
// sign the consumer's tokens.
func decodeSecret(s string) ([]byte, bool) {
	if i := strings.IndexByte(s, '='); i >= 0 {
		s = s[:i]
	}
	if len(s)%4 == 1 {
		return nil, false
	}
	b, err := base64.RawStdEncoding.DecodeString(s)
	return b, err == nil && len(b) > 0
}

// credential is what the request path needs of a consumer's jwt-auth:
// the algorithm its tokens must name and how to verify their signature
// (CredentialData). It is read only, shared by every event loop.
type credential struct {
	alg   string
	grace int64 // lifetime_grace_period, seconds

	// HMAC: the key padded and XORed with ipad and opad (RFC 2104), so
	// that an instance's own hash computes the MAC without allocating;
	// inner and outer are the hash's states once it has taken ipad and
	// opad (encoding.BinaryMarshaler's form), so that a MAC starts from
	// them, two blocks of the hash fewer a token, as crypto/hmac's Reset
	// does. nil where the hash cannot be so restored.
	hs           hashKind
	ipad, opad   []byte
	inner, outer []byte

	// The public key of the other algorithms; nil when public_key does
	// not parse as one of the algorithm's kind: no token verifies, as in
	// APISIX, where the key is read when a token is.
	pub crypto.PublicKey
}

// hashKind is an HMAC's hash.
type hashKind uint8

const (
	sha256Kind hashKind = iota
	sha384Kind
	sha512Kind
)

func (k hashKind) blockSize() int {
	if k == sha256Kind {
		return sha256.BlockSize
	}
	return sha512.BlockSize
}

func (k hashKind) new() hash.Hash {
	switch k {
	case sha384Kind:
		return sha512.New384()
	case sha512Kind:
		return sha512.New()
	}
	return sha256.New()
}

func hashOf(alg string) hashKind {
	switch alg[len(alg)-3:] {
	case "384":
		return sha384Kind
	case "512":
		return sha512Kind
	}
	return sha256Kind
}

// newCredential prepares a configuration that passed CheckConsumer.
func newCredential(c consumerConf) (*credential, error) {
	cr := &credential{alg: c.Algorithm, grace: c.LifetimeGracePeriod}
	if !isHS(c.Algorithm) {
		cr.pub = parsePublicKey(c.Algorithm, c.PublicKey)
		return cr, nil
	}
	key := []byte(c.Secret)
	if c.Base64Secret {
		var ok bool
		if key, ok = decodeSecret(c.Secret); !ok {
			return nil, errors.New("base64_secret required but the secret is not in base64 format")
		}
	}
	cr.hs = hashOf(c.Algorithm)
	bs := cr.hs.blockSize()
	if len(key) > bs {
		h := cr.hs.new()
		h.Write(key)
		key = h.Sum(nil)
	}
	cr.ipad, cr.opad = make([]byte, bs), make([]byte, bs)
	copy(cr.ipad, key)
	copy(cr.opad, key)
	for i := range bs {
		cr.ipad[i] ^= 0x36
		cr.opad[i] ^= 0x5c
	}
	cr.inner, cr.outer = padState(cr.hs, cr.ipad), padState(cr.hs, cr.opad)
	if cr.inner == nil || cr.outer == nil {
		cr.inner, cr.outer = nil, nil
	}
	return cr, nil
}

// padState is the state of a hash of kind k that has taken pad, or nil
// where the hash does not marshal its state.
func padState(k hashKind, pad []byte) []byte {
	h := k.new()
	h.Write(pad)
	m, ok := h.(encoding.BinaryMarshaler)
	if !ok {
		return nil
	}
	state, err := m.MarshalBinary()
	if err != nil {
		return nil
	}
	return state
}

// restart sets h to state (padState's), or to a hash that has taken pad
// where there is no state.
func restart(h hash.Hash, state, pad []byte) {
	if state != nil {
		if u, ok := h.(encoding.BinaryUnmarshaler); ok && u.UnmarshalBinary(state) == nil {
			return
		}
	}
	h.Reset()
	h.Write(pad)
}

// parsePublicKey reads a PEM public key as OpenSSL's pkey.new does (a
// SubjectPublicKeyInfo, a PKCS #1 RSA public key, a certificate, or a
// private key, whose public half is taken), and keeps it if it is of the
// algorithm's kind.
func parsePublicKey(alg, text string) crypto.PublicKey {
	var pub crypto.PublicKey
	for rest := []byte(text); pub == nil; {
		var b *pem.Block
		if b, rest = pem.Decode(rest); b == nil {
			return nil
		}
		switch b.Type {
		case "PUBLIC KEY":
			pub, _ = x509.ParsePKIXPublicKey(b.Bytes)
		case "RSA PUBLIC KEY":
			pub, _ = x509.ParsePKCS1PublicKey(b.Bytes)
		case "CERTIFICATE":
			if c, err := x509.ParseCertificate(b.Bytes); err == nil {
				pub = c.PublicKey
			}
		case "PRIVATE KEY", "RSA PRIVATE KEY", "EC PRIVATE KEY":
			var k any
			var err error
			switch b.Type {
			case "PRIVATE KEY":
				k, err = x509.ParsePKCS8PrivateKey(b.Bytes)
			case "RSA PRIVATE KEY":
				k, err = x509.ParsePKCS1PrivateKey(b.Bytes)
			default:
				k, err = x509.ParseECPrivateKey(b.Bytes)
			}
			if s, ok := k.(crypto.Signer); err == nil && ok {
				pub = s.Public()
			}
		}
	}
	switch pub.(type) {
	case *rsa.PublicKey:
		if alg[0] == 'R' || alg[0] == 'P' {
			return pub
		}
	case *ecdsa.PublicKey:
		if alg[0] == 'E' && alg != "EdDSA" {
			return pub
		}
	case ed25519.PublicKey:
		if alg == "EdDSA" {
			return pub
		}
	}
	return nil
}

// verifier is an instance's means of verifying signatures: a hash of each
// HMAC size and the buffers of the MACs, reused from request to request.
// It is used on one event loop.
type verifier struct {
	hs       [3]hash.Hash
	inner    []byte
	mac      []byte
	r, s     big.Int // an ECDSA signature's halves
	pssOpts  rsa.PSSOptions
	pssReady bool
}

// verify reports whether sig is cr's signature of signed.
func (v *verifier) verify(cr *credential, signed, sig []byte) bool {
	if cr.ipad != nil {
		h := v.hs[cr.hs]
		if h == nil {
			h = cr.hs.new()
			v.hs[cr.hs] = h
		}
		restart(h, cr.inner, cr.ipad)
		h.Write(signed)
		v.inner = h.Sum(v.inner[:0])
		restart(h, cr.outer, cr.opad)
		h.Write(v.inner)
		v.mac = h.Sum(v.mac[:0])
		return hmac.Equal(v.mac, sig)
	}
	if cr.pub == nil {
		return false
	}
	var sum [64]byte
	var digest []byte
	var ch crypto.Hash
	switch hashOf(cr.alg) {
	case sha384Kind:
		s := sha512.Sum384(signed)
		digest, ch = append(sum[:0], s[:]...), crypto.SHA384
	case sha512Kind:
		s := sha512.Sum512(signed)
		digest, ch = append(sum[:0], s[:]...), crypto.SHA512
	default:
		s := sha256.Sum256(signed)
		digest, ch = append(sum[:0], s[:]...), crypto.SHA256
	}
	switch cr.alg[0] {
	case 'R':
		return rsa.VerifyPKCS1v15(cr.pub.(*rsa.PublicKey), ch, digest, sig) == nil
	case 'P':
		if len(sig) != 256 {
			return false // APISIX's parser asserts this length
		}
		if !v.pssReady {
			v.pssOpts = rsa.PSSOptions{SaltLength: rsa.PSSSaltLengthAuto}
			v.pssReady = true
		}
		return rsa.VerifyPSS(cr.pub.(*rsa.PublicKey), ch, digest, sig, &v.pssOpts) == nil
	case 'E':
		if cr.alg == "EdDSA" {
			return ed25519.Verify(cr.pub.(ed25519.PublicKey), signed, sig)
		}
		n := 32 // the curve's size in bytes: P-256, P-384, P-521
		switch ch {
		case crypto.SHA384:
			n = 48
		case crypto.SHA512:
			n = 66
		}
		if len(sig) != 2*n {
			return false
		}
		v.r.SetBytes(sig[:n])
		v.s.SetBytes(sig[n:])
		return ecdsa.Verify(cr.pub.(*ecdsa.PublicKey), digest, &v.r, &v.s)
	}
	return false
}
