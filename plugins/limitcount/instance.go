package limitcount

import (
	"strconv"

	"coregate/httpvar"
	"coregate/plugins"
	"coregate/plugins/internal/freelist"
	"coregate/plugins/internal/redis"
	"coregate/plugins/internal/vartpl"
)

const (
	keyVar = iota
	keyCombination
	keyConstant
	// keyRule is a rule's key: a template that must resolve at least one
	// variable, else the rule does not apply to the request.
	keyRule
)

// The response headers (APISIX's plugin metadata defaults).
const (
	limitHeader     = "X-RateLimit-Limit"
	remainingHeader = "X-RateLimit-Remaining"
	resetHeader     = "X-RateLimit-Reset"
)

// failBody is APISIX's answer when the limiter itself fails.
var failBody = []byte(`{"error_msg":"failed to limit count"}` + "\n")

// instance is one built configuration. Everything but the scratch buffers
// is set by Build and only read afterwards.
//
// key, num and tpl are scratch buffers of the Access call in progress: an
// instance runs on one event loop, one request at a time, and nothing
// keeps them past the call (the counter table copies a key it keeps, the
// Ctx copies header values).
type instance struct {
	counters plugins.Counters
	// rc is the Redis of the redis and redis-cluster policies (nil:
	// local, in counters); free holds the instance's idle calls to it.
	rc   *redis.Client
	free freelist.List[call]
	// rules are the limits: one (count, time_window, key), or the
	// configuration's rules.
	rules []rule
	// prefix, then the route's id and confHash (no group), or the group
	// (prefix holds it), then the rule's tag and the key's value: the
	// counter's key.
	prefix, confHash []byte
	rejectedCode     int
	rejectedBody     []byte // nil: the gateway's page for rejectedCode
	degrade, headers bool

	key, num, tpl []byte
}

// rule is one limit.
type rule struct {
	// count and window (seconds) are the limit, unless countTpl or
	// windowTpl resolve them per request.
	count, window       int64
	countTpl, windowTpl *vartpl.Template
	keyType             int
	keyVar              httpvar.Var
	keyTpl              vartpl.Template
	constKey            []byte
	// tag sets the rule's counters apart from the other rules' (empty
	// without rules).
	tag []byte
	// The response headers' names (a rule's have its prefix).
	limitH, remainingH, resetH string
	// countArg and windowArg are count and window as the Redis script's
	// arguments.
	countArg, windowArg string
}

var _ plugins.AccessPhase = (*instance)(nil)

// Access implements plugins.AccessPhase: count the request against each
// rule that applies, and reject it past a limit.
func (in *instance) Access(c plugins.Ctx) {
	if in.rc != nil {
		in.redisFrom(c, 0, 0)
		return
	}
	applied := 0
	for i := range in.rules {
		r := &in.rules[i]
		k, ok := in.keyOf(c, r)
		if !ok {
			continue // a rule whose key does not resolve
		}
		applied++
		count, window := r.count, r.window
		if r.countTpl != nil || r.windowTpl != nil {
			if count, ok = in.resolveLimit(c, r.countTpl, count); !ok {
				in.fail(c, nil)
				return
			}
			if window, ok = in.resolveLimit(c, r.windowTpl, window); !ok {
				in.fail(c, nil)
				return
			}
		}
		now := c.Now()
		ctr, until := in.counters.Counter(k, now, now+window*1e9)
		if ctr == nil {
			in.fail(c, failBody)
			return
		}
		remaining := count - ctr.Add(1)
		if remaining < 0 {
			if in.headers {
				in.setHeaders(c, r, count, 0, until-now)
			}
			c.Exit(in.rejectedCode, in.rejectedBody)
			return
		}
		if in.headers {
			in.setHeaders(c, r, count, remaining, until-now)
		}
	}
	if applied == 0 {
		// No rule applies: APISIX's "failed to get rate limit rules".
		in.fail(c, nil)
	}
}

