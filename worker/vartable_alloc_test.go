//go:build !race

package worker

import (
	"testing"

	"coregate/admin/spec"
	"coregate/httpvar"
	"coregate/worker/accesslog"
	"coregate/worker/router"
)

// TestVarTableAllocs: reading any request or exchange variable allocates
// nothing, through the plugins' Var, route vars and the access log.
func TestVarTableAllocs(t *testing.T) {
	h, cc := varTableExchange(t)
	exact, prefixes := httpvar.Names()
	var vs []httpvar.Var
	var parts []accesslog.Part
	var conds spec.Vars
	for _, n := range append(exact, prefixes...) {
		if n[len(n)-1] == '_' {
			n += "x_a"
		}
		v := httpvar.Parse(n)
		vs = append(vs, v)
		parts = append(parts, accesslog.Part{Kind: v.Kind, Name: v.Name})
		conds = append(conds, spec.VarExpr{Var: n, Op: "~=", Value: []byte(`"~"`)})
	}
	rv := (*reqVars)(cc)
	px := (*pluginCtx)(cc)
	buf := make([]byte, 0, 4096)
	e, err := router.CompileVars(conds)
	if err != nil {
		t.Fatal(err)
	}
	rq := router.Request{Path: cc.curPath, Vars: rv}
	if n := testing.AllocsPerRun(100, func() {
		b := buf[:0]
		for i := range vs {
			px.Var(vs[i])
			rv.Lookup(&vs[i])
			b = cc.appendPart(h.w.alog, b, &parts[i])
		}
		if !e.Eval(&rq) {
			t.Fatal("a variable is \"~\"")
		}
	}); n != 0 {
		t.Errorf("%.1f allocations per run", n)
	}
}
