package router

import (
	"errors"
	"testing"

	"coregate/admin/spec"
)

func TestExprEval(t *testing.T) {
	tests := []struct {
		vars string
		vals map[string]string
		addr string
		want bool
	}{
		// == and ~= on strings, numbers and null.
		{`[["arg_a","==","x"]]`, map[string]string{"arg_a": "x"}, "", true},
		{`[["arg_a","==","x"]]`, map[string]string{"arg_a": "X"}, "", false},
		{`[["arg_a","==","x"]]`, nil, "", false},
		{`[["arg_a","==",10]]`, map[string]string{"arg_a": "10.0"}, "", true},
		{`[["arg_a","==",10]]`, map[string]string{"arg_a": " 0xA "}, "", true},
		{`[["arg_a","==",10]]`, map[string]string{"arg_a": "ten"}, "", false},
		{`[["arg_a","==",null]]`, nil, "", true},
		{`[["arg_a","==",null]]`, map[string]string{"arg_a": ""}, "", false},
		{`[["arg_a","==",true]]`, map[string]string{"arg_a": "true"}, "", false},
		{`[["arg_a","~=","x"]]`, nil, "", true},
		{`[["arg_a","~=","x"]]`, map[string]string{"arg_a": "x"}, "", false},
		{`[["arg_a","~=",5]]`, map[string]string{"arg_a": "abc"}, "", true},
		{`[["arg_a","~=",5]]`, map[string]string{"arg_a": "5"}, "", false},
		{`[["arg_a","~=",null]]`, map[string]string{"arg_a": "5"}, "", true},
		{`[["arg_a","~=",null]]`, nil, "", false},
		// Ordering is numeric on both sides.
		{`[["arg_a",">",9]]`, map[string]string{"arg_a": "10"}, "", true},
		{`[["arg_a",">","9"]]`, map[string]string{"arg_a": "10"}, "", true},
		{`[["arg_a",">",9]]`, map[string]string{"arg_a": "9"}, "", false},
		{`[["arg_a",">=",9]]`, map[string]string{"arg_a": "9"}, "", true},
		{`[["arg_a","<",9]]`, map[string]string{"arg_a": "-1e2"}, "", true},
		{`[["arg_a","<=",9]]`, map[string]string{"arg_a": "9.5"}, "", false},
		{`[["arg_a",">",9]]`, map[string]string{"arg_a": "x"}, "", false},
		{`[["arg_a",">",9]]`, nil, "", false},
		{`[["arg_a",">","nine"]]`, map[string]string{"arg_a": "10"}, "", false},
		{`[["arg_a","!",">",9]]`, nil, "", true},
		// Regular expressions are unanchored.
		{`[["http_user_agent","~~","droid"]]`, map[string]string{"http_user_agent": "android 14"}, "", true},
		{`[["http_user_agent","~~","^droid"]]`, map[string]string{"http_user_agent": "android"}, "", false},
		{`[["http_user_agent","~~","Android"]]`, map[string]string{"http_user_agent": "android"}, "", false},
		{`[["http_user_agent","~*","ANDROID"]]`, map[string]string{"http_user_agent": "android"}, "", true},
		{`[["http_user_agent","~~","x"]]`, nil, "", false},
		{`[["http_user_agent","!","~~","x"]]`, nil, "", true},
		// in compares with the string items only, as Lua does.
		{`[["arg_a","in",["a","b"]]]`, map[string]string{"arg_a": "b"}, "", true},
		{`[["arg_a","in",["a","b"]]]`, map[string]string{"arg_a": "c"}, "", false},
		{`[["arg_a","in",[1,2]]]`, map[string]string{"arg_a": "1"}, "", false},
		{`[["arg_a","!","in",["a"]]]`, nil, "", true},
		{`[["arg_a","has","a"]]`, map[string]string{"arg_a": "a"}, "", false},
		{`[["arg_a","!","has","a"]]`, map[string]string{"arg_a": "a"}, "", true},
		// ipmatch on remote_addr uses the request address; on others parses the value.
		{`[["remote_addr","ipmatch",["10.0.0.0/8","::1"]]]`, nil, "10.2.3.4", true},
		{`[["remote_addr","ipmatch",["10.0.0.0/8","::1"]]]`, nil, "::1", true},
		{`[["remote_addr","ipmatch","10.0.0.0/8"]]`, nil, "::ffff:10.0.0.1", true},
		{`[["remote_addr","ipmatch","10.0.0.0/8"]]`, nil, "11.0.0.1", false},
		{`[["http_x_real_ip","ipmatch","10.0.0.0/8"]]`, map[string]string{"http_x_real_ip": "10.0.0.9"}, "", true},
		{`[["http_x_real_ip","ipmatch","2001:db8::/32"]]`, map[string]string{"http_x_real_ip": "[2001:db8::1]"}, "", true},
		{`[["http_x_real_ip","ipmatch","10.0.0.0/8"]]`, map[string]string{"http_x_real_ip": "junk"}, "", false},
		{`[["http_x_real_ip","!","ipmatch","10.0.0.0/8"]]`, map[string]string{"http_x_real_ip": "1.1.1.1"}, "", true},
		// uri is the request path; several conditions must all hold.
		{`[["uri","==","/p"],["arg_a","==","1"]]`, map[string]string{"arg_a": "1"}, "", true},
		{`[["uri","==","/q"],["arg_a","==","1"]]`, map[string]string{"arg_a": "1"}, "", false},
		// Two-item form and upper-case operators.
		{`[["arg_a","x"]]`, map[string]string{"arg_a": "x"}, "", true},
		{`[["arg_a","IN",["x"]]]`, map[string]string{"arg_a": "x"}, "", true},
		{`[]`, nil, "", true},
	}
	for _, tc := range tests {
		e := vars(t, tc.vars)
		p := probe{path: "/p", vars: tc.vals, addr: tc.addr}
		if tc.vals == nil {
			p.vars = map[string]string{}
		}
		if got := e.Eval(p.request(t)); got != tc.want {
			t.Errorf("%s with %v addr %q = %v, want %v", tc.vars, tc.vals, tc.addr, got, tc.want)
		}
	}
}

