package resub

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestParseTemplate: ngx.re.sub's templates.
func TestParseTemplate(t *testing.T) {
	s := []byte("/x/yz")
	caps := []int{1, 5, 3, 5}
	for _, tc := range []struct{ tpl, want string }{
		{"/$1", "//yz"},
		{"[${1}]", "/[yz]"},
		{"$$1", "/$1"},
		{"$0$0", "/x/yzx/yz"},
		{"$2", "/"},
	} {
		segs, err := parseTemplate(tc.tpl)
		if err != nil {
			t.Fatalf("%q: %v", tc.tpl, err)
		}
		if got := string(expand(nil, s, caps, segs)); got != tc.want {
			t.Errorf("%q: %q, want %q", tc.tpl, got, tc.want)
		}
	}
	for _, bad := range []string{"$", "/$a", "${}", "${1", "${a}", "$`1"} {
		if _, err := parseTemplate(bad); err == nil {
			t.Errorf("%q: accepted", bad)
		}
	}
}

// TestRule: the first match replaced, by the literal path and by regexp,
// and the errors of a bad pattern and a bad template.
func TestRule(t *testing.T) {
	for _, tc := range []struct{ pattern, tpl, s, want string }{
		{`^/api/(.*)`, "/v2/$1", "/api/a/b", "/v2/a/b"},
		{`^/(\w+)/(\d+)$`, "/$2/$1", "/item/42", "/42/item"},
		{`/o`, "/n", "/a/o/o", "/a/n/o"},
		{`^/x`, "/y", "/a", ""},
	} {
		r, err := Compile(tc.pattern, tc.tpl)
		if err != nil {
			t.Fatal(err)
		}
		for range 2 { // the second from the cache
			caps := r.Match([]byte(tc.s))
			got := ""
			if caps != nil {
				got = string(r.Expand(nil, []byte(tc.s), caps))
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s %s on %q (-want +got):\n%s", tc.pattern, tc.tpl, tc.s, diff)
			}
		}
	}
	if _, err := Compile(`(?<=a)b`, "x"); err == nil || err.Error()[:29] != "failed to compile the regex (" {
		t.Errorf("lookbehind: %v", err)
	}
	if _, err := Compile(`a`, "$x"); err != ErrTemplate {
		t.Errorf("bad template: %v", err)
	}
}
