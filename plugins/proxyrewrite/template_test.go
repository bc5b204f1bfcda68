package proxyrewrite

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"coregate/httpvar"
	"coregate/plugins/plugintest"
)

// TestExpandVars: resolve_var's pattern, (?<!\\)\$(\{\s*([^}]+?)\s*\}|([\w\.]+)),
// and its "??" default.
func TestExpandVars(t *testing.T) {
	c := plugintest.NewCtx("GET", "/p?x=1&e=").WithVar("v.w", "dotted")
	v := vars{names: map[string]httpvar.Var{}}
	for _, tc := range []struct{ tpl, want string }{
		{"plain", "plain"},
		{"$arg_x", "1"},
		{"a$arg_x-b", "a1-b"},
		{"$arg_x$arg_x", "11"},
		{"${arg_x}", "1"},
		{"${ arg_x }y", "1y"},
		{"${arg_none ?? dflt}", "dflt"},
		{"${arg_none??a??b}", "a"},
		{"${arg_x ?? dflt}", "1"},
		{"${arg_e ?? dflt}", ""}, // set but empty: no default
		{"${arg_none}", ""},
		{"$v.w", "dotted"},
		{"\\$arg_x", "\\$arg_x"},
		{"$", "$"},
		{"a$-", "a$-"},
		{"${}", "${}"},
		{"${arg_x", "${arg_x"},
		{"${ }", ""},
		{"$$arg_x", "$1"},
	} {
		got := string(v.expand(nil, []byte(tc.tpl), c, false))
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("%q (-want +got):\n%s", tc.tpl, diff)
		}
	}
}

// TestExpandCaptures: resolve_var_with_captures's pattern,
// (?<!\\)\$\{?(\d+)\}?.
func TestExpandCaptures(t *testing.T) {
	s := []byte("/a/bc")
	caps := []int{0, 5, 1, 2, 3, 5, -1, -1}
	for _, tc := range []struct{ tpl, want string }{
		{"$1-$2", "a-bc"},
		{"${1}x", "ax"},
		{"${1x", "ax"},
		{"$1}x", "ax"},
		{"$0", "/a/bc"},
		{"$3$4$10", ""},
		{"\\$1", "\\$1"},
		{"$x", "$x"},
		{"${x}", "${x}"},
		{"$99999999999999999999", ""},
	} {
		got := string(expandCaptures(nil, []byte(tc.tpl), s, caps))
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("%q (-want +got):\n%s", tc.tpl, diff)
		}
	}
	if got := string(expandCaptures(nil, []byte("c=$1"), nil, nil)); got != "c=" {
		t.Errorf("without a match: %q", got)
	}
}
