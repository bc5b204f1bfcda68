package spec

import (
	"regexp"
	"strings"
)

// VarOp is one of lua-resty-expr's comparison operators: the one table of
// them, which validation checks against and the worker compiles from.
type VarOp uint8

// The operators, by their written names.
const (
	VarOpEq      VarOp = iota + 1 // ==
	VarOpNe                       // ~=
	VarOpGt                       // >
	VarOpGe                       // >=
	VarOpLt                       // <
	VarOpLe                       // <=
	VarOpMatch                    // ~~: regular expression
	VarOpMatchI                   // ~*: regular expression, case-insensitive
	VarOpIn                       // in
	VarOpHas                      // has
	VarOpIPMatch                  // ipmatch
)

var varOps = map[string]VarOp{
	"==": VarOpEq, "~=": VarOpNe, ">": VarOpGt, ">=": VarOpGe, "<": VarOpLt, "<=": VarOpLe,
	"~~": VarOpMatch, "~*": VarOpMatchI, "in": VarOpIn, "has": VarOpHas, "ipmatch": VarOpIPMatch,
}

// ParseVarOp returns the operator op (lower case) names.
func ParseVarOp(op string) (VarOp, bool) {
	o, ok := varOps[op]
	return o, ok
}

// IsVarOp reports whether op (lower case) is a lua-resty-expr operator.
func IsVarOp(op string) bool {
	_, ok := varOps[op]
	return ok
}

// MarshalJSON writes the expressions as they were written (Source), or
// built from their fields when they were made in code.
func (vs Vars) MarshalJSON() ([]byte, error) {
	b := []byte{'['}
	for i := range vs {
		if i > 0 {
			b = append(b, ',')
		}
		b = vs[i].appendJSON(b)
	}
	return append(b, ']'), nil
}

func (e *VarExpr) appendJSON(b []byte) []byte {
	if len(e.Source) > 0 {
		if v, err := parseJSON(e.Source); err == nil {
			return appendJSON(b, v)
		}
	}
	b = append(b, '[')
	b = appendJSONString(b, e.Var)
	if e.Not {
		b = append(b, `,"!"`...)
	}
	b = append(b, ',')
	b = appendJSONString(b, e.Op)
	if len(e.Value) > 0 {
		if v, err := parseJSON(e.Value); err == nil {
			b = append(b, ',')
			b = appendJSON(b, v)
		}
	}
	return append(b, ']')
}

// UnmarshalJSON reads a lua-resty-expr list. Each expression keeps its
// written form in Source and has its fields filled as lua-resty-expr reads
// them (operator in lower case; the two-item form [var, value] read as
// [var, "==", value]). It fails only when the value is not an array;
// Validate reports malformed expressions with APISIX's messages.
func (vs *Vars) UnmarshalJSON(b []byte) error {
	v, err := parseJSON(b)
	if err != nil {
		return err
	}
	if v.kind != jArray {
		return (&problem{msg: "wrong type: expected array, got " + v.luaType()}).in("vars").schemaErr()
	}
	*vs = varsFromJSON(v)
	return nil
}

func varsFromJSON(v *jval) Vars {
	out := make(Vars, len(v.arr))
	for i, e := range v.arr {
		x, _ := compileVarExpr(e)
		x.Source = appendJSON(nil, e)
		out[i] = x
	}
	return out
}

var logicOps = map[string]bool{"AND": true, "OR": true, "!AND": true, "!OR": true}

