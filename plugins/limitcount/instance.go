package limitcount

import (
	"strconv"

	"coregate/plugins"
	"coregate/plugins/internal/freelist"
	"coregate/plugins/internal/limit"
	"coregate/plugins/internal/redis"
	"coregate/plugins/internal/vartpl"
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
	// sync is sync_interval's local counting of the Redis policies (nil:
	// every request counted in Redis).
	sync *syncer
	// rules are the limits: one (count, time_window, key), or the
	// configuration's rules.
	rules []rule
	// space (the route's and the configuration's, or the group's), then
	// the rule's tag and the key's value: the counter's key.
	space   limit.Space
	answer  limit.Answer
	headers bool

	key, num, tpl []byte
}

// rule is one limit.
type rule struct {
	// count and window (seconds) are the limit, unless countTpl or
	// windowTpl resolve them per request.
	count, window       int64
	countTpl, windowTpl *vartpl.Template
	// key is the key_type's key, or a rule's (which may not apply).
	key limit.Key
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
				in.answer.Fail(c, nil)
				return
			}
			if window, ok = in.resolveLimit(c, r.windowTpl, window); !ok {
				in.answer.Fail(c, nil)
				return
			}
		}
		now := c.Now()
		ctr, until := in.counters.Counter(k, now, now+window*1e9)
		if ctr == nil {
			in.answer.Fail(c, failBody)
			return
		}
		remaining := count - ctr.Add(1)
		if remaining < 0 {
			if in.headers {
				in.setHeaders(c, r, count, 0, until-now)
			}
			in.answer.Reject(c)
			return
		}
		if in.headers {
			in.setHeaders(c, r, count, remaining, until-now)
		}
	}
	if applied == 0 {
		// No rule applies: APISIX's "failed to get rate limit rules".
		in.answer.Fail(c, nil)
	}
}

// keyOf builds the counter key of r for this request into in.key; false
// when r is a rule whose key resolves nothing.
func (in *instance) keyOf(c plugins.Ctx, r *rule) ([]byte, bool) {
	k := append(in.space.Append(in.key[:0], c), r.tag...)
	k, ok := r.key.Append(k, c)
	in.key = k
	return k, ok
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
