// Package varexpr is lua-resty-expr's expressions as APISIX's plugins take
// them (fault-injection's vars): lists of [var, op, value] rules, checked
// with admin/spec's messages and evaluated against a request's variables
// (plugins.Ctx.Var) without allocating. The operators and their
// comparisons are the route vars' (worker/router): == ~= > >= < <= (by
// number where the value is one), ~~ and ~* (Go regexp, unanchored), in,
// has, ipmatch, each negated by "!". A variable that is unset (Ctx.Var
// nil) is nil to lua-resty-expr: it equals only null, and no ordering or
// pattern holds for it.
//
// A compiled Expr or Any is read-only and safe for concurrent use.
package varexpr

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"regexp"

	"coregate/admin/spec"
	"coregate/httpvar"
	"coregate/plugins"
)

// Expr is one expression: rules that must all hold. The zero Expr holds
// for every request.
type Expr struct {
	rules []rule
}

// Any is a list of expressions, as fault-injection's vars_match reads it:
// it holds when one of its expressions does.
type Any []Expr

// valKind is the JSON type of a rule's value: lua-resty-expr compares by
// Lua type.
type valKind uint8

const (
	valNull valKind = iota
	valStr
	valNum
	valOther // bool, object, array outside "in"
)

type rule struct {
	v     httpvar.Var
	not   bool
	op    spec.VarOp
	kind  valKind
	str   string
	num   float64
	numOK bool // num is tonumber(value), for the ordering operators
	list  []string
	re    *regexp.Regexp
	nets  []netip.Prefix
}

// Check checks raw, a JSON array of expressions, each an array of rules,
// and returns lua-resty-expr's message for the first malformed one
// ("rule should be wrapped inside brackets").
func Check(raw json.RawMessage) error {
	_, err := CompileAny(raw)
	return err
}

// CompileAny compiles raw, a JSON array of expressions (Check).
func CompileAny(raw json.RawMessage) (Any, error) {
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		return nil, err
	}
	out := make(Any, 0, len(items))
	for _, it := range items {
		e, err := Compile(it)
		if err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, nil
}

// Compile compiles raw, one expression: a JSON array of rules.
func Compile(raw json.RawMessage) (Expr, error) {
	var vs spec.Vars
	if err := json.Unmarshal(raw, &vs); err != nil {
		return Expr{}, err
	}
	if msg := vs.Problem(); msg != "" {
		return Expr{}, fmt.Errorf("%s", msg)
	}
	e := Expr{rules: make([]rule, 0, len(vs))}
	for i := range vs {
		r, err := compileRule(&vs[i])
		if err != nil {
			return Expr{}, err
		}
		e.rules = append(e.rules, r)
	}
	return e, nil
}

// compileRule compiles a rule that passed spec's check.
func compileRule(x *spec.VarExpr) (rule, error) {
	op, _ := spec.ParseVarOp(x.Op)
	r := rule{v: httpvar.Parse(x.Var), not: x.Not, op: op}
	var val any
	if len(x.Value) > 0 {
		if err := json.Unmarshal(x.Value, &val); err != nil {
			return rule{}, err
		}
	}
	switch y := val.(type) {
	case nil:
		r.kind = valNull
	case string:
		r.kind, r.str = valStr, y
	case float64:
		r.kind, r.num = valNum, y
	default:
		r.kind = valOther
	}
	switch op {
	case spec.VarOpGt, spec.VarOpGe, spec.VarOpLt, spec.VarOpLe:
		switch r.kind {
		case valNum:
			r.numOK = true
		case valStr:
			r.num, r.numOK = spec.LuaNumber([]byte(r.str))
		}
	case spec.VarOpMatch, spec.VarOpMatchI:
		pat := r.str
		if op == spec.VarOpMatchI {
			pat = "(?i)" + pat
		}
		re, err := regexp.Compile(pat)
		if err != nil {
			return rule{}, err
		}
		r.re = re
	case spec.VarOpIn:
		if arr, ok := val.([]any); ok {
			for _, a := range arr {
				if s, ok := a.(string); ok {
					r.list = append(r.list, s)
				}
			}
		}
	case spec.VarOpIPMatch:
		pats := []any{val}
		if arr, ok := val.([]any); ok {
			pats = arr
		}
		for _, a := range pats {
			s, _ := a.(string)
			p, ok := spec.ParseIPOrCIDR(s)
			if !ok {
				return rule{}, fmt.Errorf("invalid ip address: %v", a)
			}
			r.nets = append(r.nets, p)
		}
	}
	return r, nil
}

// Eval reports whether every rule of e holds for the request of c.
func (e *Expr) Eval(c plugins.Ctx) bool {
	for i := range e.rules {
		r := &e.rules[i]
		if r.eval(c) == r.not {
			return false
		}
	}
	return true
}

// Eval reports whether one of a's expressions holds; false for none.
func (a Any) Eval(c plugins.Ctx) bool {
	for i := range a {
		if a[i].Eval(c) {
			return true
		}
	}
	return false
}

func (r *rule) eval(c plugins.Ctx) bool {
	l := c.Var(r.v)
	ok := l != nil
	switch r.op {
	case spec.VarOpEq:
		switch r.kind {
		case valNull:
			return !ok
		case valStr:
			return ok && string(l) == r.str
		case valNum:
			n, isNum := number(l, ok)
			return isNum && n == r.num
		}
		return false
	case spec.VarOpNe:
		switch r.kind {
		case valNull:
			return ok
		case valStr:
			return !ok || string(l) != r.str
		case valNum:
			n, isNum := number(l, ok)
			return !isNum || n != r.num
		}
		return true
	case spec.VarOpGt, spec.VarOpGe, spec.VarOpLt, spec.VarOpLe:
		n, isNum := number(l, ok)
		if !r.numOK || !isNum {
			return false
		}
		switch r.op {
		case spec.VarOpGt:
			return n > r.num
		case spec.VarOpGe:
			return n >= r.num
		case spec.VarOpLt:
			return n < r.num
		}
		return n <= r.num
	case spec.VarOpMatch, spec.VarOpMatchI:
		return ok && r.re.Match(l)
	case spec.VarOpIn:
		if ok {
			for _, s := range r.list {
				if string(l) == s {
					return true
				}
			}
		}
		return false
	case spec.VarOpIPMatch:
		if !ok {
			return false
		}
		if len(l) > 2 && l[0] == '[' && l[len(l)-1] == ']' {
			l = l[1 : len(l)-1]
		}
		a, valid := spec.ParseIP(l)
		if !valid {
			return false
		}
		a = a.Unmap()
		for _, p := range r.nets {
			if p.Contains(a) {
				return true
			}
		}
		return false
	}
	return false // has: true only for table values, which variables never are
}

func number(b []byte, ok bool) (float64, bool) {
	if !ok {
		return 0, false
	}
	return spec.LuaNumber(b)
}
