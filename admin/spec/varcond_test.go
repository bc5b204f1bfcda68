package spec

import (
	"errors"
	"net/netip"
	"testing"
)

// TestVarCondEval: each operator against set and unset values, compared
// by Lua type as lua-resty-expr does.
func TestVarCondEval(t *testing.T) {
	cases := []struct {
		op    VarOp
		val   string
		l     string
		unset bool
		want  bool
	}{
		{VarOpEq, `"jack"`, "jack", false, true},
		{VarOpEq, `"jack"`, "rose", false, false},
		{VarOpEq, `"jack"`, "", true, false},
		{VarOpEq, `null`, "", true, true},
		{VarOpEq, `null`, "x", false, false},
		{VarOpEq, `18`, "18.0", false, true},
		{VarOpEq, `18`, "x", false, false},
		{VarOpEq, `true`, "true", false, false},
		{VarOpNe, `"jack"`, "rose", false, true},
		{VarOpNe, `"jack"`, "", true, true},
		{VarOpNe, `null`, "", true, false},
		{VarOpNe, `18`, "19", false, true},
		{VarOpNe, `18`, "0x12", false, false},
		{VarOpGt, `18`, "20", false, true},
		{VarOpGt, `"18"`, "18", false, false},
		{VarOpGe, `"18"`, "18", false, true},
		{VarOpLt, `18`, "abc", false, false},
		{VarOpLt, `18`, "", true, false},
		{VarOpLe, `"x"`, "1", false, false},
		{VarOpMatch, `"^j"`, "jack", false, true},
		{VarOpMatch, `"^j"`, "Jack", false, false},
		{VarOpMatch, `"^j"`, "", true, false},
		{VarOpMatchI, `"^j"`, "Jack", false, true},
		{VarOpIn, `["jack","rose"]`, "rose", false, true},
		{VarOpIn, `["jack",1]`, "1", false, false},
		{VarOpIn, `["jack"]`, "", true, false},
		{VarOpHas, `"a"`, "a", false, false},
		{VarOpIPMatch, `"10.0.0.0/8"`, "10.1.2.3", false, true},
		{VarOpIPMatch, `["::1","10.0.0.0/8"]`, "[::1]", false, true},
		{VarOpIPMatch, `"10.0.0.0/8"`, "::ffff:10.0.0.1", false, true},
		{VarOpIPMatch, `"10.0.0.0/8"`, "11.0.0.1", false, false},
		{VarOpIPMatch, `"10.0.0.0/8"`, "nonsense", false, false},
		{VarOpIPMatch, `"10.0.0.0/8"`, "", true, false},
	}
	for _, tc := range cases {
		c, err := CompileVarCond(tc.op, []byte(tc.val))
		if err != nil {
			t.Fatalf("%s %s: %v", tc.op, tc.val, err)
		}
		var l []byte
		if !tc.unset {
			l = []byte(tc.l)
		}
		if got := c.Eval(l, !tc.unset); got != tc.want {
			t.Errorf("%q %s %s (unset %v) = %v, want %v", tc.l, tc.op, tc.val, tc.unset, got, tc.want)
		}
	}
}

// TestVarCondMatchAddr: an address already parsed is tested against the
// ipmatch CIDRs.
func TestVarCondMatchAddr(t *testing.T) {
	c, err := CompileVarCond(VarOpIPMatch, []byte(`["192.168.0.0/16","fe80::/10"]`))
	if err != nil {
		t.Fatal(err)
	}
	for s, want := range map[string]bool{"192.168.4.4": true, "fe80::1": true, "10.0.0.1": false} {
		if got := c.MatchAddr(netip.MustParseAddr(s)); got != want {
			t.Errorf("MatchAddr(%s) = %v, want %v", s, got, want)
		}
	}
	if c.Op() != VarOpIPMatch || c.Op().String() != "ipmatch" {
		t.Errorf("Op() = %v", c.Op())
	}
}

// TestCompileVarCondErrors: malformed values are refused with their kind.
func TestCompileVarCondErrors(t *testing.T) {
	cases := []struct {
		op   VarOp
		val  string
		kind error
		msg  string
	}{
		{VarOpEq, `{bad`, ErrVarValue, ""},
		{VarOpMatch, `"(unclosed"`, ErrVarRegexp, ""},
		{VarOpMatchI, `5`, ErrVarRegexp, "spec: invalid regular expression: ~* needs a string pattern"},
		{VarOpIPMatch, `"10.0.0.0/33"`, ErrVarIPPattern, `spec: invalid ip or cidr: "10.0.0.0/33"`},
		{VarOpIPMatch, `["1.2.3.4", 5]`, ErrVarIPPattern, "spec: invalid ip or cidr: 5"},
		{VarOpIPMatch, `5`, ErrVarIPPattern, "spec: invalid ip or cidr: ipmatch needs a string or an array"},
	}
	for _, tc := range cases {
		_, err := CompileVarCond(tc.op, []byte(tc.val))
		var ce *VarCondError
		if !errors.Is(err, tc.kind) || !errors.As(err, &ce) {
			t.Errorf("%s %s: err %v, want %v", tc.op, tc.val, err, tc.kind)
			continue
		}
		if tc.msg != "" && err.Error() != tc.msg {
			t.Errorf("%s %s: %q, want %q", tc.op, tc.val, err.Error(), tc.msg)
		}
	}
}
