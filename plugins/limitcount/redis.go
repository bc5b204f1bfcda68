package limitcount

import (
	"strconv"

	"coregate/plugins"
	"coregate/plugins/internal/limit"
	"coregate/plugins/internal/redis"
)

// script is the fixed window in Redis, as APISIX's limit-count counts it
// (limit-count/util.lua): the key holds the requests counted in the
// window and expires with it. ARGV: the limit (unused), the window in
// seconds, the cost. The reply: the count so far and the milliseconds
// left in the window.
var script = redis.NewScript(`local ttl = redis.call('pttl', KEYS[1])
if ttl < 0 then
    redis.call('set', KEYS[1], ARGV[3], 'EX', ARGV[2])
    return {ARGV[3], ARGV[2] * 1000}
end
return {redis.call('incrby', KEYS[1], ARGV[3]), ttl}
`)

// call is one rule's count in Redis for one request: the Redis call and
// what Resume needs to go on. It belongs to its instance's free list but
// while it is out, from redisFrom to Resume or Abandon.
type call struct {
	redis.Call
	in      *instance
	rule    int   // the rule counted
	applied int   // the rules applied so far, this one included
	count   int64 // the rule's limit for this request
	// e is the entry a window's first sync is for (sync.go), with
	// sent, the local count it carries to Redis; nil for a request's
	// own count. peer is set on a request's wait for the sync of e in
	// flight.
	e    *entry
	sent int64
	peer bool
	keys [1]string
	args [3]string
}

// redisFrom counts the request in Redis against the first rule from i on
// that applies, and awaits the reply (Resume goes on with the next rule).
// applied is the number of rules applied before i.
func (in *instance) redisFrom(c plugins.Ctx, i, applied int) {
	for ; i < len(in.rules); i++ {
		r := &in.rules[i]
		k, ok := in.keyOf(c, r)
		if !ok {
			continue
		}
		count, window := r.count, r.window
		countArg, windowArg := r.countArg, r.windowArg
		if r.countTpl != nil || r.windowTpl != nil {
			if count, ok = in.resolveLimit(c, r.countTpl, count); !ok {
				in.answer.Fail(c, nil)
				return
			}
			if window, ok = in.resolveLimit(c, r.windowTpl, window); !ok {
				in.answer.Fail(c, nil)
				return
			}
			countArg, windowArg = strconv.FormatInt(count, 10), strconv.FormatInt(window, 10)
		}
		if in.sync != nil && window*1e9 > int64(in.sync.interval) {
			// sync_interval: counted here, unless the key's window
			// needs its first sync (awaited: Resume goes on), as APISIX
			// counts directly a window no longer than the interval.
			switch in.sync.count(c, r, k, i, applied+1, count, window, countArg, windowArg) {
			case counted:
				applied++
				continue
			case awaiting, answered:
				return
			}
		}
		cl := in.getCall()
		cl.rule, cl.applied, cl.count = i, applied+1, count
		cl.keys[0] = string(k)
		cl.args[0], cl.args[1], cl.args[2] = countArg, windowArg, "1"
		if !limit.Await(c, cl, in.rc, &cl.Call) {
			in.putCall(cl)
			in.answer.Fail(c, failBody)
		}
		return
	}
	if applied == 0 {
		in.answer.Fail(c, nil) // no rule applies: "failed to get rate limit rules"
	}
}

// Resume implements plugins.Resumer: the rule's count came back.
func (cl *call) Resume(c plugins.Ctx) {
	if cl.e != nil {
		cl.in.sync.resume(c, cl)
		return
	}
	in := cl.in
	r := &in.rules[cl.rule]
	count, rule, applied := cl.count, cl.rule, cl.applied
	err, n, used, ttlMs := cl.Err, cl.NRep, cl.Reply[0], cl.Reply[1]
	in.putCall(cl)
	if err != nil || n < 2 {
		// Redis could not count: the request passes with
		// allow_degradation (and the next rule counts it), else 500.
		if !in.answer.Degrade {
			c.Exit(500, failBody)
			return
		}
		in.redisFrom(c, rule+1, applied)
		return
	}
	remaining := count - used
	if remaining < 0 {
		if in.headers {
			in.setHeaders(c, r, count, 0, ttlMs*1e6)
		}
		in.answer.Reject(c)
		return
	}
	if in.headers {
		in.setHeaders(c, r, count, remaining, ttlMs*1e6)
	}
	in.redisFrom(c, rule+1, applied)
}

// Abandon implements plugins.Resumer: the request left.
func (cl *call) Abandon() {
	if cl.e != nil && !cl.peer {
		cl.in.sync.abandon(cl)
		return
	}
	cl.in.putCall(cl)
}

func (in *instance) getCall() *call {
	if cl := in.free.Get(); cl != nil {
		return cl
	}
	cl := &call{in: in}
	cl.Script = script
	cl.Keys, cl.Args = cl.keys[:], cl.args[:]
	return cl
}

func (in *instance) putCall(cl *call) {
	cl.Waker, cl.Err = nil, nil
	cl.keys[0], cl.args[2] = "", "1"
	cl.e, cl.sent, cl.peer = nil, 0, false
	in.free.Put(cl)
}
