package storesync

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"coregate/admin/secret"
	"coregate/admin/spec"
	"coregate/admin/store"
	"coregate/internal/threadcpu"
	"coregate/plugins"
)

// Defaults.
const (
	DefaultCoalesce = 5 * time.Millisecond
	// CacheEvery is the shortest time between two writes of the local
	// copy (ten times the last write, if that is longer); the last change
	// is always written, at the latest that long after it, and when Watch
	// returns.
	CacheEvery   = time.Second
	DefaultRetry = time.Second
	// DefaultStartTimeout: a node with a local copy serves it when its
	// store has not answered the first read in this time.
	DefaultStartTimeout = 5 * time.Second
	// CacheFile is the local copy's name beside config.yaml.
	CacheFile = "config-cache.json"
	// ProbeTimeout bounds the call that asks the store whether it
	// answers after a watch ended unavailable (Watch).
	ProbeTimeout = 2 * time.Second
)

// Options configure a Syncer.
type Options struct {
	Store store.Store
	// CachePath is the local copy of the last good configuration; ""
	// keeps none.
	CachePath string
	// Coalesce is the shortest time between two Specs: a change that
	// comes after a quiet Coalesce is published at once, one that comes
	// sooner waits for the rest of it with the changes that follow it
	// (and a burst of changes to a configuration whose Spec takes long to
	// build waits longer: pace); DefaultCoalesce when 0.
	Coalesce time.Duration
	// Retry is the wait between two tries to reach an unreachable store;
	// DefaultRetry when 0.
	Retry time.Duration
	// StartTimeout bounds Load's read of the store when a local copy
	// exists to fall back on; DefaultStartTimeout when 0.
	StartTimeout time.Duration
	// Plugins checks the plugins of every object read, as the Admin API
	// does before it stores one (checkPlugins); nil checks none.
	Plugins *plugins.Registry
	// AcceptReset makes the first full read of the store replace the
	// configuration served even when the store was reset (ResetError).
	AcceptReset bool
	// ResetRemedy ends the log line of a reset store refused, and Refusal's
	// error: how the operator accepts the store as it is ("restart the node
	// with --accept-store-reset").
	ResetRemedy string
	Log         *slog.Logger
}

// Syncer follows a store and hands each new Spec on. Load, then Watch,
// from one goroutine; Reachable, Lost, Revision, ModifyIndexes, Refusal,
// FirstRead and Started from any.
type Syncer struct {
	opts Options
	dir  string // <prefix>/

	// Owned by the goroutine running Load and then Watch.
	objs map[string]*object // by key
	// order is objs in the order they are served (byCreation) while
	// sorted; a change keeps it so where it can (a new object is the
	// newest, an update keeps its place), else build sorts again.
	order  []*object
	sorted bool
	// sizes are the lengths of the last build's routes, services and
	// upstreams, the next build's room for them: grown from nothing,
	// the lists of 50 000 routes and 20 000 upstreams were a third of a
	// build's time.
	sizes [3]int
	// chunk is build's scratch: the objects of the chunk being hashed
	// (specHasher).
	chunk []*object
	// last is the last build's Spec when it served every object of
	// s.order (nothing left out, none refusing), for the next build to
	// make its own from (buildFrom); lastN is how many objects it served,
	// chunkEnds and chunkSums its Hash's chunks (the position in its
	// order after each, and its sum), edited the positions in its order
	// of the objects replaced in place since (each in its place:
	// object.pos), removed those of the objects removed since (a
	// deletion, an object left out when put, one put again under a newer
	// create revision), sorted by that position. s.order begins with the
	// last build's objects less those removed (kept), and the objects
	// after them were added since. A change of any other kind among the
	// kept (an object put before the newest, the order lost), or removals
	// past maxHoles, drops last: the next build is whole. spareEnds and
	// spareSums are buildFrom's for the next chunks. fromLast counts the
	// builds made from the last (tests).
	last                 *spec.Spec
	lastN                int
	chunkEnds, spareEnds []int
	chunkSums, spareSums []*chunkSum
	edited               []int
	removed              []removal
	fromLast             int
	// topState is the state of the Hash's SHA-256 (top) after the sums
	// of the last build's chunks but its last one, topN of them (0:
	// none kept): a build that removed nothing and replaced nothing
	// before the last chunk takes it up there (hashFrom), and hashes the
	// sums of the chunks it cut or took over from the last one on, where
	// it wrote the sums of every chunk again (270 at 70 000 objects).
	topState []byte
	topN     int
	// room holds the lists of last as built, each with its array's whole
	// capacity: last's own have their capacity cut to their length
	// (onList, keepOp). A list of last that a build only adds objects to is
	// room's, the objects appended in place (grown): its array is shared
	// with last's, and with the Specs before last that had it, each
	// seeing the objects up to its own length. That is sound because
	// nothing writes into a Spec's list below its length once it is
	// built (spec.Spec), and nothing but the build from last appends to
	// room's: every Spec handed on that shares the array is at most as
	// long as last's list, so the objects appended go past what any of
	// them sees. A build from last that is thrown away after its appends
	// (spec.Check refused it; the whole build follows) left objects past
	// last's length, which no Spec sees and the next build from last's
	// list, if any, writes over. At 50 000 routes, the build of a bulk
	// load's batch of new routes copied the list of routes, 400 kB of
	// pointers, each build.
	room spec.Spec
	// holes are, by list (listKinds), the positions (object.pos) of the
	// objects removed from the list since the last whole build, sorted:
	// an object's place in its list of the last Spec is its pos less the
	// holes before it (listPos), so that a removal moves none of the
	// objects after it. A whole build empties them. spots is buildFrom's
	// scratch: a list's places to leave out.
	holes [len(listKinds)][]int
	spots []int
	// valid: the last build's Spec passed spec.Check whole, nothing left
	// out; since then the routes of changed were put (or replaced, or
	// deleted), and nothing else changed unless recheck. foreign counts
	// the routes whose id is not their key's. A build with valid, no
	// recheck and no foreign route checks the references of the changed
	// routes alone (fastCheck): nothing refers to a route, so they are
	// all that can make the Spec fail.
	valid   bool
	recheck bool
	changed []*object
	foreign int
	mods    map[string]int64 // ModRevision by key, of every resource ModifyIndexes counts
	// modMax is the highest of mods by resource, kept as mods change
	// (putMod, delMod); stale names the resources whose highest was
	// deleted or lowered, which setIndexes finds again.
	modMax   map[string]int64
	stale    map[string]bool
	prevIdx  int64    // the highest ModRevision of the keys read or changed (a deletion's included)
	rev      int64    // the revision objs reflect (0: none read)
	lastHash [32]byte // of the last Spec handed on or loaded
	// pending is the store's read at rev that Load left to Watch to
	// decode (serveCopy): objs is empty until then.
	pending []store.KV
	// started is closed by Started.
	started   chan struct{}
	startOnce sync.Once

	cluster      uint64 // the store's cluster id, as of the last full read (0: unknown)
	served       origin // where the configuration served was read (0: nowhere yet)
	servedRoutes int
	accept       bool           // Options.AcceptReset, until the first full read
	seen         bool           // the store has answered once
	toCache      chan cacheItem // to the local copy's writer, while Watch runs
	reachable    atomic.Bool
	down         atomic.Bool // Lost
	revision     atomic.Int64
	indexes      atomic.Pointer[map[string]int64] // ModifyIndexes, set by publish
	refusal      atomic.Pointer[error]            // Refusal's answer; nil once a full read is accepted
	firstRead    chan struct{}                    // closed once Refusal is not ErrNotRead
	readOnce     sync.Once
	readErr      string // the last read refused as a whole, logged and reported once
	// problems, while Check runs, collects every object left out, as the
	// log says it.
	problems *[]error
	// cacheMu serialises the local copy's writes (writeCacheAt), and
	// guards enc, the forms of the objects of the last Spec written, and
	// cacheBuf, the file's buffer.
	cacheMu  sync.Mutex
	enc      spec.Encoder
	cacheBuf *bufio.Writer
}

// origin is where a configuration was read: the store's revision and
// cluster id (0: unknown).
type origin struct {
	rev     int64
	cluster uint64
}

// errReported marks a read refused as a whole that Watch reports with
// onError: the first of its kind (reportedError).
var errReported = errors.New("storesync: reported")

// reportedError is a read's error logged for the first time.
type reportedError struct{ err error }

func (e *reportedError) Error() string        { return e.err.Error() }
func (e *reportedError) Unwrap() error        { return e.err }
func (e *reportedError) Is(target error) bool { return target == errReported }

// ErrNotRead is Refusal's answer before the first full read of the store.
var ErrNotRead = errors.New("config store not read yet")

// ResetError is a store that holds an older configuration than the one
// the node serves: it answers at a lower revision than that configuration
// was read at, or it is another etcd cluster (rebuilt from nothing,
// restored from a backup, or another one named), and what it holds
// differs. The node keeps serving its configuration (the local copy, at a
// start) and does not replace the local copy with the store's.
type ResetError struct {
	Copy                        string // the local copy's path
	CopyRevision, StoreRevision int64
	CopyCluster, StoreCluster   uint64 // 0: unknown
	CopyRoutes, StoreRoutes     int
	Remedy                      string // Options.ResetRemedy
}

func (e *ResetError) Error() string {
	msg := fmt.Sprintf("config store reset: etcd answers at revision %d of cluster %s (routes: %d); the configuration served was read at revision %d of cluster %s (routes: %d; kept in %s)",
		e.StoreRevision, clusterString(e.StoreCluster), e.StoreRoutes, e.CopyRevision, clusterString(e.CopyCluster), e.CopyRoutes, e.Copy)
	if e.Remedy != "" {
		msg += "; " + e.Remedy
	}
	return msg
}

// clusterString is an etcd cluster id as etcdctl shows it, in hex.
func clusterString(id uint64) string {
	if id == 0 {
		return "unknown"
	}
	return strconv.FormatUint(id, 16)
}

// object is one decoded stored object.
type object struct {
	key    string // where it is stored
	kind   string // a spec.Kind* constant
	id     spec.ID
	create int64 // its create revision: the order objects are served in
	route  *spec.Route
	svc    *spec.Service
	ups    *spec.Upstream
	cons   *spec.Consumer
	pc     *spec.PluginConfig
	gr     *spec.GlobalRule
	cg     *spec.ConsumerGroup
	ssl    *spec.SSL
	raw    json.RawMessage // credentials, plugin_metadata, secrets
	// refusal: why a global rule is invalid (it does not decode, a
	// plugin it names is unknown or refuses its configuration, a
	// reference does not resolve in this process). Such a rule refuses
	// every configuration (build) rather than be left out: every route
	// would be served without it, its authentication or limit among them.
	refusal error
	// sum is the SHA-256 of key and the value as stored: the Spec's hash
	// is made of them.
	sum [32]byte
	// chunk is the sum of the chunk of objects this one was last hashed
	// in (specHasher), for a later build to take over while the chunk
	// holds the same objects.
	chunk *chunkSum
	// pos is its position in its resource's list of the Spec it was last
	// built into (Syncer.last), counting the objects removed from the
	// list since the last whole build (Syncer.holes: its place there is
	// listPos), where buildFrom puts the object that replaces it.
	pos int
}

