package jwtauth

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"coregate/plugins"
	"coregate/plugins/plugintest"
)

// FuzzParse: any token is read without a panic; one that parses signs
// exactly its first two parts, and its claims are of the kinds the parser
// says.
func FuzzParse(f *testing.F) {
	enc := base64.RawURLEncoding.EncodeToString
	for _, s := range []string{
		enc([]byte(`{"alg":"HS256","typ":"JWT"}`)) + "." + enc([]byte(`{"key":"user-key","exp":1879318541}`)) + "." + enc([]byte("sig")),
		enc([]byte(`{"alg":"none"}`)) + "." + enc([]byte(`{"key":"k"}`)) + ".",
		enc([]byte(`{"alg":"HS256","alg":null}`)) + "." + enc([]byte(`{"key":"a","key":1,"exp":1e400,"nbf":-0}`)) + ".AA",
		enc([]byte(`{"\u0061lg":"\ud83d\ude00"}`)) + "." + enc([]byte(`{"k\u0065y":"\"\\/"}`)) + ".",
		"a.b.c", "..", "...", "e30=.e30=.", "e30.e30.=", enc([]byte(strings.Repeat("[", 1100))) + ".e30.",
	} {
		f.Add([]byte(s), "key")
	}
	f.Add([]byte(enc([]byte(`{"alg":"HS256"}`))+"."+enc([]byte(`{"exp":"x"}`))+"."), "exp")
	f.Fuzz(func(t *testing.T, tok []byte, keyClaim string) {
		var s scratch
		var tk token
		if !s.parse(tok, keyClaim, &tk) {
			return
		}
		if !bytes.HasPrefix(tok, tk.signed) || len(tk.signed) >= len(tok) || tok[len(tk.signed)] != '.' ||
			bytes.Count(tk.signed, []byte(".")) != 1 {
			t.Fatalf("%q: signed %q", tok, tk.signed)
		}
		if tk.keyState == isNumber || tk.keyState != isString && tk.keyState != absent && tk.keyState != isOther {
			t.Fatalf("%q: key %q state %d", tok, tk.key, tk.keyState)
		}
		if tk.alg != nil && !tk.hasAlg {
			t.Fatalf("%q: alg %q not given", tok, tk.alg)
		}
		if keyClaim != "exp" && keyClaim != "nbf" && (tk.expState == isString || tk.nbfState == isString) {
			t.Fatalf("%q: exp %d nbf %d", tok, tk.expState, tk.nbfState)
		}
	})
}

// FuzzDecode: the lax and the URL decoders agree with encoding/base64 on
// what they accept.
func FuzzDecode(f *testing.F) {
	for _, s := range []string{"", "A", "AA", "AAA", "AAAA", "AA==", "AA=x", "-_", "+/", "A=A", "QUJD\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, ok := decodeURL(nil, []byte(s)); ok {
			want, err := base64.RawURLEncoding.DecodeString(s)
			if err != nil || !bytes.Equal(got, want) {
				t.Fatalf("decodeURL(%q) = %q, want %q %v", s, got, want, err)
			}
		}
		got, ok := decodeLax(nil, []byte(s))
		lax := s
		if i := strings.IndexByte(lax, '='); i >= 0 {
			lax = lax[:i]
		}
		lax = strings.NewReplacer("-", "+", "_", "/").Replace(lax)
		want, err := base64.RawStdEncoding.DecodeString(lax)
		if ok != (err == nil && !strings.ContainsAny(lax, "\r\n")) || ok && !bytes.Equal(got, want) {
			t.Fatalf("decodeLax(%q) = %q %v, want %q %v", s, got, ok, want, err)
		}
	})
}

