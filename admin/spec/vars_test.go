package spec

import (
	"encoding/json"
	"testing"
)

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