// removal is an object of the last build removed since: at, its position
// in that build's order; list (listIndex) and pos, its object's.
type removal struct{ at, list, pos int }

// byCreation orders objects by create revision, then key.
func byCreation(a, b *object) int {
	return cmp.Or(cmp.Compare(a.create, b.create), strings.Compare(a.key, b.key))
}

// replace records in s.order that the object old (nil: none) was
// replaced by o (nil: removed).
func (s *Syncer) replace(old, o *object) {
	s.note(old, o)
	if !s.sorted {
		s.last = nil
		return
	}
	if old != nil {
		i, found := slices.BinarySearchFunc(s.order, old, byCreation)
		if !found || s.order[i] != old {
			s.sorted, s.last = false, nil
			return
		}
		if o != nil && o.create == old.create {
			s.order[i] = o
			s.edit(i, old, o)
			return
		}
		s.order = slices.Delete(s.order, i, i+1)
		s.remove(i, old)
	}
	if o == nil {
		return
	}
	if n := len(s.order); n == 0 || byCreation(s.order[n-1], o) < 0 {
		s.order = append(s.order, o)
		return
	}
	i, _ := slices.BinarySearchFunc(s.order, o, byCreation)
	s.order = slices.Insert(s.order, i, o)
	if i < s.kept() {
		s.last = nil
	}
}

// kept is how many objects of the last build s.order begins with.
func (s *Syncer) kept() int { return s.lastN - len(s.removed) }

// lastAt is the position in the last build's order of the object at i in
// s.order, one of those kept: i, plus the objects removed before it (the
// k-th removed, in order, was before position at-k of s.order).
func (s *Syncer) lastAt(i int) int {
	return i + sort.Search(len(s.removed), func(k int) bool { return s.removed[k].at-k > i })
}

// removedBefore is how many of the objects removed since the last build
// were before position at in its order.
func (s *Syncer) removedBefore(at int) int {
	n, _ := slices.BinarySearchFunc(s.removed, at, func(r removal, at int) int { return cmp.Compare(r.at, at) })
	return n
}

// maxHoles is how many objects of the n of the last build may have been
// removed since the last whole build (Syncer.holes, and those removed
// since the last build) before a removal drops the last Spec: a
// sixteenth of them. It bounds the holes kept, which each later build
// searches (listPos) and copies around; the whole build it takes every
// n/16 removals costs each of them little (at 70 000 objects, one whole
// build of 1-1.5 ms in 4 375 removals).
func maxHoles(n int) int { return n / 16 }

// remove records, for buildFrom, that old, at i in s.order, was removed
// from there: nothing to do for one added since the last build; one of
// the last build's is recorded with its position in that build's order
// and its place in its list (removed), unless there are too many
// (maxHoles) and s.last is dropped: the next build is whole.
func (s *Syncer) remove(i int, old *object) {
	if s.last == nil || i >= s.kept() {
		return // none to build from, or added since
	}
	holes := len(s.removed)
	for _, h := range s.holes {
		holes += len(h)
	}
	if holes >= maxHoles(s.lastN) {
		s.last = nil
		return
	}
	at := s.lastAt(i)
	s.removed = slices.Insert(s.removed, s.removedBefore(at), removal{at, listIndex(old.kind), old.pos})
}

// edit records, for buildFrom, that o replaced old in its place, at i in
// s.order. As many edits as objects served drop s.last: the next build
// is whole.
func (s *Syncer) edit(i int, old, o *object) {
	if s.last == nil || i >= s.kept() {
		return // none to build from, or added since
	}
	if len(s.edited) >= s.lastN {
		s.last = nil
		return
	}
	o.pos = old.pos
	s.edited = append(s.edited, s.lastAt(i))
}

// listPos is the place in list k (listIndex) of the last Spec of an
// object whose pos is pos: pos less the holes before it.
func (s *Syncer) listPos(k, pos int) int {
	n, _ := slices.BinarySearch(s.holes[k], pos)
	return pos - n
}

// note records, for fastCheck, that the object old (nil: none) was
// replaced by o (nil: removed).
func (s *Syncer) note(old, o *object) {
	if isForeign(old) {
		s.foreign--
	}
	if isForeign(o) {
		s.foreign++
	}
	switch {
	case o != nil && o.kind == spec.KindRoute:
		s.changed = append(s.changed, o)
	case o == nil && (old == nil || old.kind == spec.KindRoute):
		// A route gone: nothing refers to it.
	default:
		s.recheck = true
	}
}

// fastCheck reports whether the Spec of s.objs passes spec.Check, known
// without a Check of the whole Spec: the last build's passed, only routes
// changed since, and each changed one has its key's id and refers by
// upstream_id, service_id and plugin_config_id to objects stored under
// the ids it names. false: Check the whole Spec.
func (s *Syncer) fastCheck() bool {
	if !s.valid || s.recheck || s.foreign != 0 {
		return false
	}
	// stored: an object of the kind is stored under to's id, with that
	// id (the key's, so no other object of the kind has it).
	stored := func(res, kind string, to spec.ID) bool {
		if to.IsZero() {
			return true
		}
		o := s.objs[s.dir+res+"/"+to.String()]
		if o == nil || o.kind != kind {
			return false
		}
		var id spec.ID
		switch {
		case o.ups != nil:
			id = o.ups.ID
		case o.svc != nil:
			id = o.svc.ID
		case o.pc != nil:
			id = o.pc.ID
		}
		return id.String() == to.String()
	}
	for _, o := range s.changed {
		if s.objs[o.key] != o {
			continue // replaced since, or deleted: the one after it is in changed
		}
		r := o.route
		if isForeign(o) ||
			!stored("upstreams", spec.KindUpstream, r.UpstreamID) ||
			!stored("services", spec.KindService, r.ServiceID) ||
			!stored("plugin_configs", spec.KindPluginConfig, r.Rare().PluginConfigID) {
			return false
		}
	}
	return true
}

// isForeign reports whether o is a route whose id is not its key's.
func isForeign(o *object) bool {
	return o != nil && o.kind == spec.KindRoute && o.route.ID.String() != o.id.String()
}

// New makes a Syncer.
func New(o Options) *Syncer {
	if o.Coalesce <= 0 {
		o.Coalesce = DefaultCoalesce
	}
	if o.Retry <= 0 {
		o.Retry = DefaultRetry
	}
	if o.StartTimeout <= 0 {
		o.StartTimeout = DefaultStartTimeout
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	s := &Syncer{opts: o, dir: o.Store.Prefix() + "/", objs: map[string]*object{}, mods: map[string]int64{},
		modMax: map[string]int64{}, stale: map[string]bool{},
		accept: o.AcceptReset, firstRead: make(chan struct{}), started: make(chan struct{})}
	s.refusal.Store(&ErrNotRead)
	return s
}

// Refusal is nil while the configuration served is the store's: ErrNotRead
// before the store was first read, a *ResetError while its content is
// refused. The Admin API refuses changes meanwhile, which would go into a
// store the node does not serve from. Safe for concurrent use.
func (s *Syncer) Refusal() error {
	if p := s.refusal.Load(); p != nil {
		return *p
	}
	return nil
}

// FirstRead is closed once the store was first read and its content
// accepted or refused: from then on Refusal is not ErrNotRead.
func (s *Syncer) FirstRead() <-chan struct{} { return s.firstRead }

// Reachable reports whether the store answered the last call made to it
// (apisix_etcd_reachable).
func (s *Syncer) Reachable() bool { return s.reachable.Load() }

// Lost reports whether the last call made to the store found it
// unreachable: false before the first call has ended (where Reachable is
// false too), true from the first one that failed, a first read at start
// included, until one succeeds. A watch that ended unavailable counts
// only when a probe failed too (Watch).
func (s *Syncer) Lost() bool { return s.down.Load() }

// IndexedResources are the resources whose modify index ModifyIndexes
// reports, as APISIX's apisix_etcd_modify_indexes does.
var IndexedResources = []string{"consumers", "global_rules", "protos", "routes", "services", "ssls", "stream_routes", "upstreams"}

// ModifyIndexes is APISIX's apisix_etcd_modify_indexes as of the last
// Spec handed on: for each of IndexedResources the highest ModRevision of
// its objects (0 when it has none), max_modify_index the highest of
// those, prev_index the highest ModRevision read or changed under the
// prefix (a deletion's included), and x_etcd_index the store's revision
// as last reported. Nil before the
// first read. The map is shared: read only.
func (s *Syncer) ModifyIndexes() map[string]int64 {
	if m := s.indexes.Load(); m != nil {
		return *m
	}
	return nil
}

// Revision is the store revision of the Spec last handed on (0 before
// the first read, and while serving the local copy).
func (s *Syncer) Revision() int64 { return s.revision.Load() }

// Load reads the whole prefix and returns its Spec, with Hash set. When
// the store cannot be reached (within StartTimeout when there is a local
// copy, else the store's own timeout) it returns the local copy instead
// (Watch then reads the store as soon as it answers); with no local copy
// either, the error.
//
// A store that was reset (ResetError: it answers at a lower revision than
// the local copy was written at, or from another etcd cluster, and holds
// another configuration) does not replace the local copy: Load logs it
// and returns the local copy, and Watch goes on reading the store every
// five Retry until it holds the copy's configuration, or a revision past
// the copy's in the copy's cluster. Options.AcceptReset accepts it.
func (s *Syncer) Load() (*spec.Spec, error) {
	ctx := context.Background()
	var cached *cacheFile
	var cerr error = fs.ErrNotExist
	var read chan struct{} // closed once the local copy is read
	if s.opts.CachePath != "" {
		if _, err := os.Stat(s.opts.CachePath); !errors.Is(err, fs.ErrNotExist) {
			// With a copy to serve, a node does not wait the store's
			// whole timeout (30 s by default) before it serves.
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, s.opts.StartTimeout)
			defer cancel()
		}
		// The copy is read beside the store (at 50 000 routes each
		// takes a CPU for a few hundred ms); list reads nothing of it.
		read = make(chan struct{})
		go func() {
			defer close(read)
			cached, cerr = readCache(s.opts.CachePath)
		}()
	}
	kvs, rev, err := s.read(ctx)
	if read != nil {
		<-read
	}
	if cached != nil {
		s.served = origin{cached.Revision, cached.cluster}
		s.servedRoutes = len(cached.Spec.Routes)
		s.lastHash = cached.Spec.Hash
	}
	if err == nil && s.current(cached, rev) {
		return s.serveCopy(cached, kvs, rev), nil
	}
	if err == nil {
		s.load(kvs, rev)
		sp, err := s.build()
		if err != nil {
			return nil, err
		}
		if s.refuse(sp) {
			s.rev = 0 // Watch reads the store again, and follows it only once accepted
			return cached.Spec, nil
		}
		s.servedRoutes = len(sp.Routes)
		s.lastHash = sp.Hash
		s.revision.Store(s.rev)
		if cached == nil || cached.Spec.Hash != sp.Hash || cached.Revision != s.rev || cached.cluster != s.cluster ||
			cached.checked != sp.Checked {
			// The local copy of a node started again on a store that
			// did not change meanwhile already holds sp, from this
			// revision of this cluster: at 50 000 routes writing it
			// again cost the start 0.3 s of CPU and a 14 MB fsync
			// before the workers could be started. One checked by
			// another build (an upgrade) is written again, once, so
			// that the next start serves it at once (current).
			s.writeCache(sp)
		}
		return sp, nil
	}
	if !errors.Is(err, store.ErrUnavailable) || s.opts.CachePath == "" {
		return nil, err
	}
	if cerr != nil {
		return nil, fmt.Errorf("%w; no local copy to start from: %w", err, cerr)
	}
	s.opts.Log.Warn("config store unreachable: serving the local copy of the last good configuration until it answers",
		"err", err, "copy", s.opts.CachePath, "routes", len(cached.Spec.Routes))
	return cached.Spec, nil
}

