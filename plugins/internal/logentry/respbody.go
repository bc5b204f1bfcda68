package logentry

import (
	"encoding/json"
	"fmt"

	"coregate/plugins"
	"coregate/plugins/internal/varexpr"
)

// RespBody is a logger's include_resp_body, include_resp_body_expr and
// max_resp_body_bytes, built: whether an entry has response.body, and
// how much of it. An instance keeps one per event loop: Of evaluates the
// expression with an Evaluator of its own, which is not safe for
// concurrent use.
type RespBody struct {
	max  int64 // 0: include_resp_body is off
	expr *varexpr.Expr
	ev   varexpr.Evaluator
}

// DefaultMaxRespBodyBytes is max_resp_body_bytes's default, APISIX's.
const DefaultMaxRespBodyBytes = 524288

// NewRespBody builds include (include_resp_body), expr
// (include_resp_body_expr, nil when not given) and max
// (max_resp_body_bytes). An expression that does not compile is refused
// with APISIX's message.
func NewRespBody(include bool, expr json.RawMessage, max int64) (RespBody, error) {
	var r RespBody
	if expr != nil {
		e, err := varexpr.Compile(expr)
		if err != nil {
			return r, fmt.Errorf("failed to validate the 'include_resp_body_expr' expression: %v", err)
		}
		r.expr = &e
	}
	if include {
		r.max = max
	}
	// The expression runs in APISIX's body_filter, where $status is the
	// response's.
	r.ev.ResponseStatus = true
	return r, nil
}

// Limit is how much of the response body the logger reads (the
// plugins.ResponseBodyReader's limit): max_resp_body_bytes when
// include_resp_body is on, else 0.
func (r *RespBody) Limit() int64 { return r.max }

// Of is the response.body of the entry of c's request: the start of the
// body the client got, up to max_resp_body_bytes, when include_resp_body
// is on and include_resp_body_expr, if any, holds; nil otherwise, and for
// an empty body. It does not allocate.
func (r *RespBody) Of(c plugins.Ctx) []byte {
	if r.max == 0 || r.expr != nil && !r.ev.Eval(c, r.expr) {
		return nil
	}
	b := c.ResponseBody()
	if int64(len(b)) > r.max {
		b = b[:r.max]
	}
	return b
}
