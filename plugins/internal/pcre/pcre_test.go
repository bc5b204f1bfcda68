package pcre

import "testing"

// TestCheck: APISIX's message for a pattern that does not compile
// (t/plugin/uri-blocker.t), and Go's text where PCRE's is not known.
func TestCheck(t *testing.T) {
	for _, tc := range []struct{ pattern, err string }{
		{`^/admin`, ""},
		{`.+(`, `pcre_compile() failed: missing ) in ".+("`},
		{`^b(`, `pcre_compile() failed: missing ) in "^b("`},
		{`a)`, `pcre_compile() failed: unmatched parentheses in "a)"`},
		{`[a`, `pcre_compile() failed: missing terminating ] for character class in "[a"`},
		{`*a`, `pcre_compile() failed: nothing to repeat in "*a"`},
		{`a(?=b)`, `pcre_compile() failed: invalid or unsupported Perl syntax in "a(?=b)"`},
	} {
		err := Check(tc.pattern)
		if got := errText(err); got != tc.err {
			t.Errorf("%q: %q, want %q", tc.pattern, got, tc.err)
		}
	}
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// TestAny: the joined expression matches where one pattern does, each
// pattern kept whole (its own alternation does not leak), and folds case
// when asked.
func TestAny(t *testing.T) {
	re, err := Any([]string{`^/a|^/b$`, `c\.php`, `^x`}, false)
	if err != nil {
		t.Fatal(err)
	}
	for s, want := range map[string]bool{"/a/1": true, "/b": true, "/b/": false, "/q/c.php": true, "/cXphp": false, "/x": false, "x": true, "/A": false} {
		if got := re.MatchString(s); got != want {
			t.Errorf("%q: %v, want %v", s, got, want)
		}
	}
	if re, _ := Any([]string{`^/ADMIN`}, true); !re.MatchString("/admin/x") {
		t.Error("not case-insensitive")
	}
	if _, err := Any([]string{`ok`, `^b(`}, false); errText(err) != `pcre_compile() failed: missing ) in "^b("` {
		t.Errorf("a bad pattern: %v", err)
	}
}