// current reports whether the local copy c holds the configuration the
// store read at rev holds, checked as this process would check it: it
// was written at rev of the store's cluster (etcd's revision names the
// whole content of a cluster's keyspace: the same objects, byte for
// byte), from a Spec every plugin configuration of which a registry of
// this one's fingerprint checked (the same build and executable file, so
// the same decodes, schemas and checks). The copy is this node's own,
// written only from a configuration so checked.
func (s *Syncer) current(c *cacheFile, rev int64) bool {
	return c != nil && c.Revision == rev && s.cluster != 0 && c.cluster == s.cluster &&
		s.opts.Plugins != nil && s.opts.Plugins.Trusts(c.checked)
}

// serveCopy is Load's answer when the local copy c is current with the
// store's read kvs, at rev: the copy, marked checked, so that the workers
// start on it at once, without waiting for the decode and check of kvs
// (at 50 000 routes and 20 000 upstreams two seconds of the supervisor's
// CPUs, before the workers' own build). Watch decodes and checks kvs first
// (checkPending), as Load would have, once the workers are ready
// (Started), and hands on the Spec they give should it differ from the
// copy: an object refused now that was not when the copy was written, as
// one whose $env:// reference this process cannot resolve.
func (s *Syncer) serveCopy(c *cacheFile, kvs []store.KV, rev int64) *spec.Spec {
	s.pending, s.rev, s.accept = kvs, rev, false
	s.served = origin{rev, s.cluster}
	s.refusal.Store(nil)
	s.readOnce.Do(func() { close(s.firstRead) })
	s.revision.Store(rev)
	s.opts.Log.Info("config store at the revision of the local copy: the copy served at once, the store's objects checked once the workers are ready",
		"revision", rev, "routes", len(c.Spec.Routes))
	sp := c.Spec
	sp.Checked = c.checked
	return sp
}

// checkPending decodes and checks the store's objects Load read and left
// to Watch (serveCopy), once the workers started on the copy are ready
// (Started) or StartedWait has passed, and hands their Spec on should it
// differ from the copy served.
func (s *Syncer) checkPending(ctx context.Context, onChange func(*spec.Spec), onError func(error)) {
	t := time.NewTimer(StartedWait)
	defer t.Stop()
	select {
	case <-s.started:
	case <-t.C:
	case <-ctx.Done():
		return
	}
	kvs := s.pending
	s.pending = nil
	s.load(kvs, s.rev)
	sp, err := s.build()
	if err != nil {
		onError(err) // the copy keeps serving, as a refused change leaves the one before
		return
	}
	// The store is not reset (refuse): it is at the copy's own revision
	// and cluster, which serveCopy accepted.
	if sp.Hash != s.lastHash {
		s.opts.Log.Warn("config store: its objects checked now differ from the local copy of the same revision: served as a change",
			"revision", s.rev, "routes", len(sp.Routes), "copy_routes", s.servedRoutes)
	}
	s.handOn(sp, onChange)
}

// StartedWait bounds how long Watch waits for Started before it checks
// the store's objects behind a local copy served at once (serveCopy).
const StartedWait = 10 * time.Second

// Started tells the Syncer that the workers started on the configuration
// Load returned are ready: the store's objects left to Watch by a start on
// the local copy are checked from then on (checkPending). Until then they
// wait, so that the check (at 50 000 routes two seconds of the
// supervisor's CPUs) does not take the CPUs from the workers' first
// build, nor every P of the supervisor from the goroutine that sends the
// workers their configuration, a socket buffer at a time (it took the
// first worker 3.5-5.7 s to get it, 0.1 s otherwise). Safe for concurrent
// use; calls after the first do nothing.
func (s *Syncer) Started() { s.startOnce.Do(func() { close(s.started) }) }

// Check reads the whole prefix once, as Load does but with no local
// copy, and returns the number of objects that pass their own checks,
// the Spec the node would serve (nil when the configuration is refused
// as a whole) and every problem found:
// each object the sync would leave out (it fails its schema, the plugins
// refuse its configuration as the Admin API would, a reference dangles),
// named by its key, joined (errors.Join); nil when the store's
// configuration would be served whole. A store that cannot be read is
// that error. It is what `coregate -t` reports of etcd. Check is used
// instead of Load and Watch, not with them.
func (s *Syncer) Check(ctx context.Context) (int, *spec.Spec, error) {
	var problems []error
	s.problems = &problems
	defer func() { s.problems = nil }()
	if err := s.list(ctx); err != nil {
		return 0, nil, err
	}
	sp, err := s.build()
	if err != nil {
		problems = append(problems, err)
	}
	return len(s.objs), sp, errors.Join(problems...)
}

// refuse decides on sp, the Spec of a full read: the store was reset when
// the configuration served was read at a later revision, or from another
// cluster, and sp differs from it. A reset store is refused (true; Refusal
// says why, logged when the refusal starts) unless Options.AcceptReset
// holds for this, the first read; otherwise the read is accepted and
// becomes the origin of the configuration served.
func (s *Syncer) refuse(sp *spec.Spec) bool {
	accept := s.accept
	s.accept = false
	was := s.served
	if was.rev != 0 && sp.Hash != s.lastHash &&
		(s.rev < was.rev || was.cluster != 0 && s.cluster != 0 && s.cluster != was.cluster) {
		e := &ResetError{Copy: s.opts.CachePath, CopyRevision: was.rev, StoreRevision: s.rev,
			CopyCluster: was.cluster, StoreCluster: s.cluster, CopyRoutes: s.servedRoutes, StoreRoutes: len(sp.Routes),
			Remedy: s.opts.ResetRemedy}
		attrs := []any{"copy", e.Copy, "copy_revision", e.CopyRevision, "copy_cluster", clusterString(e.CopyCluster),
			"copy_routes", e.CopyRoutes, "store_revision", e.StoreRevision, "store_cluster", clusterString(e.StoreCluster),
			"store_routes", e.StoreRoutes}
		if !accept {
			if _, refused := s.Refusal().(*ResetError); !refused {
				s.opts.Log.Error("config store reset: the node keeps serving its configuration, does not replace its local copy, and refuses changes",
					append(attrs, "remedy", e.Remedy)...)
			}
			var err error = e
			s.refusal.Store(&err)
			s.readOnce.Do(func() { close(s.firstRead) })
			return true
		}
		s.opts.Log.Warn("config store reset, accepted: its configuration replaces the one served", attrs...)
	} else if _, refused := s.Refusal().(*ResetError); refused {
		s.opts.Log.Info("config store accepted again", "revision", s.rev, "cluster", clusterString(s.cluster))
	}
	s.refusal.Store(nil)
	s.readOnce.Do(func() { close(s.firstRead) })
	s.served = origin{s.rev, s.cluster}
	return false
}

// Watch follows the store until ctx is done, calling onChange with each
// new Spec (Hash set; a Spec equal to the last one is not handed on) from
// this goroutine. onError reports a configuration refused as a whole (the
// previous one keeps serving). A store that cannot be reached is logged
// once per outage and tried again every Retry.
func (s *Syncer) Watch(ctx context.Context, onChange func(*spec.Spec), onError func(error)) {
	// The local copy is written off this goroutine (its JSON, streamed
	// from the forms kept of the objects that did not change, then
	// fsync), the newest Spec replacing one not written yet; the last
	// is written before Watch returns.
	s.toCache = make(chan cacheItem, 1)
	written := make(chan struct{})
	quit := make(chan struct{})
	go func() {
		defer close(written)
		var last time.Time
		every := CacheEvery
		for it := range s.toCache {
			// At most one write per CacheEvery, or per ten times the
			// last write: during a bulk load the copy is rewritten once
			// a second, not once per change, and a copy that takes long
			// to write takes at most a tenth of a CPU (50 000 routes
			// and 20 000 upstreams: 14 MB, 13-15 ms of CPU after a
			// change, 130-140 ms for a write that encodes every object,
			// as the first).
			if wait := every - time.Since(last); wait > 0 {
				select {
				case <-time.After(wait):
				case <-quit:
				}
				select {
				case newer, ok := <-s.toCache:
					if ok {
						it = newer
					}
				default:
				}
			}
			last = time.Now()
			s.writeCacheAt(it.sp, it.from, false)
			every = max(CacheEvery, 10*time.Since(last))
		}
	}()
	defer func() {
		close(quit)
		close(s.toCache)
		<-written
	}()
	if s.pending != nil {
		s.checkPending(ctx, onChange, onError)
	}
	for ctx.Err() == nil {
		if s.rev == 0 {
			if err := s.list(ctx); err != nil {
				if ctx.Err() != nil {
					return
				}
				if errors.Is(err, errReported) {
					// A store that refuses its content as a whole (a
					// standalone file that does not parse): the
					// previous configuration serves.
					onError(errors.Unwrap(err))
				}
				sleep(ctx, s.opts.Retry)
				continue
			}
			sp, err := s.build()
			switch {
			case err != nil:
				onError(err)
			case s.refuse(sp):
				// Read it again later: the store may be brought back.
				s.rev = 0
				sleep(ctx, 5*s.opts.Retry)
				continue
			default:
				s.handOn(sp, onChange)
			}
		}
		err := s.follow(ctx, onChange, onError)
		if ctx.Err() != nil {
			return
		}
		// Compacted, or the store went away (and perhaps restarted):
		// start over from a full read.
		if errors.Is(err, store.ErrUnavailable) {
			s.watchLost(ctx, err)
		} else {
			s.opts.Log.Info("config watch ended: reading the store again", "err", err, "revision", s.rev)
		}
		s.rev = 0
	}
}

