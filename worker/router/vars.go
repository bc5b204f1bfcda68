package router

import (
	"coregate/admin/spec"
	"coregate/varexpr"
)

// VarSource gives the value of a request variable (varexpr.VarSource). The
// worker implements it over its parsed request. The returned slice need
// only stay valid until the Match or Eval call that asked for it returns;
// Lookup must not allocate if Match is to stay allocation-free.
type VarSource = varexpr.VarSource

// Expr is a compiled lua-resty-expr condition list (varexpr.Expr): every
// condition must hold. The zero Expr holds for every request. An Expr is
// immutable and safe for concurrent use.
type Expr struct {
	x varexpr.Expr
}

// CompileVars compiles route vars with varexpr.Compile: its operators, its
// errors (wrapping ErrVars, ErrOperator, ErrRegexp or ErrIPPattern).
func CompileVars(vs spec.Vars) (Expr, error) {
	x, err := varexpr.Compile(vs)
	return Expr{x}, err
}

// Len returns the number of conditions.
func (e *Expr) Len() int { return e.x.Len() }

// Eval reports whether every condition holds for req: uri is req.Path,
// remote_addr under ipmatch req.RemoteAddr when that is valid, the other
// variables req.Vars's. It does not allocate when req.Vars does not, and
// is safe for concurrent use.
func (e *Expr) Eval(req *Request) bool {
	in := varexpr.Request{Path: req.Path, RemoteAddr: req.RemoteAddr, Vars: req.Vars}
	return e.x.Eval(&in)
}
