package plugins

import (
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
)

// Env is what a plugin instance gets from the process that runs it, through
// interfaces, so that no plugin imports the worker: the node's shared
// counters and this worker's metric slots. The worker gives every Build the
// same Env for its whole life, so that a counter or a series outlives a
// configuration reload (Consumers and Metadata excepted). NewLocalEnv makes one that lives in this process.
type Env struct {
	Counters Counters
	Metrics  Metrics
	// Consumers is the consumers of the snapshot being built: unlike the
	// other members it changes with each snapshot (the worker sets it
	// before building one); nil when the snapshot has none.
	Consumers Consumers
	// Metadata is the plugin metadata of the snapshot being built (each
	// plugin's object, checked against its MetadataSchemaPlugin schema,
	// without its "id"): like Consumers it changes with each snapshot; nil
	// when there is none.
	Metadata *Settings
	// Attr is plugin_attr of the node's config.yaml, the same for the
	// worker's life (a change restarts the workers); nil when none.
	Attr *Settings
	// HTTPSPort is the port of the node's first HTTPS listener
	// (apisix.ssl.listen, when apisix.ssl.enable), for redirect's
	// http_to_https; 0 when none. Like Attr, it lasts the worker's life.
	HTTPSPort int
	// Upstreams are the upstreams of the snapshot being built, for
	// Ctx.SetUpstream: like Consumers it changes with each snapshot; nil
	// where requests have no upstream to go to (NewLocalEnv's).
	Upstreams Upstreams
	// Loop is the state the instances of a plugin share on the one event
	// loop that runs them all (jwt-auth's cache of verified tokens), the
	// same for the worker's life, as Counters; nil where there is none
	// (a plugin then keeps that state per instance). A worker is one
	// process with one event loop, and each builds its own Env
	// (NewLocalEnv), so what Loop holds is used by one goroutine: the
	// plugins take it without a lock. An Env whose Loop is given to
	// instances run by several goroutines at once is a data race.
	Loop *LoopLocal
}

// LoopLocal is Env.Loop: a value per key (a plugin's name), made on first
// use. Value runs in Build, off the event loop, maybe in several builds at
// once (it locks); the value it returns is read and written on the event
// loop only, by the instances' phases, so Build takes the value and must
// not touch what is in it.
type LoopLocal struct {
	mu sync.Mutex
	m  map[string]any
}

// NewLoopLocal makes an empty LoopLocal.
func NewLoopLocal() *LoopLocal { return &LoopLocal{m: make(map[string]any)} }

// Value is key's value: the one made before, else made by mk now.
func (l *LoopLocal) Value(key string, mk func() any) any {
	l.mu.Lock()
	defer l.mu.Unlock()
	v, ok := l.m[key]
	if !ok {
		v = mk()
		l.m[key] = v
	}
	return v
}

// Upstream is one compiled upstream as Upstreams gives it: opaque to a
// plugin, which keeps it in its instance and hands it to Ctx.SetUpstream.
type Upstream any

// Upstreams gives a plugin's Build the upstreams its requests may go to
// instead of their route's (traffic-split's). Its methods run off the
// event loop, during the build of one snapshot, and may allocate; what
// they return is valid for the instances built with that snapshot.
type Upstreams interface {
	// ByID is the upstream object of that id; an error wrapping
	// ErrNoUpstream when the snapshot has none.
	ByID(id string) (Upstream, error)
	// Inline compiles an upstream object written in the plugin's
	// configuration (one the upstream schema passed) as a route's own
	// upstream is compiled: its balancer, timeouts, pass_host, scheme and
	// keepalive pool.
	Inline(raw json.RawMessage) (Upstream, error)
}

// ErrNoUpstream: Upstreams.ByID found no upstream of that id.
var ErrNoUpstream = errors.New("plugins: no upstream of that id")

