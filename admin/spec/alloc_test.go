//go:build !race

package spec

import "testing"

// The Effective* helpers and accessors are read when snapshots are
// compiled, once per object; they must not allocate.
func TestHelpersDoNotAllocate(t *testing.T) {
	r, err := DecodeRoute([]byte(`{"id":1,"uris":["/a","/b"],"hosts":["h"],"remote_addrs":["::1"],"priority":3,"status":1,
		"upstream":{"nodes":{"a:1":1,"b:2":1},"keepalive_pool":{"size":8}}}`))
	if err != nil {
		t.Fatal(err)
	}
	u := r.Upstream
	var sink int
	allocs := testing.AllocsPerRun(100, func() {
		if r.Enabled() {
			sink++
		}
		sink += r.EffectivePriority() + len(r.AllURIs()) + len(r.AllHosts()) + len(r.AllRemoteAddrs())
		sink += u.EffectiveRetries() + len(u.EffectiveType()) + len(u.EffectiveScheme()) + len(u.EffectivePassHost())
		size, idle, req := u.EffectiveKeepalive()
		sink += size + int(idle) + req + len(r.ID.String())
		if r.ID.IsZero() {
			sink++
		}
	})
	if allocs != 0 {
		t.Fatalf("helpers allocate %v times per run, want 0", allocs)
	}
	_ = sink
}

// TestVarCondEvalDoesNotAllocate: the route vars and the plugins' vars
// evaluate their operators on every request.
func TestVarCondEvalDoesNotAllocate(t *testing.T) {
	type tc struct {
		op  VarOp
		val string
		l   string
	}
	var conds []VarCond
	var vals [][]byte
	for _, x := range []tc{{VarOpEq, `"jack"`, "jack"}, {VarOpNe, `18`, "19"}, {VarOpLt, `"18"`, "20"},
		{VarOpMatchI, `"^j"`, "Jack"}, {VarOpIn, `["a","jack"]`, "jack"}, {VarOpIPMatch, `"::/0"`, "[::1]"}} {
		c, err := CompileVarCond(x.op, []byte(x.val))
		if err != nil {
			t.Fatal(err)
		}
		conds = append(conds, c)
		vals = append(vals, []byte(x.l))
	}
	var sink int
	allocs := testing.AllocsPerRun(100, func() {
		for i := range conds {
			if conds[i].Eval(vals[i], true) {
				sink++
			}
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per evaluation", allocs)
	}
	if sink == 0 {
		t.Fatal("no condition held")
	}
}