// compileVarExpr reads one [var, op, val] / [var, "!", op, val] expression
// as lua-resty-expr's compile_expr does and returns its error text.
func compileVarExpr(e *jval) (VarExpr, string) {
	var x VarExpr
	if e.kind != jArray {
		return x, "rule should be wrapped inside brackets"
	}
	if len(e.arr) == 0 {
		return x, "rule too short"
	}
	switch first := e.arr[0]; {
	case first.kind == jArray:
		return x, "nested expressions are not supported yet"
	case first.kind == jString && logicOps[strings.ToUpper(first.s)]:
		return x, "logical operator '" + first.s + "' is not supported yet"
	}
	var lv, op, rv *jval
	if len(e.arr) == 4 {
		if e.arr[1].kind != jString || e.arr[1].s != "!" {
			return x, "bad 'not' expression"
		}
		x.Not = true
		lv, op, rv = e.arr[0], e.arr[2], e.arr[3]
	} else {
		lv = e.arr[0]
		if len(e.arr) > 1 {
			op = e.arr[1]
		}
		if len(e.arr) > 2 {
			rv = e.arr[2]
		}
	}
	opName := ""
	if op != nil {
		switch op.kind {
		case jString:
			opName = strings.ToLower(op.s)
		case jNumber:
			opName = op.s
		default:
			return x, "invalid expression"
		}
	}
	if rv == nil && !IsVarOp(opName) {
		if op == nil {
			return x, "invalid expression"
		}
		// [var, value]: kept by lua-resty-expr for compatibility; the value
		// is the lower-cased second item.
		rv = &jval{kind: jString, s: opName}
		opName = "=="
	}
	if lv.kind != jString || lv.s == "" {
		return x, "invalid expression"
	}
	x.Var = lv.s
	x.Op = opName
	if rv != nil {
		x.Value = appendJSON(nil, rv)
	}
	if !IsVarOp(opName) {
		return x, "invalid operator '" + opName + "'"
	}
	return x, checkVarValue(opName, rv)
}

// checkVarValue checks the values lua-resty-expr (or the worker) compiles
// ahead of time: ipmatch addresses and ~~ / ~* regular expressions.
func checkVarValue(op string, rv *jval) string {
	switch op {
	case "ipmatch":
		if rv == nil || rv.kind == jString && rv.s == "" {
			return "invalid ip address"
		}
		list := []*jval{rv}
		if rv.kind == jArray {
			list = rv.arr
		}
		if len(list) == 0 {
			return "invalid ip address"
		}
		for _, a := range list {
			if a.kind != jString || !ValidIPOrCIDR(a.s) {
				s := a.s
				if a.kind != jString {
					s = string(appendJSON(nil, a))
				}
				return "invalid ip address: " + s
			}
		}
	case "~~", "~*":
		if rv == nil || rv.kind != jString {
			return "operator '" + op + "' needs a string regular expression"
		}
		if _, err := regexp.Compile(rv.s); err != nil {
			return "invalid regular expression '" + rv.s + "': " + err.Error()
		}
	}
	return ""
}

// validate checks every expression; expressions read from JSON are checked
// from their written form.
func (vs Vars) validate() *ValidationError {
	for i := range vs {
		e := &vs[i]
		var msg string
		if len(e.Source) > 0 {
			v, err := parseJSON(e.Source)
			if err != nil {
				msg = "invalid expression"
			} else {
				_, msg = compileVarExpr(v)
			}
		} else {
			msg = e.check()
		}
		if msg != "" {
			return &ValidationError{
				Field: "vars[" + itoa(i) + "]",
				Msg:   "failed to validate the 'vars' expression: " + msg,
			}
		}
	}
	return nil
}

// Problem is lua-resty-expr's error text for the first malformed
// expression ("rule too short"), "" when all are well formed: for a
// plugin's vars (response-rewrite's), which APISIX checks with expr.new.
func (vs Vars) Problem() string {
	if e := vs.validate(); e != nil {
		return strings.TrimPrefix(e.Msg, "failed to validate the 'vars' expression: ")
	}
	return ""
}

// check validates an expression built in code (no Source).
func (e *VarExpr) check() string {
	if e.Var == "" {
		return "invalid expression"
	}
	if !IsVarOp(e.Op) {
		return "invalid operator '" + e.Op + "'"
	}
	var rv *jval
	if len(e.Value) > 0 {
		v, err := parseJSON(e.Value)
		if err != nil {
			return "invalid expression"
		}
		rv = v
	}
	return checkVarValue(e.Op, rv)
}
