// Package redis is the plugins' client of Redis: the redis and
// redis-cluster policies of limit-count, limit-req and limit-conn, which
// share a limit between the gateways of a cluster as APISIX's do.
//
// A plugin's request phase submits a Call (a Lua script and its key and
// arguments) and awaits it (plugins.Ctx.Await); the event loop never waits
// for Redis. Each distinct connection configuration has one Client per
// process, with one goroutine that takes every Call submitted since its
// last round trip and sends them as one pipeline (EVALSHA; EVAL for a
// script's first call, and again for one Redis answers NOSCRIPT), over the
// rueidis client it holds: a burst of requests on a worker costs one
// write, one read and one wake-up of the loop, not one per request. The
// rueidis client is made on first use and closed after
// redis_keepalive_timeout without a call, and the goroutine ends with it
// (the next call starts another); a configuration whose Redis cannot be
// reached fails its calls at once (the plugin's allow_degradation decides)
// and is dialled again redialEvery after the dial that failed, at the
// soonest.
//
// Every call is answered within redis_timeout of its Submit: a round trip
// (its dial included) ends at the deadline of the first call in it, and a
// watchdog fails its calls then if Redis has not answered, with those
// queued behind it; the connection is given up, and the next calls go
// over a new one. A hung Redis costs each request redis_timeout at most,
// not the wait of the requests before it as well.
//
// A Client no plugin instance holds any more is forgotten once the
// garbage collector finds it, so that the process's clients are those of
// the configurations in use, not of every configuration it ever had.
package redis

import (
	"context"
	"crypto/sha1"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"weak"

	"github.com/redis/rueidis"

	"coregate/plugins"
)

// Conf is one Redis connection configuration, as APISIX's redis-schema
// fields give it (apisix/utils/redis-schema.lua). Cluster is set for the
// redis-cluster policy: then Nodes, ClusterName, Password, Timeout, SSL and
// SSLVerify (redis_cluster_ssl*) count, else Host, Port, Username,
// Password, Database, Timeout, SSL and SSLVerify.
type Conf struct {
	Cluster            bool
	Host               string
	Port               int
	Username, Password string
	Database           int
	Nodes              []string
	ClusterName        string
	SSL, SSLVerify     bool
	// Timeout bounds a round trip and a dial (redis_timeout).
	Timeout time.Duration
	// Keepalive is how long an unused client stays connected
	// (redis_keepalive_timeout).
	Keepalive time.Duration
}

// key identifies a Conf among the process's clients.
func (c *Conf) key() string {
	return fmt.Sprintf("%t|%s|%d|%s|%s|%d|%q|%t|%t|%d|%d", c.Cluster, c.Host, c.Port, c.Username, c.Password,
		c.Database, c.Nodes, c.SSL, c.SSLVerify, c.Timeout, c.Keepalive)
}

// Script is a Lua script run with EVALSHA, EVAL when Redis does not know
// it.
type Script struct {
	src, sha string
}

// NewScript makes a Script of src.
func NewScript(src string) *Script {
	sum := sha1.Sum([]byte(src))
	return &Script{src: src, sha: hex.EncodeToString(sum[:])}
}

// MaxReply is the number of integers a Call keeps of a script's reply.
const MaxReply = 4

// Call is one run of a script. Its owner (a plugin instance, on its event
// loop) fills Script, Keys, Args and Waker and submits it; from Submit
// until the Wake the Client owns it and the owner does not touch it; then
// the owner reads Reply (the script's reply, an array of integers or
// integer strings, as numbers) or Err.
type Call struct {
	Script *Script
	Keys   []string
	Args   []string
	Waker  plugins.Waker

	Reply [MaxReply]int64
	NRep  int
	Err   error

	due  int64 // when the call fails unanswered, on clock's scale
	next *Call
}

// epoch is the origin of clock.
var epoch = time.Now()

// clock is the time on the monotonic clock, in nanoseconds since epoch.
func clock() int64 { return int64(time.Since(epoch)) }

