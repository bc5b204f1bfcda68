package resub

import (
	"regexp"
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

// TestTemplateAppend: a template alone writes the groups' text and its
// literals, nothing of the subject around the match.
func TestTemplateAppend(t *testing.T) {
	tm, err := ParseTemplate("<$1|${2}|$$|$0>")
	if err != nil {
		t.Fatal(err)
	}
	s := []byte("xx ab-cd yy")
	re := regexp.MustCompile(`(\w+)-(\w+)`)
	got := string(tm.Append([]byte("pre:"), s, re.FindSubmatchIndex(s)))
	if want := "pre:<ab|cd|$|ab-cd>"; got != want {
		t.Fatalf("Append = %q, want %q", got, want)
	}
	if _, err := ParseTemplate("$x"); err != ErrTemplate {
		t.Fatalf("ParseTemplate($x) error %v, want ErrTemplate", err)
	}
}

// TestTemplateLiteral: a template without group references is its text
// ($$ read as "$"), which Append writes for any match; one with a group
// is not.
func TestTemplateLiteral(t *testing.T) {
	s := []byte("xx ab-cd yy")
	caps := regexp.MustCompile(`(\w+)-(\w+)`).FindSubmatchIndex(s)
	for tpl, want := range map[string]string{"": "", "abcd": "abcd", "a$$b": "a$b", "$$": "$", "x$$$$y": "x$$y"} {
		tm, err := ParseTemplate(tpl)
		if err != nil {
			t.Fatal(err)
		}
		got, ok := tm.Literal()
		if !ok || string(got) != want || got == nil {
			t.Errorf("Literal(%q) = %q, %v, want %q", tpl, got, ok, want)
		}
		if app := string(tm.Append(nil, s, caps)); app != want {
			t.Errorf("Append(%q) = %q, want %q", tpl, app, want)
		}
	}
	for _, tpl := range []string{"$1", "a${2}b", "<$0>"} {
		tm, err := ParseTemplate(tpl)
		if err != nil {
			t.Fatal(err)
		}
		if got, ok := tm.Literal(); ok {
			t.Errorf("Literal(%q) = %q, true: it refers to a group", tpl, got)
		}
	}
}
