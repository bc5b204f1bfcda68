package limitreq

import (
	"sync/atomic"
	"time"

	"coregate/httpvar"
	"coregate/plugins"
	"coregate/plugins/internal/freelist"
	"coregate/plugins/internal/redis"
	"coregate/plugins/internal/vartpl"
)

// The bucket's word: excess<<relBits | (last+1), where excess is in
// thousandths of a request (lua-resty-limit-traffic's unit, truncated as
// its record's integer field truncates it) and last is the time of the
// last admitted request in milliseconds from the start of the word's
// window (its counter's expiry less bucketWindow). Zero is no request
// yet: the next one is admitted with no excess, as a key APISIX's shared
// dict does not hold.
const (
	// bucketWindow is the life of a word in the counter table.
	bucketWindow = time.Hour
	relBits      = 22 // 2^22 ms > bucketWindow
	relMask      = 1<<relBits - 1
	// casTries bounds the compare-and-swap loop of one request: past it
	// (as many updates of the key by other workers in between), the
	// limiter has failed.
	casTries = 64
)

// instance is one built configuration. Everything but key and free is
// set by Build and only read afterwards; key is the scratch buffer of the
// Access call in progress (an instance runs on one event loop, one
// request at a time; the counter table copies a key it keeps, and the
// redis policy a string of it), free the Redis calls not out.
type instance struct {
	counters plugins.Counters // the local policy's
	// rc is the Redis of the redis and redis-cluster policies (nil:
	// local), with the script's fixed arguments: the rate and the burst
	// in thousandths, the bucket's TTL in seconds.
	rc                        *redis.Client
	rateArg, burstArg, ttlArg string
	free                      freelist.List[call]
	rate, burst               float64 // in thousandths of a request (per second)
	nodelay                   bool
	degrade                   bool
	rejectedCode              int
	rejectedBody              []byte // nil: the gateway's page for rejectedCode
	keyVar                    httpvar.Var
	keyTpl                    *vartpl.Template // key_type var_combination
	// prefix, then the route's id, then confHash, then the key's value:
	// the counter's key.
	prefix, confHash []byte

	key []byte
}

var _ plugins.AccessPhase = (*instance)(nil)

// Access implements plugins.AccessPhase, as limit-req's access with
// resty.limit.req's incoming(key, commit=true).
func (in *instance) Access(c plugins.Ctx) {
	if in.rc != nil {
		in.redisAccess(c)
		return
	}
	k := in.keyOf(c)
	now := c.Now()
	ctr, until := in.counters.Counter(k, now, now+int64(bucketWindow))
	if ctr == nil {
		in.fail(c)
		return
	}
	rel := (now - (until - int64(bucketWindow))) / int64(time.Millisecond)
	rel = min(max(rel, 0), relMask-1)
	excess, ok, done := 0.0, false, false
	for range casTries {
		if excess, ok, done = in.incoming(ctr, rel); done {
			break
		}
	}
	switch {
	case !done:
		in.fail(c)
	case !ok:
		c.Exit(in.rejectedCode, in.rejectedBody)
	case !in.nodelay:
		in.delay(c, excess)
	}
}

// delay holds a request admitted with excess (thousandths of a request)
// for excess/rate seconds, as resty.limit.req's delay; APISIX sleeps from
// a millisecond on.
func (in *instance) delay(c plugins.Ctx, excess float64) {
	if d := time.Duration(excess / in.rate * float64(time.Second)); d >= time.Millisecond {
		c.Delay(d)
	}
}

// incoming is one try at admitting a request at rel: the excess it is
// admitted with, or ok false when it is rejected; done false when another
// worker changed the word meanwhile.
func (in *instance) incoming(ctr *atomic.Int64, rel int64) (excess float64, ok, done bool) {
	old := ctr.Load()
	if old != 0 {
		last := old&relMask - 1
		elapsed := rel - last
		if elapsed < 0 {
			elapsed = -elapsed
		}
		excess = max(float64(uint64(old)>>relBits)-in.rate*float64(elapsed)/1000+1000, 0)
		if excess > in.burst {
			return excess, false, true
		}
	}
	w := int64(uint64(excess)<<relBits | uint64(rel+1))
	return excess, true, ctr.CompareAndSwap(old, w)
}

// fail is a limiter failure (a full counter table, a word that never
// settled): the request passes with allow_degradation, else it is
// answered 500, as APISIX.
func (in *instance) fail(c plugins.Ctx) {
	if !in.degrade {
		c.Exit(500, nil)
	}
}

// keyOf builds the counter key of this request into in.key: the key's
// value, or the client's address when it has none.
func (in *instance) keyOf(c plugins.Ctx) []byte {
	k := append(in.key[:0], in.prefix...)
	k = append(k, c.RouteID()...)
	k = append(k, in.confHash...)
	mark := len(k)
	if in.keyTpl != nil {
		var n int
		if k, n = in.keyTpl.Render(k, c); n == 0 {
			k = k[:mark]
			k = append(k, c.Var(remoteAddr)...)
		}
	} else if v := c.Var(in.keyVar); v != nil {
		k = append(k, v...)
	} else {
		k = append(k, c.Var(remoteAddr)...)
	}
	in.key = k
	return k
}

// remoteAddr is the key of last resort, as APISIX's.
var remoteAddr = httpvar.Var{Kind: httpvar.RemoteAddr}