// Client is the process's client of one Conf.
type Client struct {
	conf    Conf
	opt     rueidis.ClientOption
	pending atomic.Pointer[Call]
	wake    chan struct{}
	// running is set while the client has a goroutine that looks at
	// pending: the first Submit to find it unset starts one.
	running atomic.Bool
	// errTimeout is the error of a call Redis did not answer within
	// Timeout of its Submit.
	errTimeout error
	// logEvery is how often the client logs that its calls fail (see
	// logFailures): the constant logEvery, which tests shorten.
	logEvery time.Duration

	// Owned by the client's goroutine, or by the watchdog that took its
	// round trip over (sender.expire) until it starts the next one.
	dialErr  error // the last dial's, nil once one succeeded
	noClient error // errNoClient wrapping dialErr
	failedAt int64 // when the last dial failed, on clock's scale
	// failed counts the calls that failed since the last line logged,
	// at loggedAt, lastErr the last of their errors (see logFailures).
	failed   int
	lastErr  error
	loggedAt time.Time
}

// logEvery is how often a Client logs that its calls fail: the first
// failure at once, then one line per logEvery with the count since.
const logEvery = 10 * time.Second

// answer wakes the calls of batch, whose Reply or Err is set, clearing
// batch; the failed ones are counted and logged first.
func (c *Client) answer(batch []*Call) {
	for _, call := range batch {
		if call.Err != nil {
			c.failed++
			c.lastErr = call.Err
		}
	}
	c.logFailures(time.Now())
	for i, call := range batch {
		call.next = nil
		batch[i] = nil
		call.Waker.Wake()
	}
}

// logFailures logs the calls that failed since the last line, off the
// event loop (on the client's goroutine or its watchdog), through slog's
// default logger, with the last of their errors: the plugin decides what
// the request gets (500, or through with allow_degradation), and the
// operator learns that Redis fails, as APISIX's "failed to limit count"
// error lines tell.
func (c *Client) logFailures(now time.Time) {
	if c.failed == 0 || (!c.loggedAt.IsZero() && now.Sub(c.loggedAt) < c.logEvery) {
		return
	}
	slog.Default().Error("redis calls failed", "redis", c.target(), "calls", c.failed, "err", c.lastErr)
	c.failed, c.lastErr, c.loggedAt = 0, nil, now
}

// target names the client's Redis in a log line (no credentials).
func (c *Client) target() string {
	if c.conf.Cluster {
		return strings.Join(c.conf.Nodes, ",")
	}
	return net.JoinHostPort(c.conf.Host, strconv.Itoa(c.conf.Port))
}

// redialEvery is how long after a failed dial a Client whose Redis could
// not be reached tries again; calls in between fail at once with the
// dial's error. It counts from the failure, not from the dial's start: a
// dial that waits out a Timeout as long (a hung Redis, an unreachable
// host) would leave no time in between, and every call would dial, and
// wait, again.
const redialEvery = time.Second

// clients are the process's Clients by Conf key, held weakly: a Client
// is referenced by the plugin instances built with its Conf, and by its
// goroutine while that runs.
var (
	mu      sync.Mutex
	clients = map[string]weak.Pointer[Client]{}
)

// For returns the process's Client of c, making it on first use; it does
// not connect. It is meant for Build, off the loop.
func For(c Conf) *Client {
	k := c.key()
	mu.Lock()
	defer mu.Unlock()
	if cl := clients[k].Value(); cl != nil {
		return cl
	}
	cl := &Client{conf: c, wake: make(chan struct{}, 1), logEvery: logEvery}
	cl.opt = c.option()
	cl.errTimeout = fmt.Errorf("redis: no reply within %v", c.Timeout)
	clients[k] = weak.Make(cl)
	runtime.AddCleanup(cl, forget, k)
	return cl
}

// forget drops the entry of key once its Client was collected, unless a
// new Client took the key meanwhile.
func forget(key string) {
	mu.Lock()
	defer mu.Unlock()
	if wp, ok := clients[key]; ok && wp.Value() == nil {
		delete(clients, key)
	}
}

// numClients is how many Clients the process has.
func numClients() int {
	mu.Lock()
	defer mu.Unlock()
	return len(clients)
}

