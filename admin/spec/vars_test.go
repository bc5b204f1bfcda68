package spec

import (
	"encoding/json"
	"testing"
)

// TestVarsProblem: lua-resty-expr's text for the first malformed
// expression of a plugin's vars, none for well-formed ones.
func TestVarsProblem(t *testing.T) {
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
