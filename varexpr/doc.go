// Package varexpr is lua-resty-expr's condition lists as APISIX uses them:
// a route's vars, and traffic-split's match rules. Compile turns a
// spec.Vars into an Expr once (regular expressions and CIDRs compiled
// then); Eval reads a request's variables through a VarSource the caller
// implements (the worker's parsed request, a plugin's Ctx), each name
// resolved by httpvar.Parse at Compile. An Expr is immutable and safe for
// concurrent use; Eval does not allocate when the VarSource does not, and
// keeps nothing of the request after it returns.
package varexpr