func (c *Conf) option() rueidis.ClientOption {
	opt := rueidis.ClientOption{
		Username:      c.Username,
		Password:      c.Password,
		SelectDB:      c.Database,
		DisableCache:  true,
		DisableRetry:  true,
		ClientSetInfo: rueidis.DisableClientSetInfo,
		// One connection per node carries every call, pipelined: a
		// small ring and buffers keep the worker's memory small.
		RingScaleEachConn:   8,
		PipelineMultiplex:   -1, // one connection: one goroutine sends the batches
		ReadBufferEachConn:  64 << 10,
		WriteBufferEachConn: 64 << 10,
		ConnWriteTimeout:    c.Timeout,
		Dialer:              net.Dialer{Timeout: c.Timeout, KeepAlive: time.Minute},
	}
	if c.Cluster {
		opt.InitAddress = c.Nodes
		opt.Username, opt.SelectDB = "", 0
	} else {
		opt.InitAddress = []string{net.JoinHostPort(c.Host, strconv.Itoa(c.Port))}
		opt.ForceSingleClient = true
	}
	if c.SSL {
		opt.TLSConfig = &tls.Config{InsecureSkipVerify: !c.SSLVerify, MinVersion: tls.VersionTLS12}
		if !c.Cluster {
			opt.TLSConfig.ServerName = c.Host
		}
	}
	return opt
}

// Submit hands call to the client, from any goroutine; it does not block.
// call.Waker is woken once the call has its reply or error, at the latest
// when the client's Timeout has passed since Submit.
func (c *Client) Submit(call *Call) {
	call.due = clock() + int64(c.conf.Timeout)
	for {
		old := c.pending.Load()
		call.next = old
		if c.pending.CompareAndSwap(old, call) {
			if old == nil {
				c.kick()
			}
			return
		}
	}
}