// lost marks the store unreachable, logging the start of an outage.
func (s *Syncer) lost(err error) {
	s.down.Store(true)
	if s.reachable.Swap(false) {
		s.opts.Log.Warn("config store unreachable: serving the last configuration until it answers", "err", err)
	}
}

// found marks the store reachable, logging the end of an outage.
func (s *Syncer) found() {
	s.down.Store(false)
	if !s.reachable.Swap(true) && s.seen {
		s.opts.Log.Info("config store reachable again")
	}
	s.seen = true
}

// watchLost decides on a watch that ended unavailable (err): it heard
// nothing from the store for three keep-alives, or its stream closed.
// That alone is no evidence that the store is gone: a watch's progress
// answers can be late on a loaded machine while etcd answers every call,
// and taken for lost, the store had the Admin API refuse every call
// until the full read that follows answered (a second at 50 000 routes).
// The store is lost when a probe, one read bounded by ProbeTimeout,
// fails unavailable too; otherwise the watch starts over from a full
// read, the store reachable all along.
func (s *Syncer) watchLost(ctx context.Context, err error) {
	pctx, cancel := context.WithTimeout(ctx, ProbeTimeout)
	defer cancel()
	_, perr := s.opts.Store.Get(pctx, s.dir)
	switch {
	case ctx.Err() != nil:
	case errors.Is(perr, store.ErrUnavailable):
		s.lost(err)
	default:
		s.opts.Log.Info("config watch ended, the store answers: reading it again", "err", err, "revision", s.rev)
	}
}

// follow runs one watch from s.rev+1 until it ends.
func (s *Syncer) follow(ctx context.Context, onChange func(*spec.Spec), onError func(error)) error {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ch := s.opts.Store.Watch(wctx, s.dir, s.rev+1)
	var timer *time.Timer
	var fire <-chan time.Time
	// last is when the last publication started; paced, when the next
	// may start for the CPU the ones before it took (pace).
	var last, paced time.Time
	pending := false
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	// publish publishes, and moves paced on by its CPU time: its wall
	// clock, on the supervisor's CPUs beside the workers' loops and every
	// other process of a busy machine, was five to ten times that, and
	// held the next change back for hundreds of ms.
	publish := func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		last = time.Now()
		cpu := threadcpu.Now()
		s.publish(onChange, onError)
		paced = pace(paced, last, threadcpu.Now()-cpu)
	}
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-fire:
			fire = nil
			pending = false
			publish()
		case wr, ok := <-ch:
			if !ok {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				return fmt.Errorf("%w: watch closed", store.ErrUnavailable)
			}
			if wr.Err != nil {
				if pending {
					s.publish(onChange, onError)
				}
				return wr.Err
			}
			s.found()
			for _, ev := range wr.Events {
				s.apply(ev)
			}
			s.rev = max(s.rev, wr.Revision)
			s.served.rev = max(s.served.rev, s.rev)
			if pending {
				break
			}
			// A change Coalesce after the last publication, and within
			// the pace's credit, is published at once; one that comes
			// sooner waits, with whatever else comes meanwhile.
			wait := max(s.opts.Coalesce-time.Since(last), time.Until(paced))
			if wait <= 0 {
				publish()
				break
			}
			pending = true
			if timer == nil {
				timer = time.NewTimer(wait)
			} else {
				timer.Reset(wait)
			}
			fire = timer.C
		}
	}
}

// coalesceCredit is the pace's credit: publications that start after a
// quiet coalesceCredit go out back to back while their CPU time adds up to
// a tenth of it. It is short: changes that come one at a time are each
// published at once whatever the credit, since each leaves more time
// before the next than ten times its CPU, and a longer credit only let a
// bulk load publish more often. At 250 ms bench admin's 400 routes at
// once at 50 000 routes were published (and built by each worker) 25
// times, answered in 817 ms and served in 864; at 60 ms 13-14 times,
// 333-493 ms and 375-531 ms (the syncer's Hash in chunks, 3 ms of CPU a
// publication).
const coalesceCredit = 60 * time.Millisecond

// pace is when the next publication may start after one that started at
// at and took d of CPU time, the one before it having been paced: ten
// times d after paced, counted from no earlier than coalesceCredit before
// at. A burst of changes to a large configuration so spends at most
// about a tenth of a CPU building Specs, whatever its size (50 000
// routes: a few milliseconds each), while a change that comes alone, or
// one of a few, is published at once: a window of ten times the last
// publication from its start held changes a publication apart (at 50 000
// routes some 70 ms, bench admin's one at a time) for 15 ms in the
// median and up to 55.
func pace(paced, at time.Time, d time.Duration) time.Time {
	if floor := at.Add(-coalesceCredit); paced.Before(floor) {
		paced = floor
	}
	return paced.Add(10 * d)
}

// list reads the whole prefix into s.objs.
func (s *Syncer) list(ctx context.Context) error {
	kvs, rev, err := s.read(ctx)
	if err != nil {
		return err
	}
	s.load(kvs, rev)
	return nil
}

// read reads the whole prefix, and the store's cluster id into
// s.cluster, without decoding it (load does).
func (s *Syncer) read(ctx context.Context) ([]store.KV, int64, error) {
	kvs, rev, err := s.opts.Store.List(ctx, s.dir)
	if err != nil {
		if errors.Is(err, store.ErrUnavailable) {
			s.lost(err)
		} else if msg := err.Error(); msg != s.readErr {
			// Logged and reported once, not at every Retry.
			s.readErr = msg
			s.opts.Log.Error("config store: read failed", "err", err)
			return nil, 0, &reportedError{err}
		}
		return nil, 0, err
	}
	s.readErr = ""
	s.found()
	if _, refused := s.Refusal().(*ResetError); !refused { // read again every 5 Retry, logged once
		s.opts.Log.Info("config store read", "revision", rev, "keys", len(kvs))
	}
	if c, ok := s.opts.Store.(interface{ ClusterID() uint64 }); ok {
		s.cluster = c.ClusterID()
	}
	return kvs, rev, nil
}

// load decodes kvs, the whole prefix read at revision rev, into s.objs.
func (s *Syncer) load(kvs []store.KV, rev int64) {
	clear(s.objs)
	s.valid, s.foreign = false, 0
	s.clearMods()
	clear(s.order) // no stale object kept alive past the new length
	s.order, s.sorted, s.last = s.order[:0], false, nil
	// The secrets first: the other objects' $secret:// references are
	// read with them when their plugins are checked.
	secrets := s.dir + "secrets/"
	for _, kv := range kvs {
		if strings.HasPrefix(kv.Key, secrets) {
			s.prevIdx = max(s.prevIdx, kv.ModRevision)
			s.put(kv)
		}
	}
	// The others' decodes and plugin checks, which read nothing of s but
	// the secrets now put, on every CPU (at start, 50 000 routes took
	// 1.8 s of CPU on one), then put in order.
	pre := s.decodeAll(kvs, secrets)
	for i, kv := range kvs {
		if !strings.HasPrefix(kv.Key, secrets) {
			s.prevIdx = max(s.prevIdx, kv.ModRevision)
			s.putDecoded(kv, &pre[i])
		}
	}
	s.rev = rev
}

// decodedKV is an object decoded and its plugins checked (decode,
// checkPlugins) ahead of putDecoded; zero for a key put ignores.
type decodedKV struct {
	o   *object
	err error
}

// decodeAll decodes and checks the objects of kvs outside secrets, on
// GOMAXPROCS goroutines; the result is indexed as kvs.
func (s *Syncer) decodeAll(kvs []store.KV, secrets string) []decodedKV {
	out := make([]decodedKV, len(kvs))
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), len(kvs)/256+1) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(64)) - 64
				if i >= len(kvs) {
					return
				}
				for j := i; j < min(i+64, len(kvs)); j++ {
					if kv := kvs[j]; !strings.HasPrefix(kv.Key, secrets) {
						out[j] = s.decodeKV(kv)
					}
				}
			}
		}()
	}
	wg.Wait()
	return out
}

// decodeKV is put's decode and check of kv, touching nothing of s:
// safe to run beside other calls of it.
func (s *Syncer) decodeKV(kv store.KV) decodedKV {
	_, kind, id, ok := s.classify(kv.Key)
	if !ok {
		return decodedKV{}
	}
	o, err := decode(kind, id, kv.Value)
	if err == nil {
		err = s.checkPlugins(o)
	}
	return decodedKV{o: o, err: err}
}

func (s *Syncer) apply(ev store.Event) {
	s.prevIdx = max(s.prevIdx, ev.KV.ModRevision)
	if ev.Type == store.EventDelete {
		o := s.objs[ev.KV.Key]
		s.replace(o, nil)
		delete(s.objs, ev.KV.Key)
		s.delMod(ev.KV.Key)
		if o != nil && o.kind == kindSecret {
			s.secretsChanged()
		}
		return
	}
	s.put(ev.KV)
}

// secretsChanged hands the secret objects now read to the registry's
// SecretSource (plugins.Registry.UpdateSecrets), with which the objects
// read next have their $secret:// references resolved.
func (s *Syncer) secretsChanged() {
	if s.opts.Plugins == nil {
		return
	}
	var objs []json.RawMessage
	for _, o := range s.objs {
		if o.kind == kindSecret {
			objs = append(objs, o.raw)
		}
	}
	s.opts.Plugins.UpdateSecrets(objs)
}

// resources maps the key segment of each resource a Spec holds to its
// kind.
var resources = map[string]string{
	"routes":          spec.KindRoute,
	"services":        spec.KindService,
	"upstreams":       spec.KindUpstream,
	"consumers":       spec.KindConsumer,
	"plugin_configs":  spec.KindPluginConfig,
	"global_rules":    spec.KindGlobalRule,
	"consumer_groups": spec.KindConsumerGroup,
	"ssls":            spec.KindSSL,
	"plugin_metadata": kindPluginMetadata,
	"secrets":         kindSecret,
}

// kindSecret is a secret manager's object (secrets/<manager>/<id>),
// whose id in a Spec is "<manager>/<id>", checked against its manager's
// schema (package secret).
const kindSecret = "secret"

