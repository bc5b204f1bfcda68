//go:build !race

package varexpr

import (
	"net/netip"
	"testing"

	"coregate/admin/spec"
)

// TestParseAllocs: reading an address for ipmatch does not allocate.
func TestParseAllocs(t *testing.T) {
	v6, v4 := []byte("2001:db8::1:2"), []byte("192.168.10.1")
	n := testing.AllocsPerRun(200, func() {
		parseIP(v6)
		parseIP(v4)
	})
	if n != 0 {
		t.Errorf("%v allocs, want 0", n)
	}
}

// TestEvalAllocs: the route vars and the plugins' vars evaluate their
// operators on every request, without allocating.
func TestEvalAllocs(t *testing.T) {
	e, err := Compile(spec.Vars{
		{Var: "arg_a", Op: "==", Value: []byte(`"jack"`)},
		{Var: "arg_b", Op: "~=", Value: []byte(`18`)},
		{Var: "arg_c", Op: "<", Value: []byte(`"18"`)},
		{Var: "arg_a", Op: "~*", Value: []byte(`"^J"`)},
		{Var: "arg_a", Op: "in", Value: []byte(`["a","jack"]`)},
		{Var: "arg_d", Op: "ipmatch", Value: []byte(`"::/0"`)},
		{Var: "remote_addr", Op: "ipmatch", Value: []byte(`"10.0.0.0/8"`)},
	})
	if err != nil {
		t.Fatal(err)
	}
	req := Request{RemoteAddr: netip.MustParseAddr("10.1.2.3"),
		Vars: argVars{"a": []byte("jack"), "b": []byte("19"), "c": []byte("5"), "d": []byte("[::1]")}}
	var got bool
	if n := testing.AllocsPerRun(100, func() { got = e.Eval(&req) }); n != 0 {
		t.Fatalf("%v allocations per evaluation", n)
	}
	if !got {
		t.Fatal("did not hold")
	}
}