// kick has the client's goroutine look at what was submitted: it starts
// one when none runs, else wakes it.
func (c *Client) kick() {
	if c.running.CompareAndSwap(false, true) {
		go c.run()
		return
	}
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// run is the client's goroutine: it sends what was submitted, one batch
// at a time, closes the connection when it has been idle for Keepalive,
// and ends when it has neither a connection nor a call to send, or when
// its round trip outlived its deadline (the watchdog then answered the
// calls and started the next goroutine, with a connection of its own).
//
// Ending cannot lose a call: run clears running and then looks at pending
// again, and Submit adds to pending and then looks at running, so at
// least one of the two sees the other; if both do, the CompareAndSwap on
// running picks one goroutine to go on.
func (c *Client) run() {
	s := &sender{c: c}
	s.watchdog = time.AfterFunc(time.Hour, s.expire)
	s.watchdog.Stop()
	idle := time.NewTimer(time.Hour)
	idle.Stop()
	for {
		head := c.pending.Swap(nil)
		if head == nil && s.cli == nil {
			c.running.Store(false)
			if c.pending.Load() == nil || !c.running.CompareAndSwap(false, true) {
				return
			}
			continue
		}
		if head == nil {
			idle.Reset(c.conf.Keepalive)
			select {
			case <-c.wake:
				idle.Stop()
			case <-idle.C:
				if s.cli != nil && time.Duration(clock()-s.lastUse) >= c.conf.Keepalive {
					s.cli.Close()
					s.cli = nil
				}
			}
			continue
		}
		s.batch = s.batch[:0]
		for ; head != nil; head = head.next {
			s.batch = append(s.batch, head)
		}
		// The stack gave them newest first.
		for i, j := 0, len(s.batch)-1; i < j; i, j = i+1, j-1 {
			s.batch[i], s.batch[j] = s.batch[j], s.batch[i]
		}
		if !s.send() {
			return
		}
		c.answer(s.batch)
	}
}

// takeQueued appends to batch the calls submitted and not yet taken, each
// failed with errTimeout: they were queued behind a round trip that Redis
// did not answer in time, on a connection now given up.
func (c *Client) takeQueued(batch []*Call) []*Call {
	from := len(batch)
	for head := c.pending.Swap(nil); head != nil; head = head.next {
		head.NRep, head.Err = 0, c.errTimeout
		batch = append(batch, head)
	}
	// The stack gave them newest first.
	for i, j := from, len(batch)-1; i < j; i, j = i+1, j-1 {
		batch[i], batch[j] = batch[j], batch[i]
	}
	return batch
}

// dialFailed records a dial that failed now: the calls of the next
// redialEvery fail at once.
func (c *Client) dialFailed(err error) {
	c.dialErr, c.failedAt = err, clock()
	c.noClient = fmt.Errorf("%w: %w", errNoClient, err)
}

// errNoClient wraps the last dial error while the client waits to redial.
var errNoClient = errors.New("redis: not connected")

// sender is one of the client's goroutines (run) with its connection,
// and the watchdog of its round trips. The goroutine makes one round trip
// at a time (dialling first when it has no connection), each with the
// deadline of the call in it that was submitted first; if the round trip
// has not come back by then, the watchdog takes it over: it fails its
// calls and those queued behind it, and starts another goroutine for the
// calls to come, which dials a connection of its own. The goroutine stuck
// in the round trip ends when it comes back (at the deadline, which is
// the connection's too, or once its dial gives up) and closes its
// connection. So no call waits past Timeout from its Submit, whatever
// Redis or the network do.
type sender struct {
	c *Client
	// flight is the deadline of the round trip under way, on clock's
	// scale; 0 when there is none, -1 once the watchdog took it over.
	// Whichever of the goroutine and the watchdog changes it from the
	// deadline owns the round trip's calls.
	flight   atomic.Int64
	watchdog *time.Timer

	// Owned by the goroutine; batch and dialing are read by the watchdog
	// that took the round trip over.
	batch   []*Call
	dialing bool  // the round trip dials first
	lastUse int64 // the last round trip, on clock's scale

	// Owned by the goroutine, during the round trip too: ops are what it
	// sends, copied from the calls, and what Redis answered.
	cli     rueidis.Client
	dialErr error
	// sent are the scripts sent with EVAL on the current client: Redis
	// has them (unless it lost them: NOSCRIPT), and EVALSHA does.
	sent  map[*Script]bool
	ops   []op
	cmds  rueidis.Commands
	retry []int
}

// op is one call of a round trip, copied: the round trip reads and writes
// only its ops, so that a call the watchdog answered is its owner's again
// even while the round trip goes on.
type op struct {
	call       int // its index in batch
	script     *Script
	keys, args []string
	reply      [MaxReply]int64
	nrep       int
	err        error
	broken     bool // err is the connection's, not a Redis error reply
}

// send runs s.batch: it fails at once, with errTimeout, the calls already
// past their deadline, and all of them, with noClient, while the last dial
// failed less than redialEvery ago; it sends the others in one round trip
// under the watchdog and records their replies in the calls. It returns
// false when the watchdog took the round trip over: then s.batch is no
// longer the goroutine's, which must end.
func (s *sender) send() bool {
	c := s.c
	now := clock()
	s.lastUse = now
	if s.cli == nil && c.dialErr != nil && time.Duration(now-c.failedAt) < redialEvery {
		for _, call := range s.batch {
			call.NRep, call.Err = 0, c.noClient
		}
		return true
	}
	s.ops = s.ops[:0]
	deadline := int64(math.MaxInt64)
	for i, call := range s.batch {
		if call.due <= now {
			call.NRep, call.Err = 0, c.errTimeout
			continue
		}
		deadline = min(deadline, call.due)
		s.addOp(i, call)
	}
	if len(s.ops) == 0 {
		return true
	}
	s.dialing = s.cli == nil
	s.flight.Store(deadline)
	s.watchdog.Reset(time.Duration(deadline - now))
	s.roundTrip(epoch.Add(time.Duration(deadline)))
	if !s.flight.CompareAndSwap(deadline, 0) {
		if s.cli != nil {
			s.cli.Close()
		}
		return false
	}
	s.watchdog.Stop()
	s.record()
	return true
}

// addOp copies call, batch[i], into the next op.
func (s *sender) addOp(i int, call *Call) {
	n := len(s.ops)
	if n < cap(s.ops) {
		s.ops = s.ops[:n+1]
	} else {
		s.ops = append(s.ops, op{})
	}
	o := &s.ops[n]
	o.call, o.script = i, call.Script
	o.keys = append(o.keys[:0], call.Keys...)
	o.args = append(o.args[:0], call.Args...)
	o.nrep, o.err, o.broken = 0, nil, false
}

// roundTrip dials if the sender has no connection, then runs the ops:
// EVALSHA for every one in one pipeline (EVAL for a script's first call on
// the connection), then EVAL in a second for those whose script Redis did
// not have (it was restarted or flushed its scripts: those calls then run
// after the rest of their batch); both end at deadline.
func (s *sender) roundTrip(deadline time.Time) {
	if s.cli == nil {
		cli, err := rueidis.NewClient(s.c.opt)
		s.dialErr = err
		if err != nil {
			for i := range s.ops {
				s.ops[i].err, s.ops[i].broken = err, true
			}
			return
		}
		s.cli, s.sent = cli, map[*Script]bool{}
	}
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	s.cmds = s.cmds[:0]
	for i := range s.ops {
		o := &s.ops[i]
		if !s.sent[o.script] {
			// The first run of a script on this connection carries
			// its text, so that calls run in the order they came.
			s.sent[o.script] = true
			s.cmds = append(s.cmds, s.eval(o))
			continue
		}
		s.cmds = append(s.cmds, s.cli.B().Evalsha().Sha1(o.script.sha).Numkeys(int64(len(o.keys))).
			Key(o.keys...).Arg(o.args...).Build())
	}
	s.retry = s.retry[:0]
	for i, r := range s.cli.DoMulti(ctx, s.cmds...) {
		if re, ok := rueidis.IsRedisErr(r.Error()); ok && re.IsNoScript() {
			s.retry = append(s.retry, i)
			continue
		}
		s.ops[i].take(r)
	}
	if len(s.retry) == 0 {
		return
	}
	s.cmds = s.cmds[:0]
	for _, i := range s.retry {
		s.cmds = append(s.cmds, s.eval(&s.ops[i]))
	}
	for j, r := range s.cli.DoMulti(ctx, s.cmds...) {
		s.ops[s.retry[j]].take(r)
	}
}

func (s *sender) eval(o *op) rueidis.Completed {
	return s.cli.B().Eval().Script(o.script.src).Numkeys(int64(len(o.keys))).Key(o.keys...).Arg(o.args...).Build()
}

// record hands what the round trip got to its calls. A connection that
// failed (not a Redis error reply) is closed, so that the next round trip
// dials a new one; one that timed out fails the calls queued behind it.
func (s *sender) record() {
	c := s.c
	if s.dialing {
		if s.dialErr != nil {
			c.dialFailed(s.dialErr)
		} else {
			c.dialErr, c.noClient = nil, nil
		}
	}
	broken, late := false, false
	for i := range s.ops {
		o := &s.ops[i]
		err := o.err
		if o.broken {
			broken = true
			if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded) {
				err, late = c.errTimeout, true
			}
		}
		call := s.batch[o.call]
		call.Reply, call.NRep, call.Err = o.reply, o.nrep, err
	}
	if broken && s.cli != nil {
		s.cli.Close()
		s.cli = nil
	}
	if late {
		s.batch = c.takeQueued(s.batch)
	}
}

