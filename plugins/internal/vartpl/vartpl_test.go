package vartpl

import (
	"strings"
	"testing"
	"unsafe"

	"coregate/plugins/plugintest"
)

// TestTemplate: variables, braces, defaults, escapes, and how many
// resolved; a string with no '$' kept as it is.
func TestTemplate(t *testing.T) {
	c := plugintest.NewCtx("GET", "/p?a=1").WithVar("x.y", "XY").WithHeader("H", "h")
	for tpl, want := range map[string]struct {
		out string
		n   int
	}{
		"plain":                 {"plain", 0},
		"$arg_a-$http_h":        {"1-h", 2},
		"${ arg_a }/${arg_b}":   {"1/", 1},
		"${arg_b ?? dflt}:$x.y": {"dflt:XY", 2},
		`\$arg_a $`:             {`\$arg_a $`, 0},
		"${}$":                  {"${}$", 0},
		"$arg_a$arg_a":          {"11", 2},
		`a\b`:                   {`a\b`, 0},
		"":                      {"", 0},
	} {
		tp := Parse(tpl)
		out, n := tp.Render(nil, c)
		if string(out) != want.out || n != want.n {
			t.Errorf("%q: %q (%d resolved), want %q (%d)", tpl, out, n, want.out, want.n)
		}
		if literal := !strings.Contains(tpl, "$"); literal != (tp.parts == nil) || literal && unsafe.StringData(tp.lit) != unsafe.StringData(tpl) {
			t.Errorf("%q: %d parts, literal %q: want the string itself with no part only where it has no '$'", tpl, len(tp.parts), tp.lit)
		}
	}
}