// keyOf builds the counter key of r for this request into in.key; false
// when r is a rule whose key resolves nothing.
func (in *instance) keyOf(c plugins.Ctx, r *rule) ([]byte, bool) {
	k := append(in.key[:0], in.prefix...)
	if in.confHash != nil {
		k = append(append(k, c.RouteID()...), in.confHash...)
	}
	k = append(k, r.tag...)
	n := len(k)
	switch r.keyType {
	case keyConstant:
		k = append(k, r.constKey...)
	case keyRule:
		var resolved int
		if k, resolved = r.keyTpl.Render(k, c); resolved == 0 {
			in.key = k
			return nil, false
		}
		in.key = k
		return k, true
	case keyCombination:
		var resolved int
		if k, resolved = r.keyTpl.Render(k, c); resolved == 0 {
			k = k[:n]
		}
	default:
		k = append(k, c.Var(r.keyVar)...)
	}
	if len(k) == n {
		// No value: the client's address, as APISIX.
		k = append(k, c.Var(remoteAddr)...)
	}
	in.key = k
	return k, true
}

// fail is APISIX's answer to a limiter that cannot count: the request
// passes with allow_degradation, else 500 with body (nil: the gateway's
// page).
func (in *instance) fail(c plugins.Ctx, body []byte) {
	if !in.degrade {
		c.Exit(500, body)
	}
}

// resolveLimit resolves a count or time_window given as a string: a
// positive integer, as APISIX's resolve_var and tonumber take it.
func (in *instance) resolveLimit(c plugins.Ctx, t *vartpl.Template, static int64) (int64, bool) {
	if t == nil {
		return static, true
	}
	in.tpl, _ = t.Render(in.tpl[:0], c)
	return parseLimit(in.tpl)
}

func (in *instance) setHeaders(c plugins.Ctx, r *rule, limit, remaining, resetNs int64) {
	in.num = strconv.AppendInt(in.num[:0], limit, 10)
	c.SetResponseHeader(r.limitH, in.num)
	in.num = strconv.AppendInt(in.num[:0], remaining, 10)
	c.SetResponseHeader(r.remainingH, in.num)
	in.num = appendReset(in.num[:0], resetNs)
	c.SetResponseHeader(r.resetH, in.num)
}

// appendReset writes the seconds left in a window floored to hundredths,
// as APISIX prints math.floor(reset * 100) / 100: "60", "59.5", "0.07".
func appendReset(b []byte, ns int64) []byte {
	if ns < 0 {
		ns = 0
	}
	h := ns / 1e7
	b = strconv.AppendInt(b, h/100, 10)
	switch f := h % 100; {
	case f == 0:
	case f%10 == 0:
		b = append(b, '.', byte('0'+f/10))
	default:
		b = append(b, '.', byte('0'+f/10), byte('0'+f%10))
	}
	return b
}

// parseLimit reads a resolved count or time_window: a positive integer up
// to 2^53-1 (a decimal with a zero fraction, surrounding spaces allowed).
func parseLimit(b []byte) (int64, bool) {
	for len(b) > 0 && isSpace(b[0]) {
		b = b[1:]
	}
	for len(b) > 0 && isSpace(b[len(b)-1]) {
		b = b[:len(b)-1]
	}
	var n int64
	i := 0
	for ; i < len(b) && '0' <= b[i] && b[i] <= '9'; i++ {
		n = n*10 + int64(b[i]-'0')
		if n > 1<<53-1 {
			return 0, false
		}
	}
	if i == 0 {
		return 0, false
	}
	if i < len(b) {
		if b[i] != '.' {
			return 0, false
		}
		for i++; i < len(b); i++ {
			if b[i] != '0' {
				return 0, false
			}
		}
	}
	return n, n > 0
}

func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'
}

// remoteAddr is the key of last resort, as APISIX's.
var remoteAddr = httpvar.Var{Kind: httpvar.RemoteAddr}