// expire is the watchdog: once the round trip's deadline has passed, it
// takes the round trip over from the goroutine, unless that was back
// first. It fails the round trip's calls and those queued behind it with
// errTimeout and answers them; a round trip that began with a dial counts
// as a failed dial (the Redis accepts connections but does not answer).
// Then it starts the client's next goroutine.
func (s *sender) expire() {
	d := s.flight.Load()
	if d <= 0 || clock() < d || !s.flight.CompareAndSwap(d, -1) {
		return // no round trip, or a later one than this firing's
	}
	c := s.c
	if s.dialing {
		c.dialFailed(c.errTimeout)
	}
	for _, call := range s.batch {
		call.NRep, call.Err = 0, c.errTimeout
	}
	s.batch = c.takeQueued(s.batch)
	c.answer(s.batch)
	go c.run()
}

// take records a reply: an integer, or an array of integers or integer
// strings.
func (o *op) take(r rueidis.RedisResult) {
	o.nrep, o.err, o.broken = 0, nil, false
	msg, err := r.ToMessage()
	if err != nil {
		o.err, o.broken = err, r.NonRedisError() != nil
		return
	}
	if msg.IsArray() {
		arr, _ := msg.ToArray()
		for i := range arr {
			if o.nrep == MaxReply {
				break
			}
			v, err := arr[i].AsInt64()
			if err != nil {
				o.err = fmt.Errorf("redis: reply[%d]: %w", i, err)
				return
			}
			o.reply[o.nrep] = v
			o.nrep++
		}
		return
	}
	v, err := msg.AsInt64()
	if err != nil {
		o.err = fmt.Errorf("redis: reply: %w", err)
		return
	}
	o.reply[0], o.nrep = v, 1
}
