package router

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"strings"

	"coregate/admin/spec"
	"coregate/httpvar"
)

// VarSource gives the value of a request variable. The worker implements it
// over its parsed request. Lookup reports ok=false when the variable is not
// set (a missing header, argument or cookie). The returned slice need only
// stay valid until the Match or Eval call that asked for it returns; it is
// not modified. Lookup must not allocate if Match is to stay allocation-free.
type VarSource interface {
	Lookup(v *httpvar.Var) (val []byte, ok bool)
}

// Expr is a compiled lua-resty-expr condition list: every condition must
// hold. The zero Expr holds for every request. An Expr is immutable and safe
// for concurrent use.
type Expr struct {
	conds []cond
}

type cond struct {
	v   httpvar.Var
	not bool
	spec.VarCond
}

// CompileVars compiles route vars. Operators: == ~= > >= < <= (numeric when
// the value is a number, as lua-resty-expr does), ~~ (RE2 regular
// expression, unanchored), ~* (the same, case-insensitive), in, has,
// ipmatch; Not negates a condition. The two-item form [var, value] means
// [var, "==", value]. Regular expressions and CIDRs are compiled here, once.
// Errors wrap ErrVars, ErrOperator, ErrRegexp or ErrIPPattern.
func CompileVars(vs spec.Vars) (Expr, error) {
	if len(vs) == 0 {
		return Expr{}, nil
	}
	conds := make([]cond, 0, len(vs))
	for i := range vs {
		c, err := compileCond(&vs[i])
		if err != nil {
			return Expr{}, fmt.Errorf("vars[%d]: %w", i, err)
		}
		conds = append(conds, c)
	}
	return Expr{conds: conds}, nil
}

func compileCond(e *spec.VarExpr) (cond, error) {
	if e.Var == "" {
		return cond{}, fmt.Errorf("%w: missing variable", ErrVars)
	}
	raw := bytes.TrimSpace(e.Value)
	op, known := spec.ParseVarOp(strings.ToLower(e.Op))
	if !known {
		if len(raw) != 0 || e.Op == "" {
			return cond{}, fmt.Errorf("%w: %q", ErrOperator, e.Op)
		}
		// [var, value]: kept for compatibility, means [var, "==", value].
		raw, _ = json.Marshal(e.Op)
		op = spec.VarOpEq
	}
	vc, err := spec.CompileVarCond(op, raw)
	if err != nil {
		var ce *spec.VarCondError
		if errors.As(err, &ce) {
			kind := ErrVars
			switch ce.Kind {
			case spec.ErrVarRegexp:
				kind = ErrRegexp
			case spec.ErrVarIPPattern:
				kind = ErrIPPattern
			}
			return cond{}, fmt.Errorf("%w: %s", kind, ce.Detail)
		}
		return cond{}, fmt.Errorf("%w: %v", ErrVars, err)
	}
	return cond{v: httpvar.Parse(e.Var), not: e.Not, VarCond: vc}, nil
}

// parsePrefix parses an ipmatch pattern, an IP address or a CIDR, with
// spec.ParseIPOrCIDR: masked, a v4-mapped IPv6 prefix turned into the IPv4
// prefix it covers.
func parsePrefix(s string) (netip.Prefix, error) {
	p, ok := spec.ParseIPOrCIDR(s)
	if !ok {
		return p, fmt.Errorf("%w: %q", ErrIPPattern, s)
	}
	return p, nil
}

// Len returns the number of conditions.
func (e *Expr) Len() int { return len(e.conds) }

// Eval reports whether every condition holds for req. Variables, resolved
// by httpvar.Parse when the Expr was compiled, are read through req.Vars,
// except uri, which is req.Path, and remote_addr under
// ipmatch, which is req.RemoteAddr when that is valid. It does not allocate
// when req.Vars does not, and is safe for concurrent use.
func (e *Expr) Eval(req *Request) bool {
	for i := range e.conds {
		c := &e.conds[i]
		if c.eval(req) == c.not {
			return false
		}
	}
	return true
}

func (c *cond) lookup(req *Request) ([]byte, bool) {
	if c.v.Kind == httpvar.URI {
		return req.Path, true
	}
	if req.Vars == nil {
		return nil, false
	}
	return req.Vars.Lookup(&c.v)
}

func (c *cond) eval(req *Request) bool {
	if c.Op() == spec.VarOpIPMatch && c.v.Kind == httpvar.RemoteAddr && req.RemoteAddr.IsValid() {
		return c.MatchAddr(req.RemoteAddr.Unmap())
	}
	l, ok := c.lookup(req)
	return c.Eval(l, ok)
}

// addrIn reports whether a (already unmapped) lies in one of nets.
func addrIn(nets []netip.Prefix, a netip.Addr) bool {
	for _, p := range nets {
		if p.Contains(a) {
			return true
		}
	}
	return false
}
