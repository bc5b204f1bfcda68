// Package keyring is apisix.data_encryption's keyring: the AES keys with
// which APISIX keeps SSL private keys and plugins' secret fields
// (encrypt_fields) encrypted at rest, byte for byte as APISIX does
// (apisix/core/data_encryption.lua), so that an etcd written by APISIX is
// read by coregate and the reverse.
//
// Each key is a string of 16 bytes (AES-128-CBC) or 32 bytes
// (AES-256-CBC), used both as the AES key and, its first 16 bytes, as the
// IV. A value is encrypted with the first key, PKCS#7-padded, and written
// as standard base64; it is decrypted with each key in turn, the first
// whose padding checks giving the value. To rotate, write the new key
// first and keep the old ones after it: values written before still
// decrypt, new ones are written with the new key.
//
// Like package spec it imports only the standard library: the config
// model (package nodeconf), the Admin API, the plugin registry and the
// worker all use it. A Keyring is immutable and safe for concurrent use.
package keyring

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// Default is APISIX's keyring (apisix/cli/config.lua), which applies when
// config.yaml writes no apisix.data_encryption.keyring.
var Default = []string{"qeddd145sfvddff3", "edd1c9f0985e76a2"}

// Sentinel errors.
var (
	// ErrKey: a keyring entry is not 16 or 32 bytes long, or the keyring
	// is empty.
	ErrKey = errors.New("keyring: invalid key")
	// ErrDecrypt: a value is not base64, or no key of the keyring
	// decrypts it.
	ErrDecrypt = errors.New("keyring: decrypt failed")
)

// Keyring is a parsed keyring: the first key encrypts, every key
// decrypts. The nil *Keyring is "no keyring", APISIX's keyring: null:
// Encrypt and Decrypt return their value unchanged.
type Keyring struct {
	keys []cipher.Block
	ivs  [][aes.BlockSize]byte
	// sum identifies the keys without showing them (MarshalJSON).
	sum [32]byte
}

// Parse parses a keyring, the first key being the one that encrypts. Each
// key must be 16 or 32 bytes long (APISIX's constraint); an empty keyring
// is refused (the caller means "none": a nil *Keyring).
func Parse(keys []string) (*Keyring, error) {
	if len(keys) == 0 {
		return nil, fmt.Errorf("%w: the keyring is empty", ErrKey)
	}
	k := &Keyring{keys: make([]cipher.Block, len(keys)), ivs: make([][aes.BlockSize]byte, len(keys))}
	h := sha256.New()
	for i, s := range keys {
		if len(s) != 16 && len(s) != 32 {
			return nil, fmt.Errorf("%w: key [%d] is %d bytes long, want 16 (AES-128) or 32 (AES-256)", ErrKey, i, len(s))
		}
		b, err := aes.NewCipher([]byte(s))
		if err != nil {
			return nil, fmt.Errorf("%w: key [%d]: %v", ErrKey, i, err)
		}
		k.keys[i] = b
		copy(k.ivs[i][:], s)
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	h.Sum(k.sum[:0])
	return k, nil
}

// Len is the number of keys; 0 for the nil keyring.
func (k *Keyring) Len() int {
	if k == nil {
		return 0
	}
	return len(k.keys)
}

// Encrypt encrypts s with the first key and answers it in base64, as
// APISIX stores it. The nil keyring answers s.
func (k *Keyring) Encrypt(s string) string {
	if k == nil {
		return s
	}
	n := aes.BlockSize - len(s)%aes.BlockSize
	buf := make([]byte, len(s)+n)
	copy(buf, s)
	for i := len(s); i < len(buf); i++ {
		buf[i] = byte(n)
	}
	cipher.NewCBCEncrypter(k.keys[0], k.ivs[0][:]).CryptBlocks(buf, buf)
	return base64.StdEncoding.EncodeToString(buf)
}

// Decrypt decrypts s, written by Encrypt (or by APISIX), trying each key
// in order; ErrDecrypt when s is not base64 or no key decrypts it. The nil
// keyring answers s.
//
// A key decrypts s when the plaintext it gives ends in valid padding and
// is UTF-8, as every value the Admin API encrypts is (a JSON string). A
// wrong key's plaintext ends in valid padding about once in 256 values;
// its bytes are then random, which are UTF-8 too once in thousands for a
// plaintext of a block: such a key is passed over for the next one, so
// that a keyring rotated in front of the key a value was stored with
// still reads the value, and a value stored in clear that looks encrypted
// is left as it is. DecryptPrivateKey asks more of the plaintext: PEM.
func (k *Keyring) Decrypt(s string) (string, error) {
	return k.decrypt(s, utf8.Valid)
}

// decrypt is Decrypt taking the first key whose plaintext is padded and,
// when valid is not nil, valid accepts.
func (k *Keyring) decrypt(s string, valid func([]byte) bool) (string, error) {
	if k == nil {
		return s, nil
	}
	ct, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		// nginx's decoder takes base64 without its padding too.
		if ct, err = base64.RawStdEncoding.DecodeString(strings.TrimRight(s, "=")); err != nil {
			return "", fmt.Errorf("%w: not base64", ErrDecrypt)
		}
	}
	if len(ct) == 0 || len(ct)%aes.BlockSize != 0 {
		return "", ErrDecrypt
	}
	buf := make([]byte, len(ct))
	for i, b := range k.keys {
		cipher.NewCBCDecrypter(b, k.ivs[i][:]).CryptBlocks(buf, ct)
		if p, ok := unpad(buf); ok && (valid == nil || valid(p)) {
			return string(p), nil
		}
	}
	return "", ErrDecrypt
}