// FuzzCache: two routes' instances sharing one token cache, as a
// worker's do, one reading the consumer's key from "key", the other from
// "sub" with claims_to_verify ["exp"], answer every request as instances
// of their configurations without the cache, whatever the token (signed
// with jack's secret, then maybe a bit of it flipped) and the clock of
// each use: the cache stays across inputs, so that tokens evict one
// another and a token meets entries of its set that are not its own, and
// entries one route made that the other must not take as its own.
func FuzzCache(f *testing.F) {
	now := time.Now().Unix()
	f.Add(`{"alg":"HS256"}`, `{"key":"user-key"}`, uint16(0), int64(0), int64(10))
	f.Add(`{"alg":"HS256"}`, fmt.Sprintf(`{"key":"user-key","exp":%d}`, now+60), uint16(0), int64(0), int64(61))
	f.Add(`{"alg":"HS256"}`, fmt.Sprintf(`{"key":"user-key","nbf":%d}`, now-5), uint16(0), int64(0), int64(-10))
	f.Add(`{"alg":"HS256"}`, fmt.Sprintf(`{"key":"k-grace","exp":%d}`, now), uint16(0), int64(50), int64(101))
	f.Add(`{"alg":"HS256","typ":"JWT"}`, `{"key":"user-key","exp":"soon"}`, uint16(3), int64(0), int64(0))
	f.Add(`{"alg":"HS512"}`, `{"key":"user-key"}`, uint16(0), int64(0), int64(0))
	f.Add(`{"alg":"HS256"}`, fmt.Sprintf(`{"key":"user-key","sub":"user-key","exp":%d}`, now+60), uint16(0), int64(0), int64(61))
	f.Add(`{"alg":"HS256"}`, `{"key":"user-key","sub":"k-hs384"}`, uint16(0), int64(0), int64(0))
	f.Add(`{"alg":"HS256"}`, fmt.Sprintf(`{"sub":"k-grace","key":"user-key","exp":%d}`, now), uint16(0), int64(50), int64(101))
	all := testConsumers(f)
	loop := plugins.NewLoopLocal()
	confs := []string{`{"hide_credentials":true}`, `{"key_claim_name":"sub","claims_to_verify":["exp"]}`}
	var cached, fresh [2]plugins.Phases
	for i, conf := range confs {
		cached[i], fresh[i] = buildOn(f, conf, all, loop), build(f, conf, all)
		instanceOf(f, &fresh[i]).noCache = true
	}
	f.Fuzz(func(t *testing.T, header, payload string, flip uint16, d1, d2 int64) {
		secret := "my-secret-key"
		if strings.Contains(payload, "k-grace") {
			secret = "g"
		}
		tok := []byte(sign(t, "HS256", secret, header, payload))
		if flip > 0 {
			tok[int(flip)%len(tok)] ^= 1
		}
		for i, d := range []int64{d1, d2, d1} {
			for k := range cached {
				r := (k + i + int(flip)) % len(cached) // either route first
				c, u := request("/hello?a=1&jwt="+string(tok)), request("/hello?a=1&jwt="+string(tok))
				c.Clock, u.Clock = (now+d%1e6)*1e9, (now+d%1e6)*1e9
				plugintest.Run(&cached[r], c)
				plugintest.Run(&fresh[r], u)
				if got, want := observe(c), observe(u); !reflect.DeepEqual(got, want) || c.Consumer() != u.Consumer() {
					t.Fatalf("%q at %+d s, route %s: cached %+v, uncached %+v", tok, d%1e6, confs[r], got, want)
				}
			}
		}
	})
}

// FuzzNumber: a JSON number (as the scanner takes it) is the claim
// strconv.ParseFloat reads, integers read without it included.
func FuzzNumber(f *testing.F) {
	for _, s := range []string{"0", "-0", "4102444800", "123456789012345", "-123456789012345", "1234567890123456",
		"9999999999999999", "0123", "1e3", "1.5", "-", "1e400", "-1e-400"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		sc := jsonScanner{b: []byte(s)}
		if s == "" || !sc.num() || sc.i != len(s) {
			return
		}
		got, st := number([]byte(s))
		want, err := strconv.ParseFloat(s, 64)
		if err != nil && want == 0 {
			if st != isOther {
				t.Fatalf("%q: %v, %d; ParseFloat: %v", s, got, st, err)
			}
			return
		}
		if st != isNumber || got != want || math.Signbit(got) != math.Signbit(want) {
			t.Fatalf("%q: %v, %d; want %v", s, got, st, want)
		}
	})
}