// kindPluginMetadata is a plugin's metadata
// (plugin_metadata/<plugin>), which the plugin registry checks when a
// worker builds the Spec.
const kindPluginMetadata = "plugin_metadata"

// kindCredential is a consumer's credential
// (consumers/<username>/credentials/<id>), which has no object schema of
// the config model's own.
const kindCredential = "credential"

// put decodes one stored object into s.objs; a key of no known resource
// is ignored, an invalid object is logged and left out.
func (s *Syncer) put(kv store.KV) { s.putDecoded(kv, nil) }

// putDecoded is put, with kv's decode and check done ahead (decodeKV)
// when pre is not nil.
func (s *Syncer) putDecoded(kv store.KV, pre *decodedKV) {
	res, kind, id, ok := s.classify(kv.Key)
	if res != "" && slices.Contains(IndexedResources, res) {
		s.putMod(res, kv.Key, kv.ModRevision)
	}
	if !ok {
		return
	}
	var o *object
	var err error
	if pre != nil {
		o, err = pre.o, pre.err
	} else if o, err = decode(kind, id, kv.Value); err == nil {
		err = s.checkPlugins(o)
	}
	if err != nil && kind == spec.KindGlobalRule {
		o, err = &object{kind: kind, id: spec.StringID(id), refusal: err}, nil
	}
	if err != nil {
		s.replace(s.objs[kv.Key], nil)
		delete(s.objs, kv.Key)
		attrs := []any{"key", kv.Key, "revision", kv.ModRevision}
		if o, ok := s.opts.Store.(interface{ Origin(key string) string }); ok {
			attrs = append(attrs, "item", o.Origin(kv.Key)) // the standalone file's
		}
		s.opts.Log.Error("config store: invalid object left out", append(attrs, "err", err)...)
		if s.problems != nil {
			*s.problems = append(*s.problems, fmt.Errorf("%s (revision %d): %w", kv.Key, kv.ModRevision, err))
		}
		if kind == kindSecret {
			s.secretsChanged()
		}
		return
	}
	o.key, o.create = kv.Key, kv.CreateRevision
	h := sha256.New()
	h.Write([]byte(kv.Key))
	h.Write([]byte{0})
	h.Write(kv.Value)
	h.Sum(o.sum[:0])
	s.replace(s.objs[kv.Key], o)
	s.objs[kv.Key] = o
	if kind == kindSecret {
		s.secretsChanged()
	}
}

// classify returns the resource of the key's path (res; "" for a key
// outside the prefix or without a "/" after it), and the kind and id of
// the object stored there; ok false for a key of no known resource, or
// an id of the wrong form, which put ignores.
func (s *Syncer) classify(key string) (res, kind, id string, ok bool) {
	rest, ok := strings.CutPrefix(key, s.dir)
	if !ok {
		return "", "", "", false
	}
	res, id, ok = strings.Cut(rest, "/")
	if !ok {
		return "", "", "", false
	}
	kind = resources[res]
	if kind == spec.KindConsumer && strings.Contains(id, "/") {
		// consumers/<username>/credentials/<id>: a credential, whose id
		// in a Spec is "<username>/credentials/<id>".
		if _, _, isCred := spec.CredentialOwner(id); isCred {
			kind = kindCredential
		}
	}
	if kind == "" || id == "" || kind != kindCredential && kind != kindSecret && strings.Contains(id, "/") {
		return res, "", "", false
	}
	if kind == kindSecret {
		if m, sid, ok := strings.Cut(id, "/"); !ok || m == "" || sid == "" || strings.Contains(sid, "/") {
			return res, "", "", false
		}
	}
	return res, kind, id, true
}

func decode(kind, id string, value []byte) (*object, error) {
	o := &object{kind: kind, id: spec.StringID(id)}
	var err error
	switch kind {
	case spec.KindRoute:
		if o.route, err = spec.DecodeRoute(value); err == nil && o.route.ID.IsZero() {
			o.route.ID = o.id
		}
	case spec.KindService:
		if o.svc, err = spec.DecodeService(value); err == nil && o.svc.ID.IsZero() {
			o.svc.ID = o.id
		}
	case spec.KindUpstream:
		if o.ups, err = spec.DecodeUpstream(value); err == nil && o.ups.ID.IsZero() {
			o.ups.ID = o.id
		}
	case spec.KindSSL:
		// Keys are not read here: they may be encrypted
		// (apisix.data_encryption); the workers' tlsconf reads them.
		if o.ssl, err = spec.DecodeSSL(value); err == nil && o.ssl.ID.IsZero() {
			o.ssl.ID = o.id
		}
	case kindCredential:
		// Stored with its own id ("c1") or none; the Spec's is the whole
		// "<username>/credentials/<id>".
		var m map[string]json.RawMessage
		if err = json.Unmarshal(value, &m); err != nil {
			break
		}
		var plugins map[string]json.RawMessage
		if err = json.Unmarshal(m["plugins"], &plugins); m["plugins"] != nil && err != nil {
			break
		}
		err = nil
		m["id"], _ = json.Marshal(id)
		o.raw, err = json.Marshal(m)
	case kindSecret:
		// Stored with the id "<manager>/<id>", as the key's.
		manager, _, _ := strings.Cut(id, "/")
		if err = secret.Validate(manager, value); err != nil {
			break
		}
		var m map[string]json.RawMessage
		if err = json.Unmarshal(value, &m); err != nil {
			break
		}
		m["id"], _ = json.Marshal(id)
		o.raw, err = json.Marshal(m)
	case kindPluginMetadata:
		var b bytes.Buffer
		if err = json.Compact(&b, value); err != nil {
			break
		}
		if b.Len() < 2 || b.Bytes()[0] != '{' {
			err = errors.New("plugin metadata is not an object")
			break
		}
		// The key names the plugin, whatever "id" the value holds.
		var m map[string]json.RawMessage
		if err = json.Unmarshal(b.Bytes(), &m); err != nil {
			break
		}
		m["id"], _ = json.Marshal(id)
		o.raw, err = json.Marshal(m)
	default: // consumers, plugin configs, global rules, consumer groups
		var b bytes.Buffer
		if err = json.Compact(&b, value); err != nil {
			break
		}
		idKey := "id"
		if kind == spec.KindConsumer {
			idKey = "username"
		}
		raw := withID(b.Bytes(), idKey, id)
		switch kind {
		case spec.KindConsumer:
			o.cons, err = spec.DecodeConsumer(raw)
		case spec.KindPluginConfig:
			o.pc, err = spec.DecodePluginConfig(raw)
		case spec.KindGlobalRule:
			o.gr, err = spec.DecodeGlobalRule(raw)
		case spec.KindConsumerGroup:
			o.cg, err = spec.DecodeConsumerGroup(raw)
		}
	}
	if err != nil {
		return nil, err
	}
	return o, nil
}

// checkPlugins checks an object's plugins with Options.Plugins, as the
// Admin API does before it stores one: a plugin the gateway does not
// have, or a configuration its schema refuses, leaves out an object
// written to the store by other means, as APISIX's etcd checker leaves it
// out, where every worker would refuse every configuration holding it
// (and so every change after it).
func (s *Syncer) checkPlugins(o *object) error {
	reg := s.opts.Plugins
	if reg == nil {
		return nil
	}
	var confs map[string]json.RawMessage
	consumer := false
	switch o.kind {
	case spec.KindRoute:
		confs = o.route.Plugins
	case spec.KindService:
		confs = o.svc.Plugins
	case spec.KindUpstream, spec.KindSSL, kindSecret:
		return nil
	case kindPluginMetadata: // o.raw's "id" is the key's
		name, conf, err := plugins.SplitMetadata(o.raw)
		if err != nil {
			return err
		}
		return reg.CheckMetadata(name, conf)
	case spec.KindConsumer:
		confs, consumer = o.cons.Plugins, true
	case spec.KindPluginConfig:
		confs = o.pc.Plugins
	case spec.KindGlobalRule:
		confs = o.gr.Plugins
	case spec.KindConsumerGroup:
		confs = o.cg.Plugins
	case kindCredential:
		var v struct {
			Plugins map[string]json.RawMessage `json:"plugins"`
		}
		if err := json.Unmarshal(o.raw, &v); err != nil {
			return err
		}
		confs, consumer = v.Plugins, true
		// What the Admin API refuses beside the plugins' own checks.
		if _, err := reg.CheckCredential(confs); err != nil {
			return err
		}
	}
	_, err := reg.CheckAll(confs, consumer)
	return err
}

// withID gives a compact JSON object the member key: id when it has none
// (the key's id is the object's).
func withID(raw []byte, key, id string) json.RawMessage {
	if !spec.RawID(raw, key).IsZero() || len(raw) < 2 || raw[0] != '{' {
		return raw
	}
	k, _ := json.Marshal(key)
	v, _ := json.Marshal(id)
	out := make([]byte, 0, len(raw)+len(k)+len(v)+2)
	out = append(out, '{')
	out = append(out, k...)
	out = append(out, ':')
	out = append(out, v...)
	if raw[1] != '}' {
		out = append(out, ',')
	}
	return append(out, raw[1:]...)
}

