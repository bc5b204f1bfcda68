package spec

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"regexp"
)

// VarOp names, by operator, for messages.
var varOpNames = [...]string{
	VarOpEq: "==", VarOpNe: "~=", VarOpGt: ">", VarOpGe: ">=", VarOpLt: "<", VarOpLe: "<=",
	VarOpMatch: "~~", VarOpMatchI: "~*", VarOpIn: "in", VarOpHas: "has", VarOpIPMatch: "ipmatch",
}

// String returns the operator's written name ("" for the zero VarOp).
func (o VarOp) String() string {
	if int(o) < len(varOpNames) {
		return varOpNames[o]
	}
	return ""
}

// The kinds of VarCondError.
var (
	ErrVarValue     = errors.New("spec: invalid vars value")
	ErrVarRegexp    = errors.New("spec: invalid regular expression")
	ErrVarIPPattern = errors.New("spec: invalid ip or cidr")
)

// VarCondError is CompileVarCond's error: Kind is ErrVarValue,
// ErrVarRegexp or ErrVarIPPattern, Detail what was wrong, so that callers
// can give it under their own error kinds.
type VarCondError struct {
	Kind   error
	Detail string
}

func (e *VarCondError) Error() string { return e.Kind.Error() + ": " + e.Detail }

// Unwrap returns Kind.
func (e *VarCondError) Unwrap() error { return e.Kind }

// varKind is the JSON type of a condition's right-hand value:
// lua-resty-expr compares by Lua type, so "18" (string) never equals 18
// (number).
type varKind uint8

const (
	varNull  varKind = iota // JSON null or absent
	varStr                  // string
	varNum                  // number
	varOther                // bool, object, array (outside "in")
)

// VarCond is one lua-resty-expr comparison compiled: an operator and its
// right-hand value, tested against a request variable's value. It is the
// one evaluation of the operators, which the route vars (worker/router)
// and the plugins taking expressions (plugins/internal/varexpr) share;
// the variable itself, and "!", are theirs. Regular expressions and CIDRs
// are compiled once, in CompileVarCond. A VarCond is read-only after
// CompileVarCond and safe for concurrent use; Eval does not allocate.
type VarCond struct {
	op    VarOp
	kind  varKind
	str   string
	num   float64
	numOK bool // num holds tonumber(value) for the ordering operators
	list  []string
	re    *regexp.Regexp
	nets  []netip.Prefix
}

// CompileVarCond compiles op with raw, its JSON value (empty for none).
// Operators: == ~= > >= < <= (numeric when the value is a number, or a
// string holding one, for the ordering operators, as lua-resty-expr
// does), ~~ (RE2 regular expression, unanchored), ~* (the same,
// case-insensitive), in (the strings of an array), has, ipmatch (an
// address or CIDR, or an array of them). Errors are *VarCondError.
func CompileVarCond(op VarOp, raw []byte) (VarCond, error) {
	c := VarCond{op: op}
	var val any
	if len(raw) != 0 {
		if err := json.Unmarshal(raw, &val); err != nil {
			return VarCond{}, &VarCondError{ErrVarValue, "value: " + err.Error()}
		}
	}
	switch x := val.(type) {
	case nil:
		c.kind = varNull
	case string:
		c.kind, c.str = varStr, x
	case float64:
		c.kind, c.num = varNum, x
	default:
		c.kind = varOther
	}
	switch op {
	case VarOpGt, VarOpGe, VarOpLt, VarOpLe:
		switch c.kind {
		case varNum:
			c.numOK = true
		case varStr:
			c.num, c.numOK = LuaNumber([]byte(c.str))
		}
	case VarOpMatch, VarOpMatchI:
		if c.kind != varStr {
			return VarCond{}, &VarCondError{ErrVarRegexp, op.String() + " needs a string pattern"}
		}
		pat := c.str
		if op == VarOpMatchI {
			pat = "(?i)" + pat
		}
		re, err := regexp.Compile(pat)
		if err != nil {
			return VarCond{}, &VarCondError{ErrVarRegexp, err.Error()}
		}
		c.re = re
	case VarOpIn:
		if arr, ok := val.([]any); ok {
			for _, a := range arr {
				if s, ok := a.(string); ok {
					c.list = append(c.list, s)
				}
			}
		}
	case VarOpIPMatch:
		var pats []string
		switch x := val.(type) {
		case string:
			pats = []string{x}
		case []any:
			for _, a := range x {
				s, ok := a.(string)
				if !ok {
					return VarCond{}, &VarCondError{ErrVarIPPattern, fmt.Sprint(a)}
				}
				pats = append(pats, s)
			}
		default:
			return VarCond{}, &VarCondError{ErrVarIPPattern, "ipmatch needs a string or an array"}
		}
		for _, s := range pats {
			p, ok := ParseIPOrCIDR(s)
			if !ok {
				return VarCond{}, &VarCondError{ErrVarIPPattern, fmt.Sprintf("%q", s)}
			}
			c.nets = append(c.nets, p)
		}
	}
	return c, nil
}

// Op returns the condition's operator.
func (c *VarCond) Op() VarOp { return c.op }

// Eval reports whether the condition holds for a variable whose value is
// l, ok=false when the variable is unset: nil to lua-resty-expr, which
// equals only null and for which no ordering, pattern or list holds.
// ipmatch reads l as an address (an IPv6 one also in brackets, as headers
// carry it). It does not allocate.
func (c *VarCond) Eval(l []byte, ok bool) bool {
	switch c.op {
	case VarOpEq:
		switch c.kind {
		case varNull:
			return !ok
		case varStr:
			return ok && string(l) == c.str
		case varNum:
			n, isNum := luaNumberOK(l, ok)
			return isNum && n == c.num
		}
		return false
	case VarOpNe:
		switch c.kind {
		case varNull:
			return ok
		case varStr:
			return !ok || string(l) != c.str
		case varNum:
			n, isNum := luaNumberOK(l, ok)
			return !isNum || n != c.num
		}
		return true
	case VarOpGt, VarOpGe, VarOpLt, VarOpLe:
		if !c.numOK {
			return false
		}
		n, isNum := luaNumberOK(l, ok)
		if !isNum {
			return false
		}
		switch c.op {
		case VarOpGt:
			return n > c.num
		case VarOpGe:
			return n >= c.num
		case VarOpLt:
			return n < c.num
		}
		return n <= c.num
	case VarOpMatch, VarOpMatchI:
		return ok && c.re.Match(l)
	case VarOpIn:
		if !ok {
			return false
		}
		for _, s := range c.list {
			if string(l) == s {
				return true
			}
		}
		return false
	case VarOpIPMatch:
		if !ok {
			return false
		}
		if len(l) > 2 && l[0] == '[' && l[len(l)-1] == ']' {
			l = l[1 : len(l)-1]
		}
		a, valid := ParseIP(l)
		return valid && c.MatchAddr(a.Unmap())
	}
	return false // has: true only for table values, which variables never are
}

// MatchAddr reports whether a (unmapped) lies in one of an ipmatch
// condition's addresses and CIDRs: Eval for an address already parsed,
// such as the connection's. It does not allocate.
func (c *VarCond) MatchAddr(a netip.Addr) bool {
	for _, p := range c.nets {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

func luaNumberOK(b []byte, ok bool) (float64, bool) {
	if !ok {
		return 0, false
	}
	return LuaNumber(b)
}
