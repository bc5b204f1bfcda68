// Package varexpr is lua-resty-expr's expressions as APISIX's plugins take
// them (fault-injection's vars): lists of [var, op, value] rules, checked
// with admin/spec's messages and evaluated against a request's variables
// (plugins.Ctx.Var) without allocating. The operators are evaluated by
// spec.VarCond, as the route vars (worker/router) are: == ~= > >= < <=
// (by number where the value is one), ~~ and ~* (Go regexp, unanchored),
// in, has, ipmatch, each negated by "!". A variable that is unset (Ctx.Var
// nil) is nil to lua-resty-expr: it equals only null, and no ordering or
// pattern holds for it.
//
// A compiled Expr or Any is read-only and safe for concurrent use.
package varexpr

import (
	"encoding/json"
	"fmt"

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

type rule struct {
	v   httpvar.Var
	not bool
	spec.VarCond
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
	vc, err := spec.CompileVarCond(op, x.Value)
	if err != nil {
		return rule{}, err
	}
	return rule{v: httpvar.Parse(x.Var), not: x.Not, VarCond: vc}, nil
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
	return r.Eval(l, l != nil)
}