// build makes the Spec of s.objs: objects in creation order, those whose
// references dangle left out (logged), Hash set. The objects are shared
// with earlier Specs and never modified (but for their chunk, the
// Syncer's own).
//
// The Hash is not SetHash's (the SHA-256 of the Spec's JSON, some 20 ms
// for 5 000 routes, paid on every change) but specHasher's, made of the
// SHA-256s of the stored objects served (key and value), in order: the
// same store content gives the same Hash, which is what a reader of Hash
// relies on to skip a configuration it already has. Each object's is
// computed once, when it is read, the order is kept from one build to the
// next (replace), and so are the sums of the chunks of objects that did
// not change: a build of 50 000 routes neither sorts nor hashes them
// again. Nor, when the objects changed since the last build were replaced
// in their places, added after the newest or removed, as most changes
// are, does it walk them: buildFrom makes the Spec from the last one's,
// and only when that cannot be made equal to this walk's does build walk
// every object.
func (s *Syncer) build() (*spec.Spec, error) {
	if !s.sorted {
		clear(s.order)
		s.order = s.order[:0]
		for _, o := range s.objs {
			s.order = append(s.order, o)
		}
		slices.SortFunc(s.order, byCreation)
		s.sorted = true
	}
	objs := s.order
	fast := s.fastCheck()
	s.valid, s.recheck = false, false
	clear(s.changed) // no object kept alive past the new length
	s.changed = s.changed[:0]
	if sp := s.buildFrom(fast); sp != nil {
		s.valid = true
		return sp, nil
	}
	s.last, s.edited, s.removed = nil, s.edited[:0], s.removed[:0]
	s.room = spec.Spec{} // no array of a Spec before kept alive
	for k := range s.holes {
		s.holes[k] = s.holes[k][:0] // every object's pos its place (add)
	}
	skip := map[string]bool{} // kind + " " + id
	for range len(objs) + 1 {
		sp := &spec.Spec{Routes: room[*spec.Route](s.sizes[0]), Services: room[*spec.Service](s.sizes[1]),
			Upstreams: room[*spec.Upstream](s.sizes[2])}
		h := specHasher{top: sha256.New(), chunk: s.chunk[:0], ends: s.chunkEnds[:0], sums: s.chunkSums[:0]}
		for _, o := range objs {
			if len(skip) > 0 && skip[o.kind+" "+o.id.String()] {
				continue
			}
			if o.refusal != nil {
				clear(h.chunk)
				return nil, fmt.Errorf("config store: global rule %s refuses the configuration, which would serve every route without it: %w", o.id, o.refusal)
			}
			h.add(o)
			o.pos = add(sp, o)
		}
		sp.Routes, sp.Services, sp.Upstreams = nilIfNone(sp.Routes), nilIfNone(sp.Services), nilIfNone(sp.Upstreams)
		var err error
		if !fast || len(skip) > 0 {
			err = sp.Check()
		}
		var re *spec.ReferenceError
		if err == nil {
			s.valid = len(skip) == 0
			s.sizes = [3]int{len(sp.Routes), len(sp.Services), len(sp.Upstreams)}
			sp.Hash, s.chunk = h.sum(s.keepTop), h.chunk
			clear(h.sums[len(h.sums):cap(h.sums)]) // no chunk of a build before kept alive
			s.chunkEnds, s.chunkSums = h.ends, h.sums
			for _, kind := range listKinds {
				onList(sp, &s.room, kind, listOp{do: keepOp})
			}
			if s.valid {
				s.last, s.lastN = sp, len(objs)
			} else {
				s.room = spec.Spec{}
			}
			s.mark(sp)
			return sp, nil
		}
		clear(h.chunk)
		if !errors.As(err, &re) || skip[re.Kind+" "+re.ID] {
			return nil, err
		}
		s.opts.Log.Error("config store: object left out", "kind", re.Kind, "id", re.ID, "err", err)
		if s.problems != nil {
			*s.problems = append(*s.problems, fmt.Errorf("%s %s: %w", re.Kind, re.ID, err))
		}
		skip[re.Kind+" "+re.ID] = true
	}
	return nil, errors.New("config store: references do not settle")
}

// buildFrom makes the Spec of s.objs from the last build's (s.last),
// as build would make it whole, when every change since replaced an
// object in its place, added one after the newest or removed one
// (replace): the resources' lists that changed are copied from the last
// Spec's, around the places of the objects removed (a copy of the runs
// between them, no walk of the objects), and patched where an object was
// replaced (object.pos, less the holes before it: listPos), the objects
// added appended; a list that only has objects added is the last Spec's
// grown in place, in its array (grown, Syncer.room); the others are the
// last Spec's lists, shared (a Spec's lists are never modified below
// their length: spec.Spec). Its Hash takes the last build's chunk sums
// over but for the chunks that hold an object replaced, added or removed
// (hashFrom). nil when it cannot be made so, or would not equal build's:
// no last Spec, an object changed refuses the configuration, or fast
// false and spec.Check refuses it (build leaves out what it must then:
// the objects that named an upstream, service, plugin config or consumer
// group removed, say).
//
// One route of 50 000 replaced, with 20 000 upstreams: 160 µs of CPU,
// 140 of them the copy of the routes' list (400 kB of pointers, copied
// with the collector's write barriers, which a heap this size has on
// much of the time), 20 the Hash; build walking every object took
// 650-770 µs, and made 170 kB more garbage (BenchmarkBuildChange/
// one-of-50000, pprof of build). One route of 50 000 removed: 0.38-0.46
// ms and 403 kB a build, where the whole build it took before made 575
// kB in 1.16-1.60 ms (BenchmarkBuildChange/delete-one-of-50000,
// GOMAXPROCS=1 on a busy machine; a DELETE and a PUT coalesced,
// delete-then-put-of-50000: 0.59-0.75 ms and 412 kB, where 1.16-1.29 ms
// and 584 kB). One route added after 50 000, the put included: 23-26 µs
// and 10.9 kB, where the copy of the list made it 0.51-0.64 ms and 422
// kB; ten added, a bulk load's batch: 0.18-0.19 ms and 97 kB, where
// 0.54-0.61 ms and 604-629 kB (add-to-50000, add-10-to-50000,
// GOMAXPROCS=1 on a busy machine).
func (s *Syncer) buildFrom(fast bool) *spec.Spec {
	last := s.last
	if last == nil || !s.sorted {
		return nil
	}
	slices.Sort(s.edited)
	s.edited = slices.Compact(s.edited)
	added := s.order[s.kept():]
	// more: by resource (listKinds), how many objects are added to its
	// list; -1 for a list that is kept as it is.
	// patched: the list has objects removed or replaced, and is
	// copied; a list that only has objects added grows in place
	// (onList, growOp).
	var more [len(listKinds)]int
	var patched [len(listKinds)]bool
	for i := range more {
		more[i] = -1
	}
	for _, r := range s.removed {
		more[r.list] = max(more[r.list], 0)
		patched[r.list] = true
	}
	for o := range s.editedObjects() {
		if o.refusal != nil {
			return nil
		}
		k := listIndex(o.kind)
		more[k] = max(more[k], 0)
		patched[k] = true
	}
	for _, o := range added {
		if o.refusal != nil {
			return nil
		}
		k := listIndex(o.kind)
		more[k] = max(more[k], 0) + 1
	}
	sp := new(spec.Spec)
	*sp = *last // its lists; Hash and Checked are set below
	for k, n := range more {
		if n < 0 {
			continue
		}
		if !patched[k] {
			onList(sp, &s.room, listKinds[k], listOp{do: growOp, more: n})
			continue
		}
		// The places in the last Spec of the objects removed from the
		// list, in order (a list's objects are in s.order's order), left
		// out of its copy; then their pos put among the list's holes.
		spots := s.spots[:0]
		for _, r := range s.removed {
			if r.list == k {
				spots = append(spots, s.listPos(k, r.pos))
			}
		}
		onList(sp, &s.room, listKinds[k], listOp{do: copyOp, out: spots, more: n})
		for _, r := range s.removed {
			if r.list == k {
				i, _ := slices.BinarySearch(s.holes[k], r.pos)
				s.holes[k] = slices.Insert(s.holes[k], i, r.pos)
			}
		}
		s.spots = spots[:0]
	}
	for o := range s.editedObjects() {
		set(sp, o, s.listPos(listIndex(o.kind), o.pos))
	}
	for _, o := range added {
		k := listIndex(o.kind)
		o.pos = add(sp, o) + len(s.holes[k]) // past every hole
	}
	if !fast && sp.Check() != nil {
		return nil
	}
	s.fromLast++
	sp.Hash = s.hashFrom()
	s.mark(sp)
	s.sizes = [3]int{len(sp.Routes), len(sp.Services), len(sp.Upstreams)}
	for k, n := range more {
		if n >= 0 {
			onList(sp, &s.room, listKinds[k], listOp{do: keepOp})
		}
	}
	s.last, s.lastN = sp, len(s.order)
	s.edited, s.removed = s.edited[:0], s.removed[:0]
	return sp
}

// editedObjects yields the objects replaced in place since the last
// build that are still in s.order (s.edited, sorted, less those removed
// since), in order.
func (s *Syncer) editedObjects() func(yield func(*object) bool) {
	return func(yield func(*object) bool) {
		r := 0 // the first removal at or past the edit
		for _, at := range s.edited {
			for r < len(s.removed) && s.removed[r].at < at {
				r++
			}
			if r < len(s.removed) && s.removed[r].at == at {
				continue // replaced, then removed
			}
			if !yield(s.order[at-r]) {
				return
			}
		}
	}
}

// hashFrom is the Hash of s.order, as specHasher makes it, made from the
// last build's chunks (s.chunkEnds, s.chunkSums), which it replaces: a
// chunk that starts where one of the last build's started (less the
// objects removed before it) and holds no object replaced or removed
// since (s.edited, s.removed) is that chunk, its sum taken over, unless
// it ended the last build's objects and objects were added since, after
// an object whose sum does not cut there; the others are cut and hashed
// again, from the first object of the chunk that changed to the first
// cut where one of the last build's chunks starts again (the cuts
// depend on the objects alone: a chunk whose last object was removed
// runs on to the next one's end). A route replaced or removed among
// 70 000 objects hashes one chunk of some 256 objects' sums (two, for
// one whose sum cut), and the 270 or so sums of the chunks. When nothing
// was removed and nothing replaced before the last build's last chunk
// (objects added after the others, a bulk load's), the walk starts
// there, from the SHA-256 state after the chunks before it
// (Syncer.topState): the objects added, the last chunk's and the sums
// of the chunks from it on are hashed, and no other chunk's sum.
func (s *Syncer) hashFrom() (out [32]byte) {
	objs, lastEnds, lastSums := s.order, s.chunkEnds, s.chunkSums
	ends, sums := s.spareEnds[:0], s.spareSums[:0]
	top, ch := sha256.New(), sha256.New()
	// now is the position in s.order of the one at in the last build's
	// order (or of the object after it, removed).
	now := func(at int) int { return at - s.removedBefore(at) }
	// The next chunk starts at p (in s.order); c is the first of the last
	// chunks ending past p, e and r the first edit and removal at or past
	// its start (in the last build's order).
	p, c, e, r := 0, 0, 0, 0
	// inPlace: the chunks before the last build's last one are kept
	// (nothing was removed, nothing replaced before it), and so is top's
	// state after their sums (s.topState): the walk starts at the last
	// chunk, and ends and sums keep theirs in lastEnds' and lastSums'
	// arrays.
	inPlace := false
	if k := len(lastEnds) - 1; k > 0 && s.topN == k && len(s.removed) == 0 &&
		(len(s.edited) == 0 || s.edited[0] >= lastEnds[k-1]) {
		if err := top.(encoding.BinaryUnmarshaler).UnmarshalBinary(s.topState); err == nil {
			inPlace = true
			ends, sums = lastEnds[:k], lastSums[:k]
			p, c = lastEnds[k-1], k
		} else {
			top.Reset()
		}
	}
	// A chunk's sum is written to top once the chunk after it is cut, so
	// that top's state after every chunk but the last can be kept
	// (s.topState) for the next build.
	var held *chunkSum
	hash := func(sum *chunkSum) {
		if held != nil {
			top.Write(held.sum[:])
		}
		held = sum
	}
	for p < len(objs) {
		if c < len(lastEnds) {
			start, end := 0, lastEnds[c]
			if c > 0 {
				start = lastEnds[c-1]
			}
			for e < len(s.edited) && s.edited[e] < start {
				e++
			}
			for r < len(s.removed) && s.removed[r].at < start {
				r++
			}
			if q := now(end); now(start) == p && (e == len(s.edited) || s.edited[e] >= end) &&
				(r == len(s.removed) || s.removed[r].at >= end) && (q == len(objs) || objs[q-1].sum[0] == 0) {
				ends, sums = append(ends, q), append(sums, lastSums[c])
				hash(lastSums[c])
				p = q
				c++
				continue
			}
		}
		q := p
		for q < len(objs) {
			q++
			if objs[q-1].sum[0] == 0 {
				break
			}
		}
		sum := chunkOf(ch, objs[p:q])
		ends, sums = append(ends, q), append(sums, sum)
		hash(sum)
		p = q
		for c < len(lastEnds) && now(lastEnds[c]) <= p {
			c++
		}
	}
	if inPlace {
		// The last build's chunks past those kept, where ends and sums
		// have not written over them: none kept alive.
		clear(lastSums[min(len(sums), len(lastSums)):])
		s.chunkEnds, s.chunkSums = ends, sums
	} else {
		clear(lastSums) // no chunk of a build before kept alive
		s.chunkEnds, s.chunkSums, s.spareEnds, s.spareSums = ends, sums, lastEnds[:0], lastSums[:0]
	}
	s.keepTop(top, len(sums)-1)
	if held != nil {
		top.Write(held.sum[:])
	}
	top.Sum(out[:0])
	return out
}

