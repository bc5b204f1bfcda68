package keyring

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// The ciphertexts below were computed with OpenSSL, not with this package:
//
//	k=$(printf qeddd145sfvddff3 | xxd -p -c 64)
//	printf 'user-key' | openssl enc -aes-128-cbc -K $k -iv $k -base64 -A
//
// the key as AES key and as IV, APISIX's rule (data_encryption.lua); for a
// 32-byte key the IV is its first 16 bytes (resty.aes copies the 32 bytes
// into an IV buffer of which AES-CBC reads 16).
var vectors = []struct {
	key, plain, cipher string
}{
	{"qeddd145sfvddff3", "user-key", "XU29sA3FEVF68hGcdPo7sg=="},
	{"edd1c9f0985e76a2", "user-key", "gFmh9DIBEeNbj4knTl3xkw=="},
	// A whole block of plaintext takes a whole block of padding.
	{"qeddd145sfvddff3", "abcdefghijklmnop", "RZTcjWJlBbLTloVRGYyMCwtBPiZyAmRRF3TXoveswzI="},
	{"qeddd145sfvddff3qeddd145sfvddff3", "hello world", "ls4DOizUshA64GOrnhVRQw=="},
}

// TestVectors: Encrypt writes what OpenSSL writes with APISIX's key and IV
// rule, and Decrypt reads it.
func TestVectors(t *testing.T) {
	for _, v := range vectors {
		k, err := Parse([]string{v.key})
		if err != nil {
			t.Fatal(err)
		}
		if got := k.Encrypt(v.plain); got != v.cipher {
			t.Errorf("Encrypt(%q) with %s = %q, want %q", v.plain, v.key, got, v.cipher)
		}
		if got, err := k.Decrypt(v.cipher); err != nil || got != v.plain {
			t.Errorf("Decrypt(%q) with %s = %q, %v; want %q", v.cipher, v.key, got, err, v.plain)
		}
	}
}

// TestOpenSSLDecrypts: what Encrypt writes, OpenSSL decrypts with APISIX's
// rule, for a value longer than a block (a private key).
func TestOpenSSLDecrypts(t *testing.T) {
	if _, err := exec.LookPath("openssl"); err != nil {
		t.Skip("no openssl")
	}
	const pem = "-----BEGIN PRIVATE KEY-----\nMC4CAQAwBQYDK2VwBCIEIJ+DYvh6SEqVTm50DFtMDoQikTmiCqirVv9mWG9qfSnF\n-----END PRIVATE KEY-----\n"
	for _, key := range []string{"qeddd145sfvddff3", "qeddd145sfvddff3qeddd145sfvddff3"} {
		k, err := Parse([]string{key})
		if err != nil {
			t.Fatal(err)
		}
		ct := k.EncryptPrivateKey(pem)
		hexKey := func(s string) string { return hex.EncodeToString([]byte(s)) }
		algo := "-aes-128-cbc"
		if len(key) == 32 {
			algo = "-aes-256-cbc"
		}
		cmd := exec.Command("openssl", "enc", "-d", algo, "-K", hexKey(key), "-iv", hexKey(key[:16]), "-base64", "-A")
		cmd.Stdin = strings.NewReader(ct)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("openssl: %v", err)
		}
		if string(out) != pem {
			t.Errorf("openssl decrypted %q, want %q", out, pem)
		}
	}
}

// TestDefault: APISIX's default keyring reads what APISIX writes with it
// (its first key), and writes with its first key.
func TestDefault(t *testing.T) {
	k, err := Parse(Default)
	if err != nil {
		t.Fatal(err)
	}
	if got := k.Encrypt("user-key"); got != "XU29sA3FEVF68hGcdPo7sg==" {
		t.Errorf("Encrypt = %q", got)
	}
	for _, ct := range []string{"XU29sA3FEVF68hGcdPo7sg==", "gFmh9DIBEeNbj4knTl3xkw=="} {
		if got, err := k.Decrypt(ct); err != nil || got != "user-key" {
			t.Errorf("Decrypt(%q) = %q, %v", ct, got, err)
		}
	}
}