func TestExprNilSource(t *testing.T) {
	e := vars(t, `[["arg_a","==",null],["uri","==","/"]]`)
	if !e.Eval(&Request{Path: []byte("/")}) {
		t.Error("missing VarSource should read as unset variables")
	}
	var zero Expr
	if !zero.Eval(&Request{}) {
		t.Error("zero Expr must hold")
	}
}

func TestCompileVarsErrors(t *testing.T) {
	tests := []struct {
		vars spec.Vars
		want error
	}{
		{spec.Vars{{Var: "", Op: "==", Value: []byte(`"x"`)}}, ErrVars},
		{spec.Vars{{Var: "a", Op: "=~", Value: []byte(`"x"`)}}, ErrOperator},
		{spec.Vars{{Var: "a", Op: ""}}, ErrOperator},
		{spec.Vars{{Var: "a", Op: "==", Value: []byte(`{bad`)}}, ErrVars},
		{spec.Vars{{Var: "a", Op: "~~", Value: []byte(`"(unclosed"`)}}, ErrRegexp},
		{spec.Vars{{Var: "a", Op: "~~", Value: []byte(`5`)}}, ErrRegexp},
		{spec.Vars{{Var: "a", Op: "ipmatch", Value: []byte(`"10.0.0.0/33"`)}}, ErrIPPattern},
		{spec.Vars{{Var: "a", Op: "ipmatch", Value: []byte(`["1.2.3.4", 5]`)}}, ErrIPPattern},
		{spec.Vars{{Var: "a", Op: "ipmatch", Value: []byte(`5`)}}, ErrIPPattern},
	}
	for _, tc := range tests {
		if _, err := CompileVars(tc.vars); !errors.Is(err, tc.want) {
			t.Errorf("CompileVars(%+v) error = %v, want %v", tc.vars, err, tc.want)
		}
	}
}
