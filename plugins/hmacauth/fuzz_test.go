package hmacauth

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// matchFieldSlow is Lua's string.match(field, '%s*(%w+)="(.-)"') tried
// from every position in turn, as the pattern matcher does: the reference
// matchField must agree with.
func matchFieldSlow(field []byte) (key, value []byte, ok bool) {
	for start := 0; start < len(field); start++ {
		i := start
		for i < len(field) && isSpace(field[i]) {
			i++
		}
		j := i
		for j < len(field) && isAlnum(field[j]) {
			j++
		}
		if j == i || j+1 >= len(field) || field[j] != '=' || field[j+1] != '"' {
			continue
		}
		if q := bytes.IndexByte(field[j+2:], '"'); q >= 0 {
			return field[i:j], field[j+2 : j+2+q], true
		}
	}
	return nil, nil, false
}

// TestMatchFieldLinear: a header of letters alone, or of '="' without a
// closing quote, is read in time linear in its length: the event loop
// does not stall on a hostile Authorization header.
func TestMatchFieldLinear(t *testing.T) {
	for _, field := range []string{
		strings.Repeat("a", 32<<10),
		strings.Repeat(" ", 32<<10),
		strings.Repeat(`a="`, 11<<10),
		strings.Repeat("a ", 16<<10),
	} {
		best := time.Hour
		for range 3 {
			start := time.Now()
			matchField([]byte(field))
			best = min(best, time.Since(start))
		}
		if best > 20*time.Millisecond {
			t.Errorf("%.10q… (%d bytes): %v", field, len(field), best)
		}
	}
}

// FuzzMatchField: matchField agrees with the pattern tried from every
// position.
func FuzzMatchField(f *testing.F) {
	for _, s := range []string{`keyId="a"`, `  keyId="a b"`, ` x-keyId="a"`, `keyId=""`,
		`keyId="a`, `keyId = "a"`, `"keyId="a"`, `k1="a"x="b"`, `aa="aa="`, `a=a="b"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, field []byte) {
		k, v, ok := matchField(field)
		wk, wv, wok := matchFieldSlow(field)
		if ok != wok || !bytes.Equal(k, wk) || !bytes.Equal(v, wv) || ok && v == nil {
			t.Fatalf("%q: %q %q %v, want %q %q %v", field, k, v, ok, wk, wv, wok)
		}
	})
}

// FuzzFields: any Authorization header is read without a panic, the fields
// slices of it, and its signature decodes into the instance's buffer or
// is refused.
func FuzzFields(f *testing.F) {
	for _, s := range []string{
		` keyId="my-access-key",algorithm="hmac-sha256",headers="@request-target date",signature="AAAA"`,
		`,,,,`, ` headers=""`, ` headers="  a  "`, ` signature="===="`, ` signature="A"`,
		` signature="` + strings.Repeat("A", 90) + `"`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, auth []byte) {
		in := &instance{}
		p := in.fields(auth)
		for _, b := range [][]byte{p.keyID, p.algorithm, p.signature} {
			if b != nil && !bytes.Contains(auth, b) {
				t.Fatalf("%q: field %q not of the header", auth, b)
			}
		}
		if p.signature != nil {
			if sig, ok := in.decodeSignature(p.signature); ok && len(sig) > len(in.sig) {
				t.Fatalf("%q: signature of %d bytes", auth, len(sig))
			}
		}
	})
}

// FuzzParseHTTPTime: any Date header is read without a panic, and a time
// written in RFC 1123's form reads back as itself.
func FuzzParseHTTPTime(f *testing.F) {
	for _, s := range []string{"Sun, 06 Nov 1994 08:49:37 GMT", "Sunday, 06-Nov-94 08:49:37 GMT", "Sun Nov  6 08:49:37 1994",
		"Sun, 31 Feb 9999 99:99:99 GMT", "", ", ", "Sun, 06 Nov 1994 08:49:37"} {
		f.Add([]byte(s), int64(0))
	}
	f.Add([]byte(nil), int64(1764928800))
	f.Fuzz(func(t *testing.T, v []byte, sec int64) {
		parseHTTPTime(v)
		if sec < 0 || sec > 253402300799 { // up to 9999-12-31
			return
		}
		s := time.Unix(sec, 0).UTC().Format("Mon, 02 Jan 2006 15:04:05 GMT")
		if got, ok := parseHTTPTime([]byte(s)); !ok || got != sec {
			t.Fatalf("%q: %d %v, want %d", s, got, ok, sec)
		}
	})
}
