package responserewrite

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/netip"
	"regexp"
	"strconv"
	"strings"

	"coregate/admin/spec"
	"coregate/httpvar"
	"coregate/plugins"
)

// varsExpr is vars compiled: lua-resty-expr's conditions, every one of
// which must hold, read against the response in header_filter. It is
// only read once built.
//
// The route's vars (worker/router) are evaluated over the worker's parsed
// request, which a plugin cannot import; these are the same rules over
// plugins.Ctx, with $status read from the response (Ctx.Status), as
// APISIX's ngx.var.status is in header_filter.
type varsExpr struct {
	conds []cond
}

type cond struct {
	v      httpvar.Var
	status bool // $status
	not    bool
	op     spec.VarOp
	null   bool // the value is absent or null
	isNum  bool // the value is a number (num), else a string (str)
	str    string
	num    float64
	numOK  bool // num holds tonumber(value) for the ordering operators
	list   []string
	re     *regexp.Regexp
	nets   []netip.Prefix
	other  bool // a value of another type: == never holds
}

// statusText is the text of each status 100 to 999, for $status as a
// string (~~, in) without formatting it per response.
var statusText = func() [][]byte {
	t := make([][]byte, 900)
	for i := range t {
		t[i] = strconv.AppendInt(nil, int64(i+100), 10)
	}
	return t
}()

// compileVars reads vars; the error is lua-resty-expr's text.
func compileVars(raw json.RawMessage) (*varsExpr, error) {
	var vs spec.Vars
	if err := json.Unmarshal(raw, &vs); err != nil {
		return nil, err
	}
	if p := vs.Problem(); p != "" {
		return nil, errors.New(p)
	}
	x := &varsExpr{}
	for i := range vs {
		c, err := compileCond(&vs[i])
		if err != nil {
			return nil, err
		}
		x.conds = append(x.conds, c)
	}
	return x, nil
}

func compileCond(e *spec.VarExpr) (cond, error) {
	raw := bytes.TrimSpace(e.Value)
	op, known := spec.ParseVarOp(strings.ToLower(e.Op))
	c := cond{v: httpvar.Parse(e.Var), status: e.Var == "status", not: e.Not, op: op}
	if !known {
		// [var, value]: [var, "==", value].
		c.op, c.str = spec.VarOpEq, e.Op
		return c, nil
	}
	var val any
	if len(raw) != 0 {
		if err := json.Unmarshal(raw, &val); err != nil {
			return c, err
		}
	}
	switch x := val.(type) {
	case nil:
		c.null = true
	case string:
		c.str = x
	case float64:
		c.isNum, c.num = true, x
	default:
		c.other = true
	}
	switch op {
	case spec.VarOpGt, spec.VarOpGe, spec.VarOpLt, spec.VarOpLe:
		if c.isNum {
			c.numOK = true
		} else if !c.null && !c.other {
			c.num, c.numOK = spec.LuaNumber([]byte(c.str))
		}
	case spec.VarOpMatch, spec.VarOpMatchI:
		pat := c.str
		if op == spec.VarOpMatchI {
			pat = "(?i)" + pat
		}
		re, err := regexp.Compile(pat)
		if err != nil {
			return c, err
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
				if s, ok := a.(string); ok {
					pats = append(pats, s)
				}
			}
		}
		for _, s := range pats {
			p, ok := spec.ParseIPOrCIDR(s)
			if !ok {
				return c, errors.New("invalid ip address: " + s)
			}
			c.nets = append(c.nets, p)
		}
	}
	return c, nil
}

// eval reports whether every condition holds for the response of c; it
// does not allocate, and is safe for concurrent use.
func (x *varsExpr) eval(c plugins.Ctx) bool {
	for i := range x.conds {
		if x.conds[i].eval(c) == x.conds[i].not {
			return false
		}
	}
	return true
}

func (k *cond) eval(c plugins.Ctx) bool {
	var l []byte
	var num float64
	var isNum bool
	if k.status {
		// $status: its number, without the text.
		s := c.Status()
		num, isNum = float64(s), true
		if s >= 100 && s < 1000 {
			l = statusText[s-100]
		}
	} else {
		l = c.Var(k.v)
		if l != nil {
			num, isNum = spec.LuaNumber(l)
		}
	}
	ok := l != nil
	switch k.op {
	case spec.VarOpEq:
		switch {
		case k.null:
			return !ok
		case k.isNum:
			return isNum && num == k.num
		case k.other:
			return false
		}
		return ok && string(l) == k.str
	case spec.VarOpNe:
		switch {
		case k.null:
			return ok
		case k.isNum:
			return !isNum || num != k.num
		case k.other:
			return true
		}
		return !ok || string(l) != k.str
	case spec.VarOpGt, spec.VarOpGe, spec.VarOpLt, spec.VarOpLe:
		if !k.numOK || !isNum {
			return false
		}
		switch k.op {
		case spec.VarOpGt:
			return num > k.num
		case spec.VarOpGe:
			return num >= k.num
		case spec.VarOpLt:
			return num < k.num
		}
		return num <= k.num
	case spec.VarOpMatch, spec.VarOpMatchI:
		return ok && k.re.Match(l)
	case spec.VarOpIn:
		for _, s := range k.list {
			if ok && string(l) == s {
				return true
			}
		}
		return false
	case spec.VarOpIPMatch:
		if !ok {
			return false
		}
		a, err := netip.ParseAddr(string(l))
		if err != nil {
			return false
		}
		a = a.Unmap()
		for _, p := range k.nets {
			if p.Contains(a) {
				return true
			}
		}
		return false
	}
	return false // has: true only for table values, which variables never are
}
