package uriargs

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestArg(t *testing.T) {
	var s Scratch
	for _, tc := range []struct {
		q, name string
		n       int
		v       string
		null    bool
	}{
		{"apikey=k", "apikey", 1, "k", false},
		{"a=1&api%6Bey=a+b%2Bc", "apikey", 1, "a b+c", false},
		{"apikey=1&apikey=2", "apikey", 2, "2", false},
		{"apikey", "apikey", 1, "", true},
		{"apikey=", "apikey", 1, "", false},
		{"x=1", "apikey", 0, "", true},
		{"", "apikey", 0, "", true},
		{"bad=%zz&k=%4", "k", 1, "%4", false},
	} {
		n, v := s.Arg([]byte(tc.q), tc.name)
		if n != tc.n || string(v) != tc.v || (v == nil) != tc.null {
			t.Errorf("Arg(%q, %q) = %d, %q (nil %v), want %d, %q (nil %v)", tc.q, tc.name, n, v, v == nil, tc.n, tc.v, tc.null)
		}
	}
}

func TestWithout(t *testing.T) {
	var s Scratch
	for _, tc := range []struct{ path, q, name, want string }{
		{"/p", "apikey=k", "apikey", "/p"},
		{"/e%63ho", "a=%41&auth=x&test=y&flag&au%74h=z", "auth", "/e%63ho?a=%41&test=y&flag"},
		{"/p", "", "auth", "/p"},
	} {
		if got := string(s.Without([]byte(tc.path), []byte(tc.q), tc.name)); got != tc.want {
			t.Errorf("Without(%q, %q, %q) = %q, want %q", tc.path, tc.q, tc.name, got, tc.want)
		}
	}
	q, p := []byte("a=1&apikey=k&b=%20"), []byte("/p")
	if n := testing.AllocsPerRun(100, func() { s.Arg(q, "apikey"); s.Without(p, q, "apikey") }); n != 0 {
		t.Errorf("%.1f allocations", n)
	}
}

// TestDecode: ngx.decode_args's table: values unescaped, true without
// '=', repeated names in order, empty names skipped.
func TestDecode(t *testing.T) {
	got := Decode([]byte("a=b&c&a=d%20e+f&&=x&n=&k%3D=1&a"))
	want := map[string]any{"a": []any{"b", "d e f", true}, "c": true, "n": "", "k=": "1"}
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("(-want +got):\n%s", d)
	}
	if got := Decode(nil); len(got) != 0 {
		t.Fatalf("empty: %v", got)
	}
}
