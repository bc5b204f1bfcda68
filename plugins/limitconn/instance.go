package limitconn

import (
	"sync/atomic"
	"time"

	"coregate/httpvar"
	"coregate/plugins"
	"coregate/plugins/internal/freelist"
	"coregate/plugins/internal/redis"
	"coregate/plugins/internal/vartpl"
)

// connWindow is the life of a counter in the table (see the package's
// doc).
const connWindow = time.Hour

// maxLimit bounds a conn or burst resolved from a variable (2^53-1, as
// APISIX, whose numbers are doubles).
const maxLimit = 1<<53 - 1

// instance is one built configuration. Everything but the scratch buffers
// and the Redis calls' lists is set by Build and only read afterwards; key
// and num are scratch buffers of the phase call in progress (an instance
// runs on one event loop, one request at a time; the counter table copies
// a key it keeps, and the redis policy a string of it), free the access
// phase's Redis calls not out.
type instance struct {
	counters plugins.Counters // the local policy's
	// rc is the Redis of the redis and redis-cluster policies (nil:
	// local); ttlArg is key_ttl, in seconds.
	rc     *redis.Client
	ttlArg string
	free   freelist.List[call]
	// leaves are the log phase's Redis calls not out, returned those
	// that came back since the loop last took them (see leave).
	leaves   []*leaveCall
	returned atomic.Pointer[leaveCall]
	// rules are the limits: one (conn, burst, key), or the
	// configuration's rules, each counted apart.
	rules            []rule
	unit             time.Duration
	degrade          bool
	rejectedCode     int
	rejectedBody     []byte // nil: the gateway's page for rejectedCode
	prefix, confHash []byte // the counter's key: prefix, route id, confHash, key value
	key, num         []byte
}

// rule is one limit. A request keeps what its access phase counted in a
// rule's count under the rule's address (plugins.Ctx.Keep's owner).
type rule struct {
	conn, burst       int64
	connTpl, burstTpl *vartpl.Template // non-nil: resolved per request
	keyVar            httpvar.Var
	keyTpl            *vartpl.Template // key_type var_combination, or a rule's key
	// inRules: one of rules, whose key must resolve a variable, else the
	// rule does not apply to the request (APISIX's get_rules); a conn or
	// burst that does not resolve skips it too.
	inRules bool
}

var (
	_ plugins.AccessPhase = (*instance)(nil)
	_ plugins.LogPhase    = (*instance)(nil)
)

// Access implements plugins.AccessPhase, as limit-conn's increase with
// resty.limit.conn's incoming(key, commit=true).
func (in *instance) Access(c plugins.Ctx) {
	in.accessFrom(c, 0, 0)
}

// accessFrom counts the request against the rules from i on; applied is
// the number of rules that applied before i. With the redis policy it
// awaits the first rule's count and Resume goes on with the next.
func (in *instance) accessFrom(c plugins.Ctx, i, applied int) {
	for ; i < len(in.rules); i++ {
		r := &in.rules[i]
		conn, burst, ok := in.limits(c, r)
		if !ok {
			if r.inRules {
				continue
			}
			in.fail(c)
			return
		}
		k, ok := in.keyOf(c, r)
		if !ok {
			continue
		}
		applied++
		if in.rc != nil {
			in.redisAccess(c, i, applied, k, conn, burst)
			return
		}
		now := c.Now()
		ctr, until := in.counters.Counter(k, now, now+int64(connWindow))
		if ctr == nil {
			in.fail(c)
			return
		}
		n := ctr.Add(1)
		if n > conn+burst {
			ctr.Add(-1)
			c.Exit(in.rejectedCode, in.rejectedBody)
			return
		}
		if !c.Keep(r, uint64(until)) {
			// The request could not remember it was counted: not counted.
			ctr.Add(-1)
			in.fail(c)
			return
		}
		in.delay(c, n, conn)
	}
	if applied == 0 {
		in.fail(c) // "failed to get limit conn rules"
	}
}

