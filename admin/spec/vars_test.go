package spec

import (
	"encoding/json"
	"testing"
)

// TestVarsProblem: Problem answers lua-resty-expr's message for the first
// malformed expression, without the route's prefix, and "" for a list
// that compiles.
func TestVarsProblem(t *testing.T) {
	for _, tc := range []struct{ vars, msg string }{
		{`[["arg_name","==","jack"],["arg_age","!","<",18]]`, ""},
		{`[]`, ""},
		{`["arg_name","!=","jack"]`, "rule should be wrapped inside brackets"},
		{`[["arg_a","==","1"],["arg_a","=","1"]]`, "invalid operator '='"},
		{`[["remote_addr","ipmatch","1.2.3"]]`, "invalid ip address: 1.2.3"},
	} {
		var vs Vars
		if err := json.Unmarshal([]byte(tc.vars), &vs); err != nil {
			t.Fatalf("%s: %v", tc.vars, err)
		}
		if got := vs.Problem(); got != tc.msg {
			t.Errorf("%s: Problem() = %q, want %q", tc.vars, got, tc.msg)
		}
	}
}

// TestVarsCheck: Vars.Check gives a route's vars messages, for a list
// read on its own (traffic-split's match).
func TestVarsCheck(t *testing.T) {
	for _, tc := range []struct{ vars, err string }{
		{`[]`, ""},
		{`[["arg_name","==","jack"],["http_user-id",">",23],["remote_addr","ipmatch",["10.0.0.0/8"]]]`, ""},
		{`[["arg_name",123,"jack"]]`, "failed to validate the 'vars' expression: invalid operator '123'"},
		{`[["arg_a","=","1"]]`, "failed to validate the 'vars' expression: invalid operator '='"},
		{`["arg_a"]`, "failed to validate the 'vars' expression: rule should be wrapped inside brackets"},
	} {
		var vs Vars
		if err := json.Unmarshal([]byte(tc.vars), &vs); err != nil {
			t.Fatalf("%s: %v", tc.vars, err)
		}
		err := vs.Check()
		if got := ""; err != nil {
			got = err.Error()
			if got != tc.err {
				t.Errorf("%s: %q, want %q", tc.vars, got, tc.err)
			}
		} else if tc.err != "" {
			t.Errorf("%s: passed, want %q", tc.vars, tc.err)
		}
	}
}

// TestVarsProblemPlugin: lua-resty-expr's text for the first malformed
// expression of a plugin's vars, none for well-formed ones.
func TestVarsProblemPlugin(t *testing.T) {
	for in, want := range map[string]string{
		`[["status","==",500],["arg_a","~~","^x"]]`: "",
		`[[]]`:                              "rule too short",
		`[["status","==",1],["a","bad",1]]`: "invalid operator 'bad'",
	} {
		var vs Vars
		if err := json.Unmarshal([]byte(in), &vs); err != nil {
			t.Fatalf("%s: %v", in, err)
		}
		if got := vs.Problem(); got != want {
			t.Errorf("%s: %q, want %q", in, got, want)
		}
	}
}
