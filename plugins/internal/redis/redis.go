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
// rueidis client it holds: a burst
// of requests on a worker costs one write, one read and one wake-up of the
// loop, not one per request. The rueidis client is made on first use and
// closed after redis_keepalive_timeout without a call, and the goroutine
// ends with it (the next call starts another); a configuration whose Redis
// cannot be reached fails its calls at once (the plugin's
// allow_degradation decides) and is dialled again at most every
// redialEvery. A Client no plugin instance holds any more is forgotten
// once the garbage collector finds it, so that the process's clients are
// those of the configurations in use, not of every configuration it ever
// had.
package redis

import (
	"context"
	"crypto/sha1"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
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

	next *Call
}

// Client is the process's client of one Conf.
type Client struct {
	conf    Conf
	opt     rueidis.ClientOption
	pending atomic.Pointer[Call]
	wake    chan struct{}
	// running is set while the client's goroutine runs: the first Submit
	// to find it unset starts one.
	running atomic.Bool
	// logEvery is how often the client logs that its calls fail (see
	// logFailures): the constant logEvery, which tests shorten.
	logEvery time.Duration

	// Owned by the client's goroutine.
	cli      rueidis.Client
	dialErr  error
	dialedAt time.Time
	lastUse  time.Time
	cmds     rueidis.Commands
	batch    []*Call
	// sent are the scripts sent with EVAL on the current client: Redis
	// has them (unless it lost them: NOSCRIPT), and EVALSHA does.
	sent map[*Script]bool
	// failed counts the calls that failed since the last line logged,
	// at loggedAt, lastErr the last of their errors (see logFailures).
	failed   int
	lastErr  error
	loggedAt time.Time
}

// logEvery is how often a Client logs that its calls fail: the first
// failure at once, then one line per logEvery with the count since.
const logEvery = 10 * time.Second

// logFailures counts the calls of a batch that failed and logs those
// failed since the last line, with the last of their errors, off the
// event loop (on the client's goroutine), through slog's default logger:
// the plugin decides what the request gets (500, or through with
// allow_degradation), and the operator learns that Redis fails, as
// APISIX's "failed to limit count" error lines tell.
func (c *Client) logFailures(batch []*Call, now time.Time) {
	for _, call := range batch {
		if call.Err != nil {
			c.failed++
			c.lastErr = call.Err
		}
	}
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

// redialEvery is how often a Client whose Redis could not be reached
// tries again; calls in between fail at once with the last error.
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
// call.Waker is woken once the call has its reply or error.
func (c *Client) Submit(call *Call) {
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
// and ends when it has neither a connection nor a call to send.
//
// Ending cannot lose a call: run clears running and then looks at pending
// again, and Submit adds to pending and then looks at running, so at
// least one of the two sees the other; if both do, the CompareAndSwap on
// running picks one goroutine to go on.
func (c *Client) run() {
	idle := time.NewTimer(time.Hour)
	idle.Stop()
	for {
		head := c.pending.Swap(nil)
		if head == nil && c.cli == nil {
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
				if c.cli != nil && time.Since(c.lastUse) >= c.conf.Keepalive {
					c.cli.Close()
					c.cli = nil
				}
			}
			continue
		}
		c.batch = c.batch[:0]
		for ; head != nil; head = head.next {
			c.batch = append(c.batch, head)
		}
		// The stack gave them newest first.
		for i, j := 0, len(c.batch)-1; i < j; i, j = i+1, j-1 {
			c.batch[i], c.batch[j] = c.batch[j], c.batch[i]
		}
		c.exec(c.batch)
		c.logFailures(c.batch, time.Now())
		for i, call := range c.batch {
			call.next = nil
			c.batch[i] = nil
			call.Waker.Wake()
		}
	}
}

// errNoClient wraps the last dial error while the client waits to redial.
var errNoClient = errors.New("redis: not connected")

// exec runs one batch: EVALSHA for every call in one pipeline (EVAL for a
// script's first call on the connection), then EVAL in a second for the
// calls whose script Redis did not have (it was restarted or flushed its
// scripts: those calls then run after the rest of their batch).
func (c *Client) exec(batch []*Call) {
	now := time.Now()
	c.lastUse = now
	if c.cli == nil {
		if c.dialErr != nil && now.Sub(c.dialedAt) < redialEvery {
			failAll(batch, fmt.Errorf("%w: %w", errNoClient, c.dialErr))
			return
		}
		c.dialedAt = now
		cli, err := rueidis.NewClient(c.opt)
		if err != nil {
			c.dialErr = err
			failAll(batch, err)
			return
		}
		c.cli, c.dialErr = cli, nil
		c.sent = map[*Script]bool{}
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.conf.Timeout)
	defer cancel()
	c.cmds = c.cmds[:0]
	for _, call := range batch {
		if !c.sent[call.Script] {
			// The first run of a script on this connection carries
			// its text, so that calls run in the order they came.
			c.sent[call.Script] = true
			c.cmds = append(c.cmds, c.cli.B().Eval().Script(call.Script.src).Numkeys(int64(len(call.Keys))).
				Key(call.Keys...).Arg(call.Args...).Build())
			continue
		}
		c.cmds = append(c.cmds, c.cli.B().Evalsha().Sha1(call.Script.sha).Numkeys(int64(len(call.Keys))).
			Key(call.Keys...).Arg(call.Args...).Build())
	}
	res := c.cli.DoMulti(ctx, c.cmds...)
	var retry []int
	for i, r := range res {
		if re, ok := rueidis.IsRedisErr(r.Error()); ok && re.IsNoScript() {
			retry = append(retry, i)
			continue
		}
		batch[i].take(r)
	}
	if len(retry) == 0 {
		return
	}
	c.cmds = c.cmds[:0]
	for _, i := range retry {
		call := batch[i]
		c.cmds = append(c.cmds, c.cli.B().Eval().Script(call.Script.src).Numkeys(int64(len(call.Keys))).
			Key(call.Keys...).Arg(call.Args...).Build())
	}
	for j, r := range c.cli.DoMulti(ctx, c.cmds...) {
		batch[retry[j]].take(r)
	}
}

func failAll(batch []*Call, err error) {
	for _, call := range batch {
		call.NRep, call.Err = 0, err
	}
}

// take records a reply: an integer, or an array of integers or integer
// strings.
func (call *Call) take(r rueidis.RedisResult) {
	call.NRep, call.Err = 0, nil
	msg, err := r.ToMessage()
	if err != nil {
		call.Err = err
		return
	}
	if msg.IsArray() {
		arr, _ := msg.ToArray()
		for i := range arr {
			if call.NRep == MaxReply {
				break
			}
			v, err := arr[i].AsInt64()
			if err != nil {
				call.Err = fmt.Errorf("redis: reply[%d]: %w", i, err)
				return
			}
			call.Reply[call.NRep] = v
			call.NRep++
		}
		return
	}
	v, err := msg.AsInt64()
	if err != nil {
		call.Err = fmt.Errorf("redis: reply: %w", err)
		return
	}
	call.Reply[0], call.NRep = v, 1
}
