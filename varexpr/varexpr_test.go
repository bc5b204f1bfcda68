package varexpr

import (
	"errors"
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"

	"coregate/admin/spec"
	"coregate/httpvar"
)

func TestParsePrefix(t *testing.T) {
	in := []string{"10.0.0.1", "10.1.2.3/8", "::1", "::ffff:10.0.0.0/104", "::ffff:0:0/64", "fe80::/10"}
	var got []netip.Prefix
	for _, s := range in {
		p, err := parsePrefix(s)
		if err != nil {
			t.Fatalf("parsePrefix(%s): %v", s, err)
		}
		got = append(got, p)
	}
	want := []netip.Prefix{
		netip.MustParsePrefix("10.0.0.1/32"), netip.MustParsePrefix("10.0.0.0/8"),
		netip.MustParsePrefix("::1/128"), netip.MustParsePrefix("10.0.0.0/8"),
		netip.MustParsePrefix("::/64"), netip.MustParsePrefix("fe80::/10"),
	}
	if diff := cmp.Diff(want, got, cmp.Comparer(func(a, b netip.Prefix) bool { return a == b })); diff != "" {
		t.Errorf("parsePrefix (-want +got):\n%s", diff)
	}
}

// argVars is a VarSource of arguments (arg_<name>), by name; a name not
// in it is unset.
type argVars map[string][]byte

func (m argVars) Lookup(v *httpvar.Var) ([]byte, bool) {
	if v.Kind != httpvar.Arg {
		return nil, false
	}
	b, ok := m[v.Name]
	return b, ok
}

// one compiles the single condition [arg_a, op, val].
func one(t *testing.T, op, val string) Expr {
	t.Helper()
	e, err := Compile(spec.Vars{{Var: "arg_a", Op: op, Value: []byte(val)}})
	if err != nil {
		t.Fatalf("%s %s: %v", op, val, err)
	}
	return e
}

// TestEvalOperators: each operator against set and unset values, compared
// by Lua type as lua-resty-expr does.
func TestEvalOperators(t *testing.T) {
	cases := []struct {
		op, val, l string
		unset      bool
		want       bool
	}{
		{"==", `"jack"`, "jack", false, true},
		{"==", `"jack"`, "rose", false, false},
		{"==", `"jack"`, "", true, false},
		{"==", `null`, "", true, true},
		{"==", `null`, "x", false, false},
		{"==", `18`, "18.0", false, true},
		{"==", `18`, "x", false, false},
		{"==", `true`, "true", false, false},
		{"~=", `"jack"`, "rose", false, true},
		{"~=", `"jack"`, "", true, true},
		{"~=", `null`, "", true, false},
		{"~=", `18`, "19", false, true},
		{"~=", `18`, "0x12", false, false},
		{">", `18`, "20", false, true},
		{">", `"18"`, "18", false, false},
		{">=", `"18"`, "18", false, true},
		{"<", `18`, "abc", false, false},
		{"<", `18`, "", true, false},
		{"<=", `"x"`, "1", false, false},
		{"~~", `"^j"`, "jack", false, true},
		{"~~", `"^j"`, "Jack", false, false},
		{"~~", `"^j"`, "", true, false},
		{"~*", `"^j"`, "Jack", false, true},
		{"in", `["jack","rose"]`, "rose", false, true},
		{"in", `["jack",1]`, "1", false, false},
		{"in", `["jack"]`, "", true, false},
		{"has", `"a"`, "a", false, false},
		{"ipmatch", `"10.0.0.0/8"`, "10.1.2.3", false, true},
		{"ipmatch", `["::1","10.0.0.0/8"]`, "[::1]", false, true},
		{"ipmatch", `"10.0.0.0/8"`, "::ffff:10.0.0.1", false, true},
		{"ipmatch", `"10.0.0.0/8"`, "11.0.0.1", false, false},
		{"ipmatch", `"10.0.0.0/8"`, "nonsense", false, false},
		{"ipmatch", `"10.0.0.0/8"`, "", true, false},
	}
	for _, tc := range cases {
		e := one(t, tc.op, tc.val)
		vars := argVars{}
		if !tc.unset {
			vars["a"] = []byte(tc.l)
		}
		if got := e.Eval(&Request{Vars: vars}); got != tc.want {
			t.Errorf("%q %s %s (unset %v) = %v, want %v", tc.l, tc.op, tc.val, tc.unset, got, tc.want)
		}
	}
}

// TestEvalRemoteAddr: remote_addr under ipmatch is the connection's
// address, already parsed, when the request has one.
func TestEvalRemoteAddr(t *testing.T) {
	e, err := Compile(spec.Vars{{Var: "remote_addr", Op: "ipmatch", Value: []byte(`["192.168.0.0/16","fe80::/10"]`)}})
	if err != nil {
		t.Fatal(err)
	}
	for s, want := range map[string]bool{"192.168.4.4": true, "fe80::1": true, "::ffff:192.168.1.1": true, "10.0.0.1": false} {
		if got := e.Eval(&Request{RemoteAddr: netip.MustParseAddr(s)}); got != want {
			t.Errorf("remote_addr %s: %v, want %v", s, got, want)
		}
	}
}

// TestCompileErrors: malformed values are refused with their kind.
func TestCompileErrors(t *testing.T) {
	cases := []struct {
		op, val string
		kind    error
		msg     string
	}{
		{"==", `{bad`, ErrVars, ""},
		{"~~", `"(unclosed"`, ErrRegexp, ""},
		{"~*", `5`, ErrRegexp, "vars[0]: varexpr: invalid regular expression: ~* needs a string pattern"},
		{"ipmatch", `"10.0.0.0/33"`, ErrIPPattern, `vars[0]: varexpr: invalid ip or cidr: "10.0.0.0/33"`},
		{"ipmatch", `["1.2.3.4", 5]`, ErrIPPattern, "vars[0]: varexpr: invalid ip or cidr: 5"},
		{"ipmatch", `5`, ErrIPPattern, "vars[0]: varexpr: invalid ip or cidr: ipmatch needs a string or an array"},
		{"=", `"x"`, ErrOperator, `vars[0]: varexpr: invalid vars operator: "="`},
	}
	for _, tc := range cases {
		_, err := Compile(spec.Vars{{Var: "arg_a", Op: tc.op, Value: []byte(tc.val)}})
		if !errors.Is(err, tc.kind) {
			t.Errorf("%s %s: err %v, want %v", tc.op, tc.val, err, tc.kind)
			continue
		}
		if tc.msg != "" && err.Error() != tc.msg {
			t.Errorf("%s %s: %q, want %q", tc.op, tc.val, err.Error(), tc.msg)
		}
	}
}

// TestUsesURI: an Expr reports whether one of its conditions reads uri.
func TestUsesURI(t *testing.T) {
	for _, tc := range []struct {
		vs   spec.Vars
		want bool
	}{
		{nil, false},
		{spec.Vars{{Var: "arg_a", Op: "==", Value: []byte(`"x"`)}}, false},
		{spec.Vars{{Var: "arg_a", Op: "==", Value: []byte(`"x"`)}, {Var: "uri", Op: "~~", Value: []byte(`"^/a"`)}}, true},
		{spec.Vars{{Var: "document_uri", Op: "==", Value: []byte(`"/a"`)}}, true},
	} {
		e, err := Compile(tc.vs)
		if err != nil {
			t.Fatal(err)
		}
		if got := e.UsesURI(); got != tc.want {
			t.Errorf("%v: UsesURI %v, want %v", tc.vs, got, tc.want)
		}
	}
}
