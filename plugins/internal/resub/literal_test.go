package resub

import (
	"bytes"
	"regexp"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// literalPatterns are patterns of the shapes literalRE takes, with the
// subjects that exercise them.
var literalPatterns = []string{
	`^/api/(.*)`, `^/api/(.+)`, `^/hello$`, `^/hello`, `/old`, `/old$`, `^/v1/(.*)/info$`,
	`^/v1/(.+)/info`, `^(.*)`, `^/(.*)$`, `^\/a\.b/(.*)x`, `^/é/(.*)`,
}

var literalSubjects = []string{
	"", "/", "/api/", "/api/x", "/api/x/y?z", "/apix", "/hello", "/hello/", "/x/hello", "/old", "/a/old/b/old",
	"/v1/a/info", "/v1//info", "/v1/a/info/b/info", "/v1/info", "/a.b/cxdx", "/a.b/", "/é/ü", "/hello\n", "/api/a\nb",
	"/v1/a/info\n", "/v1/a\n/info",
}

// TestLiteralShapes: which patterns take the path without regexp.
func TestLiteralShapes(t *testing.T) {
	for _, p := range literalPatterns {
		if _, ok := compileLiteral(p); !ok {
			t.Errorf("%s: not matched without regexp", p)
		}
	}
	for _, p := range []string{`/(.*)`, `^/(.*?)`, `^(?i)/a`, `^/(a|b)`, `^/(\w+)`, `^/(.*)/(.*)`, `^/a(?:.*)`, `^`, ``, `^/a\d`} {
		if _, ok := compileLiteral(p); ok {
			t.Errorf("%s: taken for a literal pattern", p)
		}
	}
}

// TestLiteralMatchesRegexp: on subjects without a newline, literalRE
// finds what regexp finds.
func TestLiteralMatchesRegexp(t *testing.T) {
	for _, p := range literalPatterns {
		for _, s := range literalSubjects {
			if bytes.IndexByte([]byte(s), '\n') < 0 {
				compareLiteral(t, p, []byte(s))
			}
		}
	}
}

func compareLiteral(t *testing.T, pattern string, s []byte) {
	t.Helper()
	l, ok := compileLiteral(pattern)
	if !ok {
		t.Fatalf("%s: not a literal pattern", pattern)
	}
	var caps [4]int
	n, ok := l.match(s, &caps)
	var got []int
	if ok {
		got = caps[:n]
	}
	want := regexp.MustCompile(pattern).FindSubmatchIndex(s)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("%s on %q (-regexp +literal):\n%s", pattern, s, diff)
	}
}

// TestLiteralPCRENewlines: where PCRE and RE2 differ, literalRE is PCRE:
// '.' stops at '\n', '$' also matches before a final '\n'.
func TestLiteralPCRENewlines(t *testing.T) {
	tests := []struct {
		pattern, s string
		want       []int
	}{
		{`^/hello$`, "/hello\n", []int{0, 6}},
		{`^/hello$`, "/hello\n\n", nil},
		{`^/api/(.*)`, "/api/a\nb", []int{0, 6, 5, 6}},
		{`^/api/(.*)$`, "/api/a\nb", nil},
		{`^/api/(.*)$`, "/api/ab\n", []int{0, 7, 5, 7}},
		{`/old$`, "/a/old\n", []int{2, 6}},
		{`^/v1/(.+)/info$`, "/v1/a/info\n", []int{0, 10, 4, 5}},
		{`^/v1/(.+)/info`, "/v1/a\n/info", nil},
	}
	for _, tc := range tests {
		l, _ := compileLiteral(tc.pattern)
		var caps [4]int
		n, ok := l.match([]byte(tc.s), &caps)
		var got []int
		if ok {
			got = caps[:n]
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("%s on %q (-want +got):\n%s", tc.pattern, tc.s, diff)
		}
	}
}

// FuzzLiteral: literalRE and regexp agree on any subject without a
// newline.
func FuzzLiteral(f *testing.F) {
	for i, s := range literalSubjects {
		f.Add(uint8(i), s)
	}
	f.Fuzz(func(t *testing.T, i uint8, s string) {
		if bytes.IndexByte([]byte(s), '\n') >= 0 {
			return
		}
		compareLiteral(t, literalPatterns[int(i)%len(literalPatterns)], []byte(s))
	})
}