// limits are the rule's conn and burst for this request; false when one
// does not resolve to a number (conn above zero, burst from zero).
func (in *instance) limits(c plugins.Ctx, r *rule) (conn, burst int64, ok bool) {
	conn, burst = r.conn, r.burst
	if r.connTpl != nil {
		if conn, ok = in.resolve(c, r.connTpl); !ok || conn == 0 {
			return 0, 0, false
		}
	}
	if r.burstTpl != nil {
		if burst, ok = in.resolve(c, r.burstTpl); !ok {
			return 0, 0, false
		}
	}
	return conn, burst, true
}

// delay holds a request counted n-th of its key: past conn, the excess
// requests wait, as lua-resty-limit-conn makes them; APISIX sleeps from a
// millisecond on. The delays of several rules add up, as APISIX's sleeps.
func (in *instance) delay(c plugins.Ctx, n, conn int64) {
	if n > conn {
		if d := in.unit * time.Duration((n-1)/conn); d >= time.Millisecond {
			c.Delay(d)
		}
	}
}

// Log implements plugins.LogPhase: the request leaves the counts its
// access phase put it in, each if that counter is still the one it was.
func (in *instance) Log(c plugins.Ctx) {
	for i := range in.rules {
		r := &in.rules[i]
		until, ok := c.Kept(r)
		if !ok {
			continue // not counted: rejected, or access never reached it
		}
		k, _ := in.keyOf(c, r)
		if in.rc != nil {
			// until is the request's number; Redis is told, nothing waits.
			in.leave(string(k), until)
			continue
		}
		now := c.Now()
		ctr, u := in.counters.Counter(k, now, now+int64(connWindow))
		if ctr == nil || u != int64(until) {
			continue // the counter's window ended meanwhile: counting started over
		}
		ctr.Add(-1)
	}
}

// fail is a limiter failure (a full counter table, a limit that does not
// resolve, no rule that applies): the request passes with
// allow_degradation, else it is answered 500, as APISIX.
func (in *instance) fail(c plugins.Ctx) {
	if !in.degrade {
		c.Exit(500, nil)
	}
}

// resolve is a conn or burst resolved for this request: a non-negative
// integer, else ok false (APISIX's "resolved value is not a number").
func (in *instance) resolve(c plugins.Ctx, t *vartpl.Template) (n int64, ok bool) {
	in.num, _ = t.Render(in.num[:0], c)
	if len(in.num) == 0 {
		return 0, false
	}
	for _, d := range in.num {
		if d < '0' || d > '9' {
			return 0, false
		}
		if n = n*10 + int64(d-'0'); n > maxLimit {
			return 0, false
		}
	}
	return n, true
}

// keyOf builds the counter key of r for this request into in.key: the
// key's value, or the client's address when it has none; false for a
// rule whose key resolves nothing. Log builds the same key as access: the
// variables it reads do not change between them. As APISIX, rules whose
// keys resolve alike share a count.
func (in *instance) keyOf(c plugins.Ctx, r *rule) ([]byte, bool) {
	k := append(in.key[:0], in.prefix...)
	k = append(k, c.RouteID()...)
	k = append(k, in.confHash...)
	mark := len(k)
	switch {
	case r.keyTpl != nil:
		var n int
		if k, n = r.keyTpl.Render(k, c); n == 0 {
			if r.inRules {
				in.key = k
				return nil, false
			}
			k = append(k[:mark], c.Var(remoteAddr)...)
		}
	default:
		if v := c.Var(r.keyVar); v != nil {
			k = append(k, v...)
		} else {
			k = append(k, c.Var(remoteAddr)...)
		}
	}
	in.key = k
	return k, true
}

// remoteAddr is the key of last resort, as APISIX's.
var remoteAddr = httpvar.Var{Kind: httpvar.RemoteAddr}
