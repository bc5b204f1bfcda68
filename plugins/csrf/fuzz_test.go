package csrf

import (
	"bytes"
	"encoding/base64"
	"testing"
)

// FuzzToken: any cookie is checked without a panic, and none verifies
// unless its sign is the key's signature of its random and expires.
func FuzzToken(f *testing.F) {
	for _, s := range []string{
		`{"random":0.5,"expires":1700000000,"sign":"x"}`, `{}`, `{"random":"a","expires":"1e400","sign":""}`,
		`{"expires":-1e-400}`, `{"random":1,"random":"2"}`, `{"sign":"\u0041"}`, `[`, `{"a":`, `{"a":1,}`,
	} {
		f.Add([]byte(base64.StdEncoding.EncodeToString([]byte(s))))
		f.Add([]byte(s))
	}
	in := &instance{key: []byte("secret-key"), expires: 7200}
	f.Fuzz(func(t *testing.T, cookie []byte) {
		var tk token
		parseToken(cookie, &tk)
		if !in.verify(cookie, 1700000000) {
			return
		}
		want := in.appendSign(nil, in.tk.random, in.tk.expires)
		if !bytes.Equal(in.tk.sign, want) {
			t.Fatalf("%q verified with sign %q, want %q", cookie, in.tk.sign, want)
		}
	})
}