// unpad removes PKCS#7 padding, as OpenSSL checks it.
func unpad(b []byte) ([]byte, bool) {
	n := int(b[len(b)-1])
	if n == 0 || n > aes.BlockSize || n > len(b) {
		return nil, false
	}
	if !bytes.Equal(b[len(b)-n:], bytes.Repeat([]byte{byte(n)}, n)) {
		return nil, false
	}
	return b[:len(b)-n], true
}

// pemPrefix starts a PEM block: a private key that starts with it is in
// clear, any other is encrypted (APISIX's aes_encrypt_pkey test).
const pemPrefix = "---"

// isPEM reports whether p, a plaintext, starts as PEM does.
func isPEM(p []byte) bool { return bytes.HasPrefix(p, []byte(pemPrefix)) }

// EncryptPrivateKey encrypts an SSL object's private key (key, keys[i])
// for storing it, as APISIX's aes_encrypt_pkey: a key in PEM is
// encrypted, any other value (already encrypted) is answered as it is.
func (k *Keyring) EncryptPrivateKey(s string) string {
	if !strings.HasPrefix(s, pemPrefix) {
		return s
	}
	return k.Encrypt(s)
}

// DecryptPrivateKey gives an SSL object's private key in PEM, as APISIX's
// aes_decrypt_pkey: a key in PEM is answered as it is, any other value is
// decrypted. field names it in the error ("key", "keys[1]"). Its
// signature is the decrypt function the TLS configuration is built with.
//
// A key of the keyring decrypts the value only when its plaintext is PEM:
// a wrong key whose garbage happens to end in valid padding (Decrypt) is
// passed over, where APISIX takes it, so that a keyring rotated in front
// of the key a value was stored with still reads the value, and a value
// of another keyring is refused as not decrypting.
func (k *Keyring) DecryptPrivateKey(field, s string) (string, error) {
	if strings.HasPrefix(s, pemPrefix) {
		return s, nil
	}
	p, err := k.decrypt(s, isPEM)
	if err != nil {
		return "", fmt.Errorf("keyring: decrypt ssl %s failed: %w", field, err)
	}
	return p, nil
}

// Equal reports whether k and o hold the same keys in the same order
// (go-cmp compares keyrings with it).
func (k *Keyring) Equal(o *Keyring) bool {
	if k == nil || o == nil {
		return k == o
	}
	return k.sum == o.sum
}

// MarshalJSON answers a digest of the keys, never the keys: a config
// fingerprint that includes a Keyring changes when its keys do.
func (k *Keyring) MarshalJSON() ([]byte, error) {
	if k == nil {
		return []byte("null"), nil
	}
	return json.Marshal("sha256:" + hex.EncodeToString(k.sum[:]))
}