// keepTop keeps top's state, the sums of n chunks written, as
// s.topState, for hashFrom to take up where they are kept.
func (s *Syncer) keepTop(top hash.Hash, n int) {
	st, err := top.(encoding.BinaryAppender).AppendBinary(s.topState[:0])
	if err != nil || n <= 0 {
		s.topN = 0
		return
	}
	s.topState, s.topN = st, n
}

// mark sets sp's Checked: every object's plugins passed checkPlugins as
// it was read, and the workers need not check them again.
func (s *Syncer) mark(sp *spec.Spec) {
	sp.Checked = [32]byte{}
	if s.opts.Plugins != nil {
		sp.Checked = s.opts.Plugins.Fingerprint()
	}
}

// listKinds are the kinds of the objects a Spec lists, each in a list of
// its own; listIndex is a kind's index there.
var listKinds = [...]string{spec.KindRoute, spec.KindService, spec.KindUpstream, spec.KindConsumer,
	spec.KindPluginConfig, spec.KindGlobalRule, spec.KindConsumerGroup, spec.KindSSL,
	kindCredential, kindPluginMetadata, kindSecret}

func listIndex(kind string) int {
	for i, k := range listKinds {
		if k == kind {
			return i
		}
	}
	panic("storesync: no list of " + kind)
}

// add appends o to its list of sp and returns its position there.
func add(sp *spec.Spec, o *object) int {
	switch o.kind {
	case spec.KindRoute:
		return appended(&sp.Routes, o.route)
	case spec.KindService:
		return appended(&sp.Services, o.svc)
	case spec.KindUpstream:
		return appended(&sp.Upstreams, o.ups)
	case spec.KindConsumer:
		return appended(&sp.Consumers, o.cons)
	case spec.KindPluginConfig:
		return appended(&sp.PluginConfigs, o.pc)
	case spec.KindGlobalRule:
		return appended(&sp.GlobalRules, o.gr)
	case spec.KindConsumerGroup:
		return appended(&sp.ConsumerGroups, o.cg)
	case spec.KindSSL:
		return appended(&sp.SSLs, o.ssl)
	case kindCredential:
		return appended(&sp.Credentials, o.raw)
	case kindPluginMetadata:
		return appended(&sp.PluginMetadata, o.raw)
	case kindSecret:
		return appended(&sp.Secrets, o.raw)
	}
	return -1
}

// set puts o in its list of sp, at i.
func set(sp *spec.Spec, o *object, i int) {
	switch o.kind {
	case spec.KindRoute:
		sp.Routes[i] = o.route
	case spec.KindService:
		sp.Services[i] = o.svc
	case spec.KindUpstream:
		sp.Upstreams[i] = o.ups
	case spec.KindConsumer:
		sp.Consumers[i] = o.cons
	case spec.KindPluginConfig:
		sp.PluginConfigs[i] = o.pc
	case spec.KindGlobalRule:
		sp.GlobalRules[i] = o.gr
	case spec.KindConsumerGroup:
		sp.ConsumerGroups[i] = o.cg
	case spec.KindSSL:
		sp.SSLs[i] = o.ssl
	case kindCredential:
		sp.Credentials[i] = o.raw
	case kindPluginMetadata:
		sp.PluginMetadata[i] = o.raw
	case kindSecret:
		sp.Secrets[i] = o.raw
	}
}

// listOp is what onList does to a resource's list of a Spec being built
// (sp's) and the Syncer's view of the last one (room's, Syncer.room).
type listOp struct {
	do   listDo
	out  []int // copyOp: the places left out, sorted
	more int   // copyOp, growOp: how many objects are added after
}

type listDo int

const (
	// copyOp replaces sp's list with a copy without the objects at out,
	// with room for more after it (copied).
	copyOp listDo = iota
	// growOp replaces sp's list, the last Spec's, which only has objects
	// added, with room's for them (grown).
	growOp
	// keepOp makes sp's list, as built, room's, and cuts the capacity of
	// sp's to its length: what sp hands on has no room past its objects,
	// so that an append to it elsewhere copies it rather than write where
	// the Syncer's next build appends.
	keepOp
)

// onList does op to the lists of kind (listKinds) of sp and room.
func onList(sp, room *spec.Spec, kind string, op listOp) {
	switch kind {
	case spec.KindRoute:
		sp.Routes, room.Routes = listOn(op, sp.Routes, room.Routes)
	case spec.KindService:
		sp.Services, room.Services = listOn(op, sp.Services, room.Services)
	case spec.KindUpstream:
		sp.Upstreams, room.Upstreams = listOn(op, sp.Upstreams, room.Upstreams)
	case spec.KindConsumer:
		sp.Consumers, room.Consumers = listOn(op, sp.Consumers, room.Consumers)
	case spec.KindPluginConfig:
		sp.PluginConfigs, room.PluginConfigs = listOn(op, sp.PluginConfigs, room.PluginConfigs)
	case spec.KindGlobalRule:
		sp.GlobalRules, room.GlobalRules = listOn(op, sp.GlobalRules, room.GlobalRules)
	case spec.KindConsumerGroup:
		sp.ConsumerGroups, room.ConsumerGroups = listOn(op, sp.ConsumerGroups, room.ConsumerGroups)
	case spec.KindSSL:
		sp.SSLs, room.SSLs = listOn(op, sp.SSLs, room.SSLs)
	case kindCredential:
		sp.Credentials, room.Credentials = listOn(op, sp.Credentials, room.Credentials)
	case kindPluginMetadata:
		sp.PluginMetadata, room.PluginMetadata = listOn(op, sp.PluginMetadata, room.PluginMetadata)
	case kindSecret:
		sp.Secrets, room.Secrets = listOn(op, sp.Secrets, room.Secrets)
	}
}

// listOn is op done to l, a list of sp, and room, room's of the same
// resource: their new lists.
func listOn[T any](op listOp, l, room []T) ([]T, []T) {
	switch op.do {
	case copyOp:
		return copied(l, op.out, op.more), room
	case growOp:
		return grown(room, l, op.more), room
	default: // keepOp
		return slices.Clip(l), l
	}
}

// grown is l, a list of the last Spec, made ready for more objects
// appended: room, the same list with the whole capacity of its array (the
// Syncer's own view of it, Syncer.room), when l begins room's array and
// it has room for them, so that they are written in place, past l's
// length, and no object of l is copied; else a copy of l in an array of
// twice the length it needs, so that a bulk load of routes copies the
// list once per doubling of it, not once a build.
func grown[T any](room, l []T, more int) []T {
	if len(l) > 0 && len(room) == len(l) && &room[0] == &l[0] && cap(room)-len(room) >= more {
		return room
	}
	c := make([]T, len(l), 2*(len(l)+more))
	copy(c, l)
	return c
}

// appended appends v to *l and returns its position.
func appended[T any](l *[]T, v T) int {
	*l = append(*l, v)
	return len(*l) - 1
}

// copied is a copy of l without the objects at the places out (sorted),
// with room for more objects after it, and for a sixty-fourth as many
// again, which later builds that only add objects to the list fill in
// place (grown): the runs between them copied as they are (memmove); nil
// for none, as build leaves a list of none.
func copied[T any](l []T, out []int, more int) []T {
	n := len(l) - len(out)
	if n+more == 0 {
		return nil
	}
	c := make([]T, 0, n+more+(n+more)/64)
	p := 0
	for _, i := range out {
		c = append(c, l[p:i]...)
		p = i + 1
	}
	return append(c, l[p:]...)
}

// specHasher makes a Spec's Hash from its objects, added in the order
// they are served: the objects are cut into chunks, one ending after each
// object whose sum begins with a zero byte (one in 256 on average) and
// at the end, so that where the chunks are cut depends on the objects
// alone; the Hash is the SHA-256 of the chunks' sums, each the SHA-256 of
// its objects' sums. A chunk whose objects are those of a chunk hashed
// before (each still has that chunkSum, and there are as many) takes its
// sum over, so that a change to one object of 70 000 hashes one chunk
// and the chunks' sums again. hashObjects makes the same Hash from
// nothing. Not safe for concurrent use; build's alone.
type specHasher struct {
	top   hash.Hash
	chunk []*object // the objects of the chunk being cut
	// n is how many objects were added; ends, the number added at each
	// cut, and sums, each chunk's sum, are the chunks a build records
	// for the next to take over (hashFrom).
	n    int
	ends []int
	sums []*chunkSum
	// held is the last chunk's sum, written to top once the chunk after
	// it is cut (or by sum), so that top's state after the sums of all
	// the chunks but the last can be kept (Syncer.keepTop).
	held *chunkSum
}

// chunkSum is the sum of a chunk of n objects, each of which had it as
// its chunk when it was made.
type chunkSum struct {
	n   int
	sum [32]byte
}

// add adds the next object.
func (h *specHasher) add(o *object) {
	h.chunk = append(h.chunk, o)
	h.n++
	if o.sum[0] == 0 {
		h.cut()
	}
}

