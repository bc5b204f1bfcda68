package logentry

import (
	"encoding/json"
	"fmt"

	"coregate/plugins"
	"coregate/plugins/internal/varexpr"
)

// Body is one of a logger's two body options, built: include_req_body,
// include_req_body_expr and max_req_body_bytes (NewReqBody), or
// include_resp_body, include_resp_body_expr and max_resp_body_bytes
// (NewRespBody): whether an entry has the request's or the response's
// body, and how much of it. The zero Body includes no body. A Body is
// read-only once built but for the evaluator Of runs its expression
// with, which is not safe for concurrent use: an instance keeps its own
// and uses them on its one event loop.
type Body struct {
	max  int64         // 0: the entry has no body
	expr *varexpr.Expr // nil: every request's
	resp bool          // the response's body (Ctx.ResponseBody), else the request's (Ctx.RequestBody)
	ev   varexpr.Evaluator
}

// DefaultMaxRespBodyBytes is max_resp_body_bytes's default, APISIX's.
const DefaultMaxRespBodyBytes = 524288

// NewReqBody builds include_req_body (include), include_req_body_expr
// (expr, nil when not given) and max_req_body_bytes (max, at least 1):
// the zero Body without include_req_body, whose expression is then not
// compiled. An expression that does not compile is refused with
// varexpr's error (the loggers' Check gave APISIX's message before).
func NewReqBody(include bool, expr json.RawMessage, max int) (Body, error) {
	if !include {
		return Body{}, nil
	}
	b := Body{max: int64(max)}
	if b.max < 1 {
		b.max = 1
	}
	if expr != nil {
		e, err := varexpr.Compile(expr)
		if err != nil {
			return Body{}, err
		}
		b.expr = &e
	}
	return b, nil
}

// NewRespBody builds include (include_resp_body), expr
// (include_resp_body_expr, nil when not given) and max
// (max_resp_body_bytes). An expression that does not compile is refused
// with APISIX's message, include_resp_body or not.
func NewRespBody(include bool, expr json.RawMessage, max int64) (Body, error) {
	b := Body{resp: true}
	if expr != nil {
		e, err := varexpr.Compile(expr)
		if err != nil {
			return Body{}, fmt.Errorf("failed to validate the 'include_resp_body_expr' expression: %v", err)
		}
		b.expr = &e
	}
	if include {
		b.max = max
	}
	// The expression runs in APISIX's body_filter, where $status is the
	// response's.
	b.ev.ResponseStatus = true
	return b, nil
}

// Limit is how much of the body the logger reads, 0 for none: for the
// request's, the plugins.BodyTee limit (the worker copies that much of
// each body as it goes upstream, for the log phase; the body itself goes
// on as it would without the logger, whatever its length); for the
// response's, the plugins.ResponseBodyReader's.
func (b *Body) Limit() int64 { return b.max }

// Of is the body of the entry of c's request (log-util's
// get_request_body, or response.body): nil when b includes none,
// include_*_body_expr, if any, does not hold or the body is empty, else
// its first Limit bytes, as much of them as the worker copied (all of
// them, unless the exchange ended before the body did). The bytes are
// Ctx.RequestBody's or Ctx.ResponseBody's, valid during the phase call.
// It does not allocate.
func (b *Body) Of(c plugins.Ctx) []byte {
	if b.max == 0 || b.expr != nil && !b.ev.Eval(c, b.expr) {
		return nil
	}
	var body []byte
	if b.resp {
		body = c.ResponseBody()
	} else {
		body = c.RequestBody()
	}
	if int64(len(body)) > b.max {
		body = body[:b.max]
	}
	return body
}

// Logger is a logger's instance with the default entry: its log phase,
// and what it reads of the response for the entry.
type Logger interface {
	plugins.LogPhase
	plugins.ResponseHeadReader
	plugins.ResponseBodyReader
}

// WithReqBody is in, a logger's instance, as a plugins.BodyTee when req
// includes the request's body (include_req_body), so that the worker
// copies the first max_req_body_bytes of the body for the log phase as
// the body streams upstream; else in itself, which copies none.
func WithReqBody(in Logger, req *Body) plugins.Instance {
	if req.Limit() == 0 {
		return in
	}
	return &teeLogger{Logger: in, limit: req.Limit()}
}

// teeLogger is a Logger with include_req_body (WithReqBody).
type teeLogger struct {
	Logger
	limit int64
}

// TeeLimit implements plugins.BodyTee.
func (t *teeLogger) TeeLimit() int64 { return t.limit }
