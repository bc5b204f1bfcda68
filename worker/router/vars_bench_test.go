package router

import (
	"net/netip"
	"testing"

	"coregate/admin/spec"
	"coregate/httpvar"
)

// BenchmarkVarsEval: a route's vars of each operator kind, evaluated
// against a request that satisfies them all.
func BenchmarkVarsEval(b *testing.B) {
	e, err := CompileVars(spec.Vars{
		{Var: "arg_name", Op: "==", Value: []byte(`"jack"`)},
		{Var: "arg_age", Op: ">", Value: []byte(`18`)},
		{Var: "http_x", Op: "~~", Value: []byte(`"^ab"`)},
		{Var: "arg_name", Op: "in", Value: []byte(`["rose","jack"]`)},
		{Var: "remote_addr", Op: "ipmatch", Value: []byte(`["10.0.0.0/8"]`)},
		{Var: "http_y", Op: "ipmatch", Value: []byte(`"192.168.0.0/16"`)},
	})
	if err != nil {
		b.Fatal(err)
	}
	req := &Request{Path: []byte("/"), RemoteAddr: netip.MustParseAddr("10.1.2.3"), Vars: mapVars{
		httpvar.Parse("arg_name"): []byte("jack"), httpvar.Parse("arg_age"): []byte("20"),
		httpvar.Parse("http_x"): []byte("abc"), httpvar.Parse("http_y"): []byte("192.168.1.1"),
	}}
	if !e.Eval(req) {
		b.Fatal("vars do not hold")
	}
	b.ReportAllocs()
	for b.Loop() {
		e.Eval(req)
	}
}