// TestRotation: a keyring with a new key first and the old one second
// reads what the old keyring wrote, and writes with the new key, which
// the old keyring cannot read.
func TestRotation(t *testing.T) {
	old, err := Parse([]string{"qeddd145sfvddff3"})
	if err != nil {
		t.Fatal(err)
	}
	rotated, err := Parse([]string{"0123456789abcdef0123456789abcdef", "qeddd145sfvddff3"})
	if err != nil {
		t.Fatal(err)
	}
	before := old.Encrypt("secret")
	if got, err := rotated.Decrypt(before); err != nil || got != "secret" {
		t.Fatalf("rotated.Decrypt(old value) = %q, %v", got, err)
	}
	after := rotated.Encrypt("secret")
	if after == before {
		t.Fatal("the rotated keyring still encrypts with the old key")
	}
	if got, err := rotated.Decrypt(after); err != nil || got != "secret" {
		t.Fatalf("rotated.Decrypt(new value) = %q, %v", got, err)
	}
	if _, err := old.Decrypt(after); !errors.Is(err, ErrDecrypt) {
		t.Fatalf("old.Decrypt(new value): %v, want ErrDecrypt", err)
	}
}

func TestParseRefuses(t *testing.T) {
	for _, keys := range [][]string{nil, {}, {"short"}, {"qeddd145sfvddff3", "0123456789abcdef0123"}, {"qeddd145sfvddff3x"}} {
		if k, err := Parse(keys); !errors.Is(err, ErrKey) || k != nil {
			t.Errorf("Parse(%q) = %v, %v; want ErrKey", keys, k, err)
		}
	}
	_, err := Parse([]string{"qeddd145sfvddff3", "short"})
	if err == nil || err.Error() != "keyring: invalid key: key [1] is 5 bytes long, want 16 (AES-128) or 32 (AES-256)" {
		t.Errorf("error: %v", err)
	}
}

// TestDecryptRefuses: what is not base64, not whole blocks or not padded
// as written is an error, never a value.
func TestDecryptRefuses(t *testing.T) {
	k, _ := Parse(Default)
	for _, s := range []string{"", "user-key", "not base64!", "AAAA", "XU29sA3FEVF68hGcdPo8sg==", "XU29sA3FEVF68hGcdPo7sg==XU29"} {
		if got, err := k.Decrypt(s); !errors.Is(err, ErrDecrypt) {
			t.Errorf("Decrypt(%q) = %q, %v; want ErrDecrypt", s, got, err)
		}
	}
	// Without its padding, as nginx's decoder takes it.
	if got, err := k.Decrypt("XU29sA3FEVF68hGcdPo7sg"); err != nil || got != "user-key" {
		t.Errorf("Decrypt without padding = %q, %v", got, err)
	}
}

// TestNil: no keyring (keyring: null) keeps values as they are.
func TestNil(t *testing.T) {
	var k *Keyring
	if k.Encrypt("user-key") != "user-key" || k.Len() != 0 {
		t.Error("nil Encrypt changed the value")
	}
	if got, err := k.Decrypt("XU29sA3FEVF68hGcdPo7sg=="); err != nil || got != "XU29sA3FEVF68hGcdPo7sg==" {
		t.Errorf("nil Decrypt = %q, %v", got, err)
	}
	if b, _ := json.Marshal(k); string(b) != "null" {
		t.Errorf("nil MarshalJSON = %s", b)
	}
}

