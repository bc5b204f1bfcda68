package jsonesc

import (
	"testing"
)

// TestStyles: every byte that any style escapes, in each of the three
// writers' styles, as encoding/json, nginx's ngx_escape_json and lua-cjson
// write it.
func TestStyles(t *testing.T) {
	in := "a/\"\\\x00\x1f\x7f\b\f\n\r\té\u2028\u2029\xff\xe2\x80"
	for _, c := range []struct {
		name string
		st   Style
		want string
	}{
		{"go", Go, `a/\"\\\u0000\u001f` + "\x7f" + `\u0008\u000c\n\r\té\u2028\u2029\ufffd\ufffd\ufffd`},
		{"nginx", Nginx, `a/\"\\\u0000\u001F` + "\x7f" + `\b\f\n\r\té` + "\u2028\u2029\xff\xe2\x80"},
		{"cjson", CJSON, `a\/\"\\\u0000\u001f\u007f\b\f\n\r\té` + "\u2028\u2029\xff\xe2\x80"},
	} {
		if got := string(Append(nil, in, c.st)); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
		if got := string(Append(nil, []byte(in), c.st)); got != c.want {
			t.Errorf("%s, []byte: %q, want %q", c.name, got, c.want)
		}
		if got := string(AppendQuoted([]byte("x"), in, c.st)); got != `x"`+c.want+`"` {
			t.Errorf("%s, quoted: %q", c.name, got)
		}
	}
}

// TestPlainCopied: a value with nothing to escape comes out as it went in.
func TestPlainCopied(t *testing.T) {
	v := []byte("GET /index.html?a=1 HTTP/1.1")
	b := make([]byte, 0, 256)
	for _, st := range []Style{Nginx, CJSON &^ Slash, Go} {
		if got := string(Append(b[:0], v, st)); got != string(v) {
			t.Errorf("style %d: %q", st, got)
		}
	}
}
