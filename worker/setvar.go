package worker

import "coregate/httpvar"

// SetVar implements plugins.Ctx: the value is copied into the exchange's
// buffer of its kind (exchangeBufs.setVars), which keeps its capacity
// from one exchange to the next, and marked set until the exchange ends.
func (x *pluginCtx) SetVar(v httpvar.Var, value []byte) {
	if !v.Kind.Settable() {
		return
	}
	cc := x.cc()
	i := v.Kind - httpvar.OTelTraceparent
	cc.setVars[i] = append(cc.setVars[i][:0], value...)
	cc.plugin.varsSet |= 1 << i
}

// setVar is the value of a settable variable a plugin set; ok false when
// none did in this exchange.
func (cc *clientConn) setVar(k httpvar.Kind) ([]byte, bool) {
	i := k - httpvar.OTelTraceparent
	if cc.plugin.varsSet&(1<<i) == 0 {
		return nil, false
	}
	return cc.setVars[i], true
}