// TestPrivateKey: a PEM key is encrypted and decrypted, a value already
// encrypted is stored as it is, and one that does not decrypt names its
// field.
func TestPrivateKey(t *testing.T) {
	k, _ := Parse(Default)
	const pem = "-----BEGIN PRIVATE KEY-----\nabc\n-----END PRIVATE KEY-----\n"
	ct := k.EncryptPrivateKey(pem)
	if strings.HasPrefix(ct, "---") || ct == pem {
		t.Fatalf("EncryptPrivateKey kept the key in clear: %q", ct)
	}
	if again := k.EncryptPrivateKey(ct); again != ct {
		t.Errorf("EncryptPrivateKey encrypted an encrypted key again: %q", again)
	}
	if got, err := k.DecryptPrivateKey("key", ct); err != nil || got != pem {
		t.Errorf("DecryptPrivateKey = %q, %v", got, err)
	}
	if got, err := k.DecryptPrivateKey("key", pem); err != nil || got != pem {
		t.Errorf("DecryptPrivateKey(pem) = %q, %v", got, err)
	}
	other, _ := Parse([]string{"0123456789abcdef"})
	_, err := other.DecryptPrivateKey("keys[1]", ct)
	if !errors.Is(err, ErrDecrypt) || !strings.Contains(err.Error(), "decrypt ssl keys[1] failed") {
		t.Errorf("DecryptPrivateKey with another keyring: %v", err)
	}
}

// TestWrongKeyPadded: a key that is not the value's, whose plaintext
// happens to end in valid padding (about one value in 256), is passed
// over for the next key: a keyring rotated in front of the key a value
// was stored with still reads the value, and a value of another keyring
// does not decrypt. Decrypt asks the plaintext to be UTF-8 (a plugin's
// secret field), DecryptPrivateKey to be PEM. The values are searched
// for until a wrong key's plaintext is padded (decrypt with no other
// check), so that the case is the one checked; the keys' IVs are fixed,
// so the search finds the same values every run.
func TestWrongKeyPadded(t *testing.T) {
	old, _ := Parse([]string{"qeddd145sfvddff3"})
	rotated, _ := Parse([]string{"0123456789abcdef0123456789abcdef", "qeddd145sfvddff3"})
	other, _ := Parse([]string{"0123456789abcdef"})
	field := func(i int) string { return "user-key-" + strconv.Itoa(i) }
	pem := func(i int) string {
		return "-----BEGIN PRIVATE KEY-----\n" + strconv.Itoa(i) + "\n-----END PRIVATE KEY-----\n"
	}
	decrypt := func(k *Keyring, s string) (string, error) { return k.Decrypt(s) }
	decryptPEM := func(k *Keyring, s string) (string, error) { return k.DecryptPrivateKey("key", s) }
	for _, tc := range []struct {
		name       string
		by, reader *Keyring
		value      func(int) string
		decrypt    func(*Keyring, string) (string, error)
		wantErr    bool
	}{
		{"a field, rotated keyring, the old key second", old, rotated, field, decrypt, false},
		{"a field, another keyring's value", other, old, field, decrypt, true},
		{"a private key, rotated keyring, the old key second", old, rotated, pem, decryptPEM, false},
		{"a private key, another keyring's value", other, old, pem, decryptPEM, true},
	} {
		found := 0
		for i := 0; i < 1<<16 && found < 4; i++ {
			p := tc.value(i)
			c := tc.by.Encrypt(p)
			if got, err := tc.reader.decrypt(c, nil); err != nil || got == p {
				continue
			}
			found++
			got, err := tc.decrypt(tc.reader, c)
			switch {
			case tc.wantErr && !errors.Is(err, ErrDecrypt):
				t.Errorf("%s: %q decrypts to %q, %v; want ErrDecrypt", tc.name, p, got, err)
			case !tc.wantErr && (err != nil || got != p):
				t.Errorf("%s: %q decrypts to %q, %v", tc.name, p, got, err)
			}
		}
		if found < 4 {
			t.Fatalf("%s: %d values whose wrong key gives valid padding in 65536, want 4", tc.name, found)
		}
	}
}

// TestMarshalJSON: the digest changes with the keys and never shows them.
func TestMarshalJSON(t *testing.T) {
	a, _ := Parse(Default)
	b, _ := Parse([]string{Default[1], Default[0]})
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	if string(ja) == string(jb) {
		t.Error("two keyrings, one digest")
	}
	a2, _ := Parse(Default)
	var none *Keyring
	if !a.Equal(a2) || a.Equal(b) || a.Equal(none) || !none.Equal(nil) {
		t.Error("Equal")
	}
	for _, key := range Default {
		if strings.Contains(string(ja), key) {
			t.Errorf("MarshalJSON shows a key: %s", ja)
		}
	}
}
