package varexpr

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"regexp"
	"strings"

	"coregate/admin/spec"
	"coregate/httpvar"
)

// Errors returned by Compile. Returned errors wrap one of these; test with
// errors.Is.
var (
	ErrVars      = errors.New("varexpr: invalid vars expression")
	ErrOperator  = errors.New("varexpr: invalid vars operator")
	ErrRegexp    = errors.New("varexpr: invalid regular expression")
	ErrIPPattern = errors.New("varexpr: invalid ip or cidr")
)

// VarSource gives the value of a request variable. The caller implements it
// over its request (the worker over its parsed request, a plugin over its
// Ctx). Lookup reports ok=false when the variable is not set (a missing
// header, argument or cookie). The returned slice need only stay valid
// until the Eval call that asked for it returns; it is not modified.
// Lookup must not allocate if Eval is to stay allocation-free.
type VarSource interface {
	Lookup(v *httpvar.Var) (val []byte, ok bool)
}

// Request is what Eval reads of a request.
type Request struct {
	Path       []byte     // decoded, normalised path without query ($uri)
	RemoteAddr netip.Addr // client address, for ipmatch on remote_addr; may be invalid
	Vars       VarSource  // every other variable; may be nil (all unset)
}

// Expr is a compiled lua-resty-expr condition list: every condition must
// hold. The zero Expr holds for every request. An Expr is immutable and safe
// for concurrent use.
type Expr struct {
	conds   []cond
	usesURI bool // a condition reads uri (Request.Path)
}

// valKind is the JSON type of a condition's right-hand value; lua-resty-expr
// compares by Lua type, so "18" (string) never equals 18 (number).
type valKind uint8

const (
	valNull valKind = iota // JSON null or absent
	valStr
	valNum
	valOther // bool, object, array (outside "in")
)

type cond struct {
	v     httpvar.Var
	not   bool
	op    spec.VarOp
	kind  valKind
	str   string
	num   float64
	numOK bool // num holds tonumber(value) for the ordering operators
	list  []string
	re    *regexp.Regexp
	nets  []netip.Prefix
}

// Compile compiles route vars (or traffic-split's match vars). Operators: == ~= > >= < <= (numeric when
// the value is a number, as lua-resty-expr does), ~~ (RE2 regular
// expression, unanchored), ~* (the same, case-insensitive), in, has,
// ipmatch; Not negates a condition. The two-item form [var, value] means
// [var, "==", value]. Regular expressions and CIDRs are compiled here, once.
// Errors wrap ErrVars, ErrOperator, ErrRegexp or ErrIPPattern.
func Compile(vs spec.Vars) (Expr, error) {
	if len(vs) == 0 {
		return Expr{}, nil
	}
	x := Expr{conds: make([]cond, 0, len(vs))}
	for i := range vs {
		c, err := compileCond(&vs[i])
		if err != nil {
			return Expr{}, fmt.Errorf("vars[%d]: %w", i, err)
		}
		x.conds = append(x.conds, c)
		x.usesURI = x.usesURI || c.v.Kind == httpvar.URI
	}
	return x, nil
}