// Counters is the table of counters shared by every worker of the node
// (limit-count's): each is an atomic int64, so that a limit of N across
// all workers admits exactly N. The table has a fixed size.
type Counters interface {
	// Counter returns the counter of key (its owner's identity: route and
	// plugin, key value) and the time it expires (in the caller's clock,
	// Unix nanoseconds): a window that began when the key was first
	// counted. A key seen for the first time, or whose counter expired
	// before now, gets a counter at zero that expires at expires; a live
	// one keeps its own expiry, which is returned (limit-count's
	// X-RateLimit-Reset). When the table is full, expired counters are
	// given up first, and nil is returned when none is. key is copied
	// when a counter is made; finding an existing one does not allocate.
	// The caller uses the counter only until it expires: its slot may then
	// serve another key.
	Counter(key []byte, now, expires int64) (c *atomic.Int64, until int64)
}

// Metrics are this worker's metric slots (prometheus's): each series is
// written by the worker's event loop only and read by the exporter.
type Metrics interface {
	// Slot returns the slot of one series, a metric name and its label
	// values in the metric's label order, at zero when new; nil when the
	// bound on series is reached. It may allocate: an instance takes its
	// slots at Build, or once per new series, and keeps them.
	Slot(name string, labels ...string) *atomic.Uint64
}

// Sizes of NewLocalEnv's tables.
const (
	LocalCounters = 1 << 16
	LocalSeries   = 1 << 14
)

// NewLocalEnv makes an Env whose counters and metrics live in this
// process, behind a mutex: shared by the goroutines of one process, not by
// processes. It serves tests, and workers run without a supervisor (the
// supervisor's workers count in its shared-memory table, worker/shm). Its
// Loop is new: the Env is for one event loop (each worker makes its own).
func NewLocalEnv() Env {
	return Env{Counters: NewCounterTable(LocalCounters), Metrics: NewMetricTable(LocalSeries), Loop: NewLoopLocal()}
}

// CounterTable is an in-process Counters of a fixed size.
type CounterTable struct {
	mu   sync.Mutex
	size int
	m    map[string]*tableCounter
}

type tableCounter struct {
	v       atomic.Int64
	expires int64
}

// NewCounterTable makes a CounterTable of size counters.
func NewCounterTable(size int) *CounterTable {
	return &CounterTable{size: size, m: make(map[string]*tableCounter)}
}

// Counter implements Counters.
func (t *CounterTable) Counter(key []byte, now, expires int64) (*atomic.Int64, int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if c, ok := t.m[string(key)]; ok {
		if c.expires < now {
			c.v.Store(0)
			c.expires = expires
		}
		return &c.v, c.expires
	}
	if len(t.m) >= t.size {
		for k, c := range t.m {
			if c.expires < now {
				delete(t.m, k)
			}
		}
		if len(t.m) >= t.size {
			return nil, 0
		}
	}
	c := &tableCounter{expires: expires}
	t.m[string(key)] = c
	return &c.v, expires
}

// Len is the number of counters held, expired ones included.
func (t *CounterTable) Len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.m)
}

// MetricTable is an in-process Metrics with a bound on series.
type MetricTable struct {
	mu    sync.Mutex
	limit int
	m     map[string]*atomic.Uint64
}

// NewMetricTable makes a MetricTable of at most limit series.
func NewMetricTable(limit int) *MetricTable {
	return &MetricTable{limit: limit, m: make(map[string]*atomic.Uint64)}
}

func seriesKey(name string, labels []string) string {
	return name + "\x00" + strings.Join(labels, "\x00")
}

// Slot implements Metrics.
func (t *MetricTable) Slot(name string, labels ...string) *atomic.Uint64 {
	k := seriesKey(name, labels)
	t.mu.Lock()
	defer t.mu.Unlock()
	if s, ok := t.m[k]; ok {
		return s
	}
	if len(t.m) >= t.limit {
		return nil
	}
	s := new(atomic.Uint64)
	t.m[k] = s
	return s
}

// Value reads one series (0 when it has no slot).
func (t *MetricTable) Value(name string, labels ...string) uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	if s, ok := t.m[seriesKey(name, labels)]; ok {
		return s.Load()
	}
	return 0
}

// Count is the number of series of name.
func (t *MetricTable) Count(name string) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for k := range t.m {
		if strings.HasPrefix(k, name+"\x00") {
			n++
		}
	}
	return n
}