// cut ends the chunk being cut: its sum taken over or made.
func (h *specHasher) cut() {
	if len(h.chunk) == 0 {
		return
	}
	c := h.chunk[0].chunk
	same := c != nil && c.n == len(h.chunk)
	for _, o := range h.chunk {
		if !same {
			break
		}
		same = o.chunk == c
	}
	if !same {
		c = chunkOf(sha256.New(), h.chunk)
	}
	if h.held != nil {
		h.top.Write(h.held.sum[:])
	}
	h.held = c
	h.ends, h.sums = append(h.ends, h.n), append(h.sums, c)
	clear(h.chunk) // no object kept alive past the build
	h.chunk = h.chunk[:0]
}

// chunkOf is the sum of a chunk of objs, hashed with ch (reset first), and
// marks each object as in it, for a later build to take the sum over.
func chunkOf(ch hash.Hash, objs []*object) *chunkSum {
	c := &chunkSum{n: len(objs)}
	ch.Reset()
	for _, o := range objs {
		ch.Write(o.sum[:])
		o.chunk = c
	}
	ch.Sum(c.sum[:0])
	return c
}

// sum ends the last chunk and returns the Hash; keep is given top
// before the last chunk's sum is written, with the number of chunks
// written (Syncer.keepTop).
func (h *specHasher) sum(keep func(top hash.Hash, n int)) (out [32]byte) {
	h.cut()
	keep(h.top, len(h.sums)-1)
	if h.held != nil {
		h.top.Write(h.held.sum[:])
	}
	h.top.Sum(out[:0])
	return out
}

// hashObjects is specHasher's Hash of objs, made from nothing.
func hashObjects(objs []*object) (out [32]byte) {
	top := sha256.New()
	ch := sha256.New()
	for i, o := range objs {
		ch.Write(o.sum[:])
		if o.sum[0] == 0 || i == len(objs)-1 {
			top.Write(ch.Sum(nil))
			ch.Reset()
		}
	}
	top.Sum(out[:0])
	return out
}

// room is an empty list with room for about n objects; nil for n 0.
func room[T any](n int) []T {
	if n == 0 {
		return nil
	}
	return make([]T, 0, n+n/64+1)
}

// nilIfNone is l, or nil when it is empty: a Spec's list of no objects.
func nilIfNone[T any](l []T) []T {
	if len(l) == 0 {
		return nil
	}
	return l
}

// publish builds the Spec of s.objs and hands it on unless it is the
// last one.
func (s *Syncer) publish(onChange func(*spec.Spec), onError func(error)) {
	sp, err := s.build()
	if err != nil {
		onError(err)
		return
	}
	s.handOn(sp, onChange)
}

// handOn hands sp on, and to the local copy's writer, unless it is the
// last one.
func (s *Syncer) handOn(sp *spec.Spec, onChange func(*spec.Spec)) {
	s.revision.Store(s.rev)
	s.setIndexes()
	if sp.Hash == s.lastHash {
		return
	}
	s.lastHash = sp.Hash
	s.servedRoutes = len(sp.Routes)
	onChange(sp)
	it := cacheItem{sp, origin{s.rev, s.cluster}}
	select {
	case s.toCache <- it:
	default:
		select { // replace the one still waiting
		case <-s.toCache:
		default:
		}
		s.toCache <- it
	}
}

// putMod records the ModRevision of key, of resource res, in mods and
// modMax.
func (s *Syncer) putMod(res, key string, rev int64) {
	if old, ok := s.mods[key]; ok && rev < old && old == s.modMax[res] {
		s.stale[res] = true
	}
	s.mods[key] = rev
	s.modMax[res] = max(s.modMax[res], rev)
}

// clearMods empties mods, as a full read starts.
func (s *Syncer) clearMods() {
	clear(s.mods)
	clear(s.modMax)
	clear(s.stale)
}

// delMod takes key out of mods.
func (s *Syncer) delMod(key string) {
	old, ok := s.mods[key]
	if !ok {
		return
	}
	delete(s.mods, key)
	if res, _, _ := strings.Cut(strings.TrimPrefix(key, s.dir), "/"); old == s.modMax[res] {
		s.stale[res] = true
	}
}

// setIndexes computes ModifyIndexes from modMax, after finding the
// highest of each stale resource again in mods: a change walks mods only
// when it deleted (or lowered) its resource's highest.
func (s *Syncer) setIndexes() {
	if len(s.stale) > 0 {
		for res := range s.stale {
			delete(s.modMax, res)
		}
		for key, rev := range s.mods {
			if res, _, _ := strings.Cut(strings.TrimPrefix(key, s.dir), "/"); s.stale[res] {
				s.modMax[res] = max(s.modMax[res], rev)
			}
		}
		clear(s.stale)
	}
	m := make(map[string]int64, len(IndexedResources)+3)
	var top int64
	for _, r := range IndexedResources {
		m[r] = s.modMax[r]
		top = max(top, m[r])
	}
	m["max_modify_index"] = top
	m["prev_index"] = s.prevIdx
	m["x_etcd_index"] = s.rev
	s.indexes.Store(&m)
}

type cacheItem struct {
	sp   *spec.Spec
	from origin
}

// cacheFile is the local copy's content: the configuration, and the
// store's revision and cluster id (hex, as etcdctl shows it; absent when
// unknown, and in copies written before it was kept) it was read at.
type cacheFile struct {
	Revision  int64     `json:"revision"`
	ClusterID string    `json:"cluster_id,omitempty"`
	Written   time.Time `json:"written"`
	// Checked is the Spec's Checked mark (spec.Spec.Checked), in hex:
	// the fingerprint of the registry that checked its plugin
	// configurations; absent when none did.
	Checked string     `json:"checked,omitempty"`
	Spec    *spec.Spec `json:"spec"`
	cluster uint64     // ClusterID's value
	checked [32]byte   // Checked's value
}

// writeCache replaces the local copy with sp at Load, where the workers
// are sent sp whole next: its JSON form is made whole (spec.Encoder.Keep)
// and kept as MarshalJSON's, which their Config frame takes, rather than
// encoded once for the file and again for them. The writes that follow
// (Watch) stream it (writeCacheAt).
func (s *Syncer) writeCache(sp *spec.Spec) { s.writeCacheAt(sp, origin{s.rev, s.cluster}, true) }

// writeCacheAt replaces the local copy with sp, read at from: written to
// a new file, synced and renamed over the copy, so that a reader never
// sees half a file. The Spec's JSON form is streamed to the file an
// object at a time by s.enc (spec.Encoder), which encodes only the
// objects that were not in the last Spec written and copies the forms it
// keeps of the others; with whole, it is made whole first, for the
// workers too (writeCache). A failure is logged: serving goes on.
func (s *Syncer) writeCacheAt(sp *spec.Spec, from origin, whole bool) {
	if s.opts.CachePath == "" {
		return
	}
	s.cacheMu.Lock()
	defer s.cacheMu.Unlock()
	var sj []byte
	var err error
	if whole {
		sj, err = s.enc.Keep(sp)
	}
	if err == nil {
		err = writeAtomic(s.opts.CachePath, &s.cacheBuf, func(w *bufio.Writer) error {
			// cacheFile's form, written by hand around the Spec's own
			// (ReadCache reads it with encoding/json).
			b := make([]byte, 0, 192)
			b = append(b, `{"revision":`...)
			b = strconv.AppendInt(b, from.rev, 10)
			if from.cluster != 0 {
				b = append(b, `,"cluster_id":"`...)
				b = strconv.AppendUint(b, from.cluster, 16)
				b = append(b, '"')
			}
			b = append(b, `,"written":"`...)
			b = time.Now().UTC().AppendFormat(b, time.RFC3339Nano)
			b = append(b, '"')
			if sp.Checked != ([32]byte{}) {
				b = append(b, `,"checked":"`...)
				b = hex.AppendEncode(b, sp.Checked[:])
				b = append(b, '"')
			}
			b = append(b, `,"spec":`...)
			w.Write(b) // w keeps its error for Flush
			if sj != nil {
				w.Write(sj)
			} else if err := s.enc.Encode(w, sp); err != nil {
				return err
			}
			return w.WriteByte('}')
		})
	}
	if err != nil {
		s.opts.Log.Error("config store: local copy not written", "path", s.opts.CachePath, "err", err)
	}
}

// writeAtomic replaces the file at path with what write writes to w, a
// buffer over a new file beside it (*buf, made on first use and kept:
// 64 KiB), synced and renamed over path.
func writeAtomic(path string, buf **bufio.Writer, write func(w *bufio.Writer) error) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	if *buf == nil {
		*buf = bufio.NewWriterSize(f, 64<<10)
	}
	w := *buf
	w.Reset(f)
	err = write(w)
	if ferr := w.Flush(); err == nil {
		err = ferr
	}
	w.Reset(nil) // the file not held past its write
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
	}
	return err
}

// ReadCache reads a local copy written by a Syncer and checks it: the
// Spec, with the Hash it was written with (so that the same store content
// read again is recognised).
func ReadCache(path string) (*spec.Spec, error) {
	c, err := readCache(path)
	if err != nil {
		return nil, err
	}
	return c.Spec, nil
}

// CacheOrigin is the store revision and cluster id (0: unknown) the local
// copy at path was read at.
func CacheOrigin(path string) (rev int64, cluster uint64, err error) {
	c, err := readCache(path)
	if err != nil {
		return 0, 0, err
	}
	return c.Revision, c.cluster, nil
}

func readCache(path string) (*cacheFile, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	// The Spec's JSON is kept as read (spec.UnmarshalKept): a node
	// started on its copy sends it whole to its workers, where encoding
	// it again took 0.2 s of CPU at 50 000 routes.
	var raw struct {
		cacheFile
		Spec json.RawMessage `json:"spec"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	c := raw.cacheFile
	if len(raw.Spec) == 0 || string(raw.Spec) == "null" {
		return nil, fmt.Errorf("%s: no configuration", path)
	}
	c.Spec = new(spec.Spec)
	if err := spec.UnmarshalKept(raw.Spec, c.Spec); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if c.ClusterID != "" {
		if c.cluster, err = strconv.ParseUint(c.ClusterID, 16, 64); err != nil {
			return nil, fmt.Errorf("%s: cluster_id: %w", path, err)
		}
	}
	if c.Checked != "" {
		if n, err := hex.Decode(c.checked[:], []byte(c.Checked)); err != nil || n != len(c.checked) {
			return nil, fmt.Errorf("%s: checked: not a SHA-256 in hex", path)
		}
	}
	if err := c.Spec.Check(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if c.Spec.Hash == ([32]byte{}) {
		c.Spec.SetHash()
	}
	return &c, nil
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