func compileCond(e *spec.VarExpr) (cond, error) {
	if e.Var == "" {
		return cond{}, fmt.Errorf("%w: missing variable", ErrVars)
	}
	opName := strings.ToLower(e.Op)
	raw := bytes.TrimSpace(e.Value)
	op, known := spec.ParseVarOp(opName)
	if !known {
		if len(raw) != 0 || e.Op == "" {
			return cond{}, fmt.Errorf("%w: %q", ErrOperator, e.Op)
		}
		// [var, value]: kept for compatibility, means [var, "==", value].
		return cond{v: httpvar.Parse(e.Var), not: e.Not, op: spec.VarOpEq, kind: valStr, str: e.Op}, nil
	}
	c := cond{v: httpvar.Parse(e.Var), not: e.Not, op: op}
	var val any
	if len(raw) != 0 {
		if err := json.Unmarshal(raw, &val); err != nil {
			return cond{}, fmt.Errorf("%w: value: %v", ErrVars, err)
		}
	}
	switch x := val.(type) {
	case nil:
		c.kind = valNull
	case string:
		c.kind, c.str = valStr, x
	case float64:
		c.kind, c.num = valNum, x
	default:
		c.kind = valOther
	}
	switch op {
	case spec.VarOpGt, spec.VarOpGe, spec.VarOpLt, spec.VarOpLe:
		switch c.kind {
		case valNum:
			c.numOK = true
		case valStr:
			c.num, c.numOK = spec.LuaNumber([]byte(c.str))
		}
	case spec.VarOpMatch, spec.VarOpMatchI:
		if c.kind != valStr {
			return cond{}, fmt.Errorf("%w: %s needs a string pattern", ErrRegexp, opName)
		}
		pat := c.str
		if op == spec.VarOpMatchI {
			pat = "(?i)" + pat
		}
		re, err := regexp.Compile(pat)
		if err != nil {
			return cond{}, fmt.Errorf("%w: %v", ErrRegexp, err)
		}
		c.re = re
	case spec.VarOpIn:
		if arr, ok := val.([]any); ok {
			for _, a := range arr {
				if s, ok := a.(string); ok {
					c.list = append(c.list, s)
				}
			}
		}
	case spec.VarOpIPMatch:
		var pats []string
		switch x := val.(type) {
		case string:
			pats = []string{x}
		case []any:
			for _, a := range x {
				s, ok := a.(string)
				if !ok {
					return cond{}, fmt.Errorf("%w: %v", ErrIPPattern, a)
				}
				pats = append(pats, s)
			}
		default:
			return cond{}, fmt.Errorf("%w: ipmatch needs a string or an array", ErrIPPattern)
		}
		for _, s := range pats {
			p, err := parsePrefix(s)
			if err != nil {
				return cond{}, err
			}
			c.nets = append(c.nets, p)
		}
	}
	return c, nil
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

// UsesURI reports whether a condition reads uri, that is whether Eval
// reads Request.Path: a caller whose path costs a lookup may leave Path
// unset otherwise.
func (e *Expr) UsesURI() bool { return e.usesURI }

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
	if c.op == spec.VarOpIPMatch && c.v.Kind == httpvar.RemoteAddr && req.RemoteAddr.IsValid() {
		return AddrIn(c.nets, req.RemoteAddr.Unmap())
	}
	l, ok := c.lookup(req)
	switch c.op {
	case spec.VarOpEq:
		switch c.kind {
		case valNull:
			return !ok
		case valStr:
			return ok && string(l) == c.str
		case valNum:
			n, isNum := luaNumberOK(l, ok)
			return isNum && n == c.num
		}
		return false
	case spec.VarOpNe:
		switch c.kind {
		case valNull:
			return ok
		case valStr:
			return !ok || string(l) != c.str
		case valNum:
			n, isNum := luaNumberOK(l, ok)
			return !isNum || n != c.num
		}
		return true
	case spec.VarOpGt, spec.VarOpGe, spec.VarOpLt, spec.VarOpLe:
		if !c.numOK {
			return false
		}
		n, isNum := luaNumberOK(l, ok)
		if !isNum {
			return false
		}
		switch c.op {
		case spec.VarOpGt:
			return n > c.num
		case spec.VarOpGe:
			return n >= c.num
		case spec.VarOpLt:
			return n < c.num
		}
		return n <= c.num
	case spec.VarOpMatch, spec.VarOpMatchI:
		return ok && c.re.Match(l)
	case spec.VarOpIn:
		if !ok {
			return false
		}
		for _, s := range c.list {
			if string(l) == s {
				return true
			}
		}
		return false
	case spec.VarOpIPMatch:
		if !ok {
			return false
		}
		a, valid := parseIP(l)
		return valid && AddrIn(c.nets, a)
	}
	return false // has: true only for table values, which variables never are
}

func luaNumberOK(b []byte, ok bool) (float64, bool) {
	if !ok {
		return 0, false
	}
	return spec.LuaNumber(b)
}

// AddrIn reports whether a (already unmapped) lies in one of nets: an
// ipmatch condition's test, and a route's remote_addrs'.
func AddrIn(nets []netip.Prefix, a netip.Addr) bool {
	for _, p := range nets {
		if p.Contains(a) {
			return true
		}
	}
	return false
}
