package router

import (
	"encoding/json"
	"net/netip"
	"testing"

	"coregate/admin/spec"
	"coregate/httpvar"
)

// mapVars is a VarSource over fixed values.
type mapVars map[httpvar.Var][]byte

func (m mapVars) Lookup(v *httpvar.Var) ([]byte, bool) {
	b, ok := m[*v]
	return b, ok
}

// probe is one request and the route Index it must match (-1: none).
type probe struct {
	method string
	path   string
	host   string
	addr   string
	vars   map[string]string // APISIX variable name → value
	want   int
}

func (p probe) request(t testing.TB) *Request {
	t.Helper()
	req := &Request{Method: ParseMethod([]byte(p.method)), Path: []byte(p.path), Host: []byte(p.host)}
	if p.method == "" {
		req.Method = MethodGET
	}
	if p.addr != "" {
		a, err := netip.ParseAddr(p.addr)
		if err != nil {
			t.Fatalf("bad probe addr %q: %v", p.addr, err)
		}
		req.RemoteAddr = a
	}
	if p.vars != nil {
		mv := mapVars{}
		for k, v := range p.vars {
			mv[httpvar.Parse(k)] = []byte(v)
		}
		req.Vars = mv
	}
	return req
}

// matchAll runs every probe against r and returns the indexes (-1: none).
func matchAll(t testing.TB, r *Router, ps []probe) (got, want []int) {
	t.Helper()
	for _, p := range ps {
		i, ok := r.Match(p.request(t))
		if !ok {
			i = -1
		}
		got = append(got, i)
		want = append(want, p.want)
	}
	return got, want
}

func prefixes(t testing.TB, ss ...string) []netip.Prefix {
	t.Helper()
	var out []netip.Prefix
	for _, s := range ss {
		p, ok := spec.ParseIPOrCIDR(s)
		if !ok {
			t.Fatalf("bad prefix %q", s)
		}
		out = append(out, p)
	}
	return out
}

// vars compiles [[var, op, value], ...] written as JSON, where each item is
// [var, op, value] or [var, "!", op, value] or [var, value].
func vars(t testing.TB, js string) Expr {
	t.Helper()
	e, err := CompileVars(specVars(t, js))
	if err != nil {
		t.Fatalf("CompileVars(%s): %v", js, err)
	}
	return e
}

func specVars(t testing.TB, js string) spec.Vars {
	t.Helper()
	var items [][]json.RawMessage
	if err := json.Unmarshal([]byte(js), &items); err != nil {
		t.Fatalf("bad vars json %s: %v", js, err)
	}
	var out spec.Vars
	for _, it := range items {
		var e spec.VarExpr
		str := func(m json.RawMessage) string {
			var s string
			if err := json.Unmarshal(m, &s); err != nil {
				t.Fatalf("vars %s: want a string, got %s", js, m)
			}
			return s
		}
		e.Var = str(it[0])
		switch len(it) {
		case 2:
			e.Op = str(it[1])
		case 3:
			e.Op, e.Value = str(it[1]), it[2]
		case 4:
			if str(it[1]) != "!" {
				t.Fatalf("vars %s: bad not", js)
			}
			e.Not, e.Op, e.Value = true, str(it[2]), it[3]
		default:
			t.Fatalf("vars %s: bad item length", js)
		}
		out = append(out, e)
	}
	return out
}

func mustBuild(t testing.TB, routes []Route, mode Mode) *Router {
	t.Helper()
	r, err := Build(routes, mode)
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	return r
}
