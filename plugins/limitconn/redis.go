package limitconn

import (
	"crypto/rand"
	"encoding/hex"
	"strconv"
	"sync/atomic"
	"time"

	"coregate/plugins"
	"coregate/plugins/internal/limit"
	"coregate/plugins/internal/redis"
)

// incoming is a request's entry into its key's count in Redis, as
// APISIX's limit-conn/util.lua counts it: the key is a sorted set of the
// requests in flight, each scored with the second it is forgotten at (now
// + key_ttl: a request whose gateway never took it away does not count
// for ever). ARGV: the limit (conn + burst), key_ttl, now (Unix seconds),
// the request's id. Past the limit the request is not added. The reply:
// 1 added or 0 rejected, and the count (with this request when added).
var incoming = redis.NewScript(`local now = tonumber(ARGV[3])
redis.call('zremrangebyscore', KEYS[1], 0, now)
local n = redis.call('zcard', KEYS[1])
if n >= tonumber(ARGV[1]) then
    return {0, n}
end
redis.call('zadd', KEYS[1], now + tonumber(ARGV[2]), ARGV[4])
redis.call('expire', KEYS[1], ARGV[2])
return {1, n + 1}
`)

// leaving takes a request (ARGV[1], its id) out of its key's count; the
// reply is the count left.
var leaving = redis.NewScript(`redis.call('zrem', KEYS[1], ARGV[1])
return redis.call('zcard', KEYS[1])
`)

// Request ids: this process's random prefix and a sequence number, so
// that the requests of every gateway sharing a Redis have distinct
// members in a key's set (APISIX uses a UUID). A request keeps its
// number (plugins.Ctx.Keep) for the log phase.
var (
	idPrefix = func() string {
		var b [8]byte
		_, _ = rand.Read(b[:])
		return hex.EncodeToString(b[:]) + "-"
	}()
	lastID atomic.Uint64
)

func requestID(n uint64) string { return idPrefix + strconv.FormatUint(n, 16) }

// call is one request's entry into its count in Redis. It belongs to its
// instance's free list but while it is out, from redisAccess to Resume or
// Abandon.
type call struct {
	redis.Call
	in      *instance
	rule    int    // the rule counted
	applied int    // the rules applied so far, this one included
	conn    int64  // the rule's conn for the request
	id      uint64 // the request's number
	keys    [1]string
	args    [4]string
}

// redisAccess counts the request in Redis under key k for rule i and
// awaits the answer.
func (in *instance) redisAccess(c plugins.Ctx, i, applied int, k []byte, conn, burst int64) {
	cl := in.getCall()
	cl.rule, cl.applied = i, applied
	cl.conn, cl.id = conn, lastID.Add(1)
	cl.keys[0] = string(k)
	cl.args[0] = strconv.FormatInt(conn+burst, 10)
	cl.args[2] = strconv.FormatInt(c.Now()/int64(time.Second), 10)
	cl.args[3] = requestID(cl.id)
	if !limit.Await(c, cl, in.rc, &cl.Call) {
		in.putCall(cl)
		in.answer.Fail(c, nil)
	}
}

// added reports whether Redis answered that it counted the request.
func (cl *call) added() bool { return cl.Err == nil && cl.NRep >= 2 && cl.Reply[0] == 1 }

// Resume implements plugins.Resumer: the count answered.
func (cl *call) Resume(c plugins.Ctx) {
	in := cl.in
	rule, applied := cl.rule, cl.applied
	switch {
	case cl.Err != nil || cl.NRep < 2:
		// Redis could not answer: "failed to limit conn"; with
		// allow_degradation the next rule counts the request.
		in.putCall(cl)
		if !in.answer.Degrade {
			c.Exit(500, nil)
			return
		}
		in.accessFrom(c, rule+1, applied)
		return
	case !cl.added():
		in.putCall(cl)
		in.answer.Reject(c)
		return
	case !c.Keep(&in.rules[rule], cl.id):
		// The request could not remember it was counted: not counted.
		in.leave(cl.keys[0], cl.id)
		in.putCall(cl)
		in.answer.Fail(c, nil)
		return
	}
	n, conn := cl.Reply[1], cl.conn
	in.putCall(cl)
	in.delay(c, n, conn)
	in.accessFrom(c, rule+1, applied)
}

// Abandon implements plugins.Resumer: the request left while Redis
// counted it; it leaves the count at once.
func (cl *call) Abandon() {
	if cl.added() {
		cl.in.leave(cl.keys[0], cl.id)
	}
	cl.in.putCall(cl)
}

func (in *instance) getCall() *call {
	if cl := in.free.Get(); cl != nil {
		return cl
	}
	cl := &call{in: in}
	cl.Script = incoming
	cl.Keys, cl.Args = cl.keys[:], cl.args[:]
	cl.args[1] = in.ttlArg
	return cl
}

func (in *instance) putCall(cl *call) {
	cl.Waker, cl.Err, cl.NRep = nil, nil, 0
	cl.keys[0], cl.args[0], cl.args[2], cl.args[3] = "", "", "", ""
	in.free.Put(cl)
}

// leaveCall is the Redis call of a request leaving its count, which
// nothing waits for (the log phase cannot wait, as APISIX's runs it on a
// timer): it is its own Waker, whose Wake, on the client's goroutine,
// hands it back to its instance (returned).
type leaveCall struct {
	redis.Call
	in   *instance
	keys [1]string
	args [1]string
	// nextFree links the calls of instance.returned.
	nextFree *leaveCall
}

// Wake implements plugins.Waker: the call is done; what Redis answered
// (the count left, or an error: the request then stays counted until its
// score passes) matters to no one. It pushes the call on its instance's
// returned stack, without a lock.
func (l *leaveCall) Wake() {
	l.keys[0], l.args[0], l.Err = "", "", nil
	for {
		top := l.in.returned.Load()
		l.nextFree = top
		if l.in.returned.CompareAndSwap(top, l) {
			return
		}
	}
}

// leave takes request id out of the count at key in Redis, without
// waiting. The leaveCalls not out are the instance's leaves, on its
// event loop, and returned, where the clients' goroutines push them back:
// the loop takes the whole stack at once, so that it never pops one under
// a pusher.
func (in *instance) leave(key string, id uint64) {
	if len(in.leaves) == 0 {
		for l := in.returned.Swap(nil); l != nil; {
			n := l.nextFree
			l.nextFree = nil
			in.leaves = append(in.leaves, l)
			l = n
		}
	}
	var l *leaveCall
	if n := len(in.leaves); n > 0 {
		l = in.leaves[n-1]
		in.leaves = in.leaves[:n-1]
	} else {
		l = &leaveCall{in: in}
		l.Script = leaving
		l.Keys, l.Args = l.keys[:], l.args[:]
		l.Waker = l
	}
	l.keys[0], l.args[0] = key, requestID(id)
	in.rc.Submit(&l.Call)
}
