// Package varexpr is lua-resty-expr's expressions as APISIX's plugins take
// them (fault-injection's vars, the loggers' match, response-rewrite's
// and traffic-split's vars): lists of [var, op, value] rules, checked with
// admin/spec's messages and compiled and evaluated by the top-level
// varexpr package, the route vars' evaluator, against a request's
// variables (plugins.Ctx.Var) without allocating. Operators: == ~= > >=
// < <= (by number where the value is one), ~~ and ~* (Go regexp,
// unanchored), in, has, ipmatch, each negated by "!". A variable that is
// unset (Ctx.Var nil) is nil to lua-resty-expr: it equals only null, and
// no ordering or pattern holds for it.
//
// A compiled Expr or Any is read-only and safe for concurrent use; an
// Evaluator, which adapts a plugins.Ctx to varexpr.VarSource, is not: an
// instance keeps its own and uses it on its one event loop.
package varexpr

import (
	"encoding/json"
	"errors"
	"strconv"

	"coregate/admin/spec"
	"coregate/httpvar"
	"coregate/plugins"
	"coregate/varexpr"
)

// Expr is one expression: rules that must all hold. The zero Expr holds
// for every request.
type Expr struct {
	x varexpr.Expr
}

// Any is a list of expressions, as fault-injection's vars_match reads it:
// it holds when one of its expressions does.
type Any []Expr

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

// Compile compiles raw, one expression: a JSON array of rules. The error
// is lua-resty-expr's message (spec.Vars.Problem).
func Compile(raw json.RawMessage) (Expr, error) {
	var vs spec.Vars
	if err := json.Unmarshal(raw, &vs); err != nil {
		return Expr{}, err
	}
	if msg := vs.Problem(); msg != "" {
		return Expr{}, errors.New(msg)
	}
	return CompileVars(vs)
}

// CompileVars compiles vs, rules already checked (spec.Vars.Problem, or
// Check, which gives a route's message): for a plugin that reads them
// itself. Its errors are varexpr.Compile's.
func CompileVars(vs spec.Vars) (Expr, error) {
	x, err := varexpr.Compile(vs)
	if err != nil {
		return Expr{}, err
	}
	return Expr{x}, nil
}

// Evaluator evaluates expressions against the request of a plugins.Ctx:
// it is the varexpr.Request (and VarSource) over the Ctx, set for the
// length of one Eval call and cleared after it, so that it keeps nothing
// of the request. Its zero value is ready for use. It is not safe for
// concurrent use: an instance keeps one and uses it on its one event
// loop. Eval does not allocate when Ctx.Var does not.
type Evaluator struct {
	// ResponseStatus makes $status the response's status (Ctx.Status), as
	// ngx.var.status is from header_filter on; otherwise $status is
	// Ctx.Var's, as every other variable.
	ResponseStatus bool

	req varexpr.Request
	src ctxSource
}

// ctxSource reads an expression's variables from the request's Ctx.
type ctxSource struct {
	c      plugins.Ctx
	status bool
}

var uriVar = httpvar.Parse("uri")

// statusText is the text of each status 100 to 999, for $status read from
// the response, without formatting it per response.
var statusText = func() [][]byte {
	t := make([][]byte, 900)
	for i := range t {
		t[i] = strconv.AppendInt(nil, int64(i+100), 10)
	}
	return t
}()

// Lookup implements varexpr.VarSource: a variable is unset when Var gives
// nil (and $status, read from the response, outside 100 to 999).
func (s *ctxSource) Lookup(v *httpvar.Var) ([]byte, bool) {
	if s.status && v.Kind == httpvar.Status {
		st := s.c.Status()
		if st < 100 || st >= 1000 {
			return nil, false
		}
		return statusText[st-100], true
	}
	b := s.c.Var(*v)
	return b, b != nil
}

func (ev *Evaluator) begin(c plugins.Ctx) {
	ev.src.c, ev.src.status = c, ev.ResponseStatus
	ev.req.Vars = &ev.src
}

func (ev *Evaluator) end() { ev.src.c, ev.req.Path = nil, nil }

// eval evaluates e, $uri (Request.Path) read from the Ctx the first time
// an expression needs it.
func (ev *Evaluator) eval(e *Expr) bool {
	if e.x.UsesURI() && ev.req.Path == nil {
		ev.req.Path = ev.src.c.Var(uriVar)
	}
	return e.x.Eval(&ev.req)
}

// Eval reports whether every rule of e holds for the request of c.
func (ev *Evaluator) Eval(c plugins.Ctx, e *Expr) bool {
	if e.x.Len() == 0 {
		return true
	}
	ev.begin(c)
	ok := ev.eval(e)
	ev.end()
	return ok
}

// EvalAny reports whether one of a's expressions holds for the request of
// c; false for none.
func (ev *Evaluator) EvalAny(c plugins.Ctx, a Any) bool {
	if len(a) == 0 {
		return false
	}
	ev.begin(c)
	ok := false
	for i := range a {
		if ok = ev.eval(&a[i]); ok {
			break
		}
	}
	ev.end()
	return ok
}
