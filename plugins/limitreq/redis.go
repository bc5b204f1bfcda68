package limitreq

import (
	"strconv"
	"time"

	"coregate/plugins"
	"coregate/plugins/internal/limit"
	"coregate/plugins/internal/redis"
)

// script is the leaky bucket in Redis, as APISIX's limit-req keeps it
// (limit-req/util.lua): one hash per key, fields "excess" (thousandths
// of a request, unrounded) and "last" (milliseconds), read, drained,
// checked and written in one step. ARGV: the rate and the burst (both in
// thousandths), now (ms), the hash's TTL (s). The first request of a key
// passes with no excess; one past the burst is not stored. The reply:
// 1 admitted or 0 rejected, and the excess in millionths of a request
// (an integer: Redis truncates a Lua number in a reply, where APISIX
// sends the excess as text).
var script = redis.NewScript(`local rate = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local now = tonumber(ARGV[3])
local st = redis.call('hmget', KEYS[1], 'excess', 'last')
local excess = 0
if st[1] and st[2] then
    excess = math.max(tonumber(st[1]) - rate * math.abs(now - tonumber(st[2])) / 1000 + 1000, 0)
    if excess > burst then
        return {0, math.floor(excess * 1000)}
    end
end
redis.call('hset', KEYS[1], 'excess', excess, 'last', now)
redis.call('expire', KEYS[1], ARGV[4])
return {1, math.floor(excess * 1000)}
`)

// call is one request's turn at its bucket in Redis. It belongs to its
// instance's free list but while it is out, from redisAccess to Resume or
// Abandon.
type call struct {
	redis.Call
	in   *instance
	keys [1]string
	args [4]string
}

// redisAccess submits the request to its bucket in Redis and awaits the
// answer.
func (in *instance) redisAccess(c plugins.Ctx) {
	cl := in.getCall()
	cl.keys[0] = string(in.keyOf(c))
	cl.args[2] = formatMs(c.Now())
	if !limit.Await(c, cl, in.rc, &cl.Call) {
		in.putCall(cl)
		in.answer.Fail(c, nil)
	}
}

// Resume implements plugins.Resumer: the bucket answered.
func (cl *call) Resume(c plugins.Ctx) {
	in := cl.in
	err, n, admitted, micro := cl.Err, cl.NRep, cl.Reply[0], cl.Reply[1]
	in.putCall(cl)
	switch {
	case err != nil || n < 2:
		// Redis could not answer: "failed to limit req".
		in.answer.Fail(c, nil)
	case admitted == 0:
		in.answer.Reject(c)
	case !in.nodelay:
		in.delay(c, float64(micro)/1000)
	}
}

// Abandon implements plugins.Resumer: the request left; what Redis
// counted stays counted, as a request APISIX admitted and then lost.
func (cl *call) Abandon() { cl.in.putCall(cl) }

func (in *instance) getCall() *call {
	if cl := in.free.Get(); cl != nil {
		return cl
	}
	cl := &call{in: in}
	cl.Script = script
	cl.Keys, cl.Args = cl.keys[:], cl.args[:]
	cl.args[0], cl.args[1], cl.args[3] = in.rateArg, in.burstArg, in.ttlArg
	return cl
}

func (in *instance) putCall(cl *call) {
	cl.Waker, cl.Err = nil, nil
	cl.keys[0], cl.args[2] = "", ""
	in.free.Put(cl)
}

// formatMs is now, Unix nanoseconds, as the milliseconds APISIX's
// ngx.now() * 1000 gives.
func formatMs(now int64) string { return strconv.FormatInt(now/int64(time.Millisecond), 10) }
