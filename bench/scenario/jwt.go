package scenario

import (
	"crypto"
	"crypto/hmac"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"time"
)

// Algorithms of the jwt-auth scenarios' tokens.
const (
	HS256 = "HS256" // HMAC-SHA256 with a 32-byte secret
	RS256 = "RS256" // RSASSA-PKCS1-v1_5 with SHA-256 and a 2048-bit key
)

// jwtKey is the key claim of the jwt-auth scenarios' token, the key of
// their one consumer.
const jwtKey = "user-key1"

// JWT is a jwt-auth scenario's consumer credential and token. Alg is set
// by the scenario; the key material and the token are made by WithJWTKey
// for each run (none is committed), and the harness calls it before it
// starts either gateway, so that both get the same request.
type JWT struct {
	Alg          string // HS256 or RS256
	Secret       string // HS256: the consumer's secret
	PublicKeyPEM string // RS256: the consumer's public_key, PKIX
	Token        string // signed by the consumer's key, for key jwtKey
}

// WithJWTKey returns s with a new key of s.JWT's algorithm, a token it
// signed (key claim "user-key1", exp a week from now, so that the
// gateway checks it as APISIX's tokens are checked), and the load's
// Authorization: Bearer header carrying it. A scenario without JWT is
// returned as it is. s.JWT is copied, as WithTLSPort copies s.TLS.
func (s Scenario) WithJWTKey() (Scenario, error) {
	if s.JWT == nil {
		return s, nil
	}
	j := JWT{Alg: s.JWT.Alg}
	header := base64.RawURLEncoding.EncodeToString(fmt.Appendf(nil, `{"alg":%q,"typ":"JWT"}`, j.Alg))
	payload := base64.RawURLEncoding.EncodeToString(fmt.Appendf(nil, `{"key":%q,"exp":%d}`, jwtKey,
		time.Now().Add(7*24*time.Hour).Unix()))
	signed := header + "." + payload
	var sig []byte
	switch j.Alg {
	case HS256:
		secret := make([]byte, 32)
		if _, err := rand.Read(secret); err != nil {
			return s, err
		}
		j.Secret = hex.EncodeToString(secret)
		mac := hmac.New(sha256.New, []byte(j.Secret))
		mac.Write([]byte(signed))
		sig = mac.Sum(nil)
	case RS256:
		key, err := rsa.GenerateKey(rand.Reader, 2048)
		if err != nil {
			return s, err
		}
		der, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
		if err != nil {
			return s, err
		}
		j.PublicKeyPEM = string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}))
		digest := sha256.Sum256([]byte(signed))
		if sig, err = rsa.SignPKCS1v15(rand.Reader, key, crypto.SHA256, digest[:]); err != nil {
			return s, err
		}
	default:
		return s, errors.New("scenario: jwt-auth algorithm " + j.Alg + " is not one of HS256, RS256")
	}
	j.Token = signed + "." + base64.RawURLEncoding.EncodeToString(sig)
	s.JWT = &j
	s.Load.Header = "Authorization: Bearer " + j.Token + "\r\n"
	return s, nil
}
