package basicauth

import (
	"bytes"
	"encoding/base64"
	"testing"
)

// FuzzExtract: any Authorization header is read without a panic; the
// username and password it gives hold no white space and are of the
// decoded credentials, and a header made of "Basic " and the encoding of
// "user:pass" gives them back.
func FuzzExtract(f *testing.F) {
	for _, s := range []string{"Basic Zm9vOmJhcg==", "basic Zm9vOmJhcg", "xbasic Zm9vOmJhcg==", "Basic ", "Basic  Zm9v",
		"Basic Og==", "Basic Zm9vOg==", "Basic Zm9vOmJhcjpiYXo=", "BASIC\tZm9vOmJhcg==x", "Basic A", "Basic ====", "Bearer x"} {
		f.Add([]byte(s), []byte("u"), []byte("p"))
	}
	f.Fuzz(func(t *testing.T, auth, u, p []byte) {
		var in instance
		if user, pass, ok := in.extract(auth); ok {
			for _, b := range [][]byte{user, pass} {
				if bytes.ContainsAny(b, " \t\n\v\f\r") {
					t.Fatalf("%q: %q %q", auth, user, pass)
				}
			}
		}
		if bytes.ContainsAny(u, ": \t\n\v\f\r") || bytes.ContainsAny(p, ": \t\n\v\f\r") || len(p) == 0 {
			return
		}
		h := "Basic " + base64.StdEncoding.EncodeToString(append(append(append([]byte(nil), u...), ':'), p...))
		user, pass, ok := in.extract([]byte(h))
		if !ok || !bytes.Equal(user, u) || !bytes.Equal(pass, p) {
			t.Fatalf("%q: %q %q %v, want %q %q", h, user, pass, ok, u, p)
		}
	})
}
