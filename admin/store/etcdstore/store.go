package etcdstore

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"coregate/admin/nodeconf"
	"coregate/admin/store"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
)

// Defaults.
const (
	DefaultPrefix    = "/apisix"
	DefaultTimeout   = 30 * time.Second // deployment.etcd.timeout
	DefaultKeepAlive = 2 * time.Second
)

// Options configure a Store.
type Options struct {
	// Endpoints are etcd's client URLs, "http://127.0.0.1:2379".
	Endpoints []string
	// Prefix of every key; DefaultPrefix when empty.
	Prefix string
	// Timeout bounds every call (a watch's connection check included);
	// DefaultTimeout when 0.
	Timeout time.Duration
	// Username and Password, when set, authenticate to etcd.
	Username, Password string
	// TLS, when not nil, is used for the connections (https endpoints).
	TLS *tls.Config
	// KeepAlive is how often a watch asks etcd for a progress
	// notification; a watch that hears nothing for three of them ends
	// with ErrUnavailable. DefaultKeepAlive when 0.
	KeepAlive time.Duration
	// Embedded, when not nil, is the etcd that this process embeds
	// (StartEmbedded), and Endpoints are its client URLs: the store then
	// calls its server in process (Embedded.client) instead of over
	// loopback gRPC. Username, Password and TLS are not used: the
	// in-process client presents no credentials, as a client of the
	// embedded etcd without a user does not (it has no users, and a
	// request to an etcd that someone turned auth on for is refused
	// either way). The store is the embedded etcd's for its lifetime:
	// stopped, it answers ErrUnavailable, and one started again is
	// another server, for another store.
	Embedded *Embedded
}

// OptionsFrom reads deployment.etcd: hosts, prefix, timeout, user and
// password, and TLS (a client certificate, the server name to verify, and
// verify: false to accept any server certificate, as APISIX).
func OptionsFrom(c nodeconf.EtcdConfig) (Options, error) {
	o := Options{
		Endpoints: c.Host,
		Prefix:    c.Prefix,
		Timeout:   time.Duration(c.Timeout) * time.Second,
		Username:  c.User,
		Password:  c.Password,
	}
	https := false
	for _, h := range c.Host {
		if strings.HasPrefix(h, "https://") {
			https = true
		}
	}
	if https || c.TLS.Cert != "" {
		t := &tls.Config{
			ServerName:         c.TLS.SNI,
			InsecureSkipVerify: !c.TLS.Verify, //nolint:gosec // deployment.etcd.tls.verify: false asks for it
			MinVersion:         tls.VersionTLS12,
		}
		if c.TLS.Verify {
			pool, err := nodeconf.TrustedCAs(c.TLS.TrustedCA)
			if err != nil {
				return Options{}, err
			}
			t.RootCAs = pool
		}
		if c.TLS.Cert != "" || c.TLS.Key != "" {
			cert, err := tls.LoadX509KeyPair(c.TLS.Cert, c.TLS.Key)
			if err != nil {
				return Options{}, fmt.Errorf("deployment.etcd.tls: %w", err)
			}
			t.Certificates = []tls.Certificate{cert}
		}
		o.TLS = t
	}
	return o, nil
}

// Store is a store.Store over etcd. Its methods are safe for concurrent
// use.
type Store struct {
	opts   Options
	prefix string

	mu     sync.Mutex
	cli    *clientv3.Client // nil until the first call connects
	closed bool

	cluster atomic.Uint64 // the cluster id of the last List's answer

	// getOpts are Get's: serializable on the embedded etcd. A
	// linearizable read asks raft for its commit index (ReadIndex) and
	// waits until the member has applied it, which on a one-member
	// cluster adds nothing: the member answers a write only once it has
	// applied it (a Put's answer is its apply's), so a serializable read
	// sees every write any client was answered, and one it does not see
	// was still in flight, concurrent with the read. An Admin API route
	// PUT makes two Gets (the upstream it names, the key before its
	// compare-and-swap): serializable, it took 724 allocations where it
	// took 810, and 211-256 µs of CPU where it took 248-325
	// (BenchmarkPutRoute/inprocess, -count 5). List, a full read, stays
	// linearizable, as on any etcd.
	getOpts []clientv3.OpOption
}

var _ store.Store = (*Store)(nil)

// New makes a Store. It does not connect: the first call does.
func New(o Options) (*Store, error) {
	if len(o.Endpoints) == 0 {
		return nil, errors.New("etcdstore: no etcd endpoint")
	}
	var err error
	if o.Prefix, err = prefixOf(o); err != nil {
		return nil, err
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.KeepAlive <= 0 {
		o.KeepAlive = DefaultKeepAlive
	}
	o.Endpoints = append([]string(nil), o.Endpoints...)
	s := &Store{opts: o, prefix: o.Prefix}
	if o.Embedded != nil {
		s.getOpts = []clientv3.OpOption{clientv3.WithSerializable()}
	}
	return s, nil
}

// prefixOf is o's prefix, DefaultPrefix when empty, without a trailing /.
func prefixOf(o Options) (string, error) {
	p := o.Prefix
	if p == "" {
		p = DefaultPrefix
	}
	p = strings.TrimRight(p, "/")
	if p == "" || p[0] != '/' {
		return "", fmt.Errorf("etcdstore: prefix %q must start with /", p)
	}
	return p, nil
}

// client returns the connected client, connecting first if needed. A
// client that cannot authenticate (etcd unreachable) is not kept, so the
// next call tries again.
func (s *Store) client(ctx context.Context) (*clientv3.Client, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, fmt.Errorf("%w: store closed", store.ErrUnavailable)
	}
	if s.cli != nil {
		return s.cli, nil
	}
	if s.opts.Embedded != nil {
		s.cli = s.opts.Embedded.client()
		return s.cli, nil
	}
	dial := s.opts.Timeout
	if d, ok := ctx.Deadline(); ok {
		dial = min(dial, max(time.Until(d), time.Millisecond))
	}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   s.opts.Endpoints,
		DialTimeout: dial,
		Username:    s.opts.Username,
		Password:    s.opts.Password,
		TLS:         s.opts.TLS,
		Logger:      zap.NewNop(),
		// Keep a connection's health known between calls, so a dead
		// endpoint is left for a live one of the cluster.
		DialKeepAliveTime:    10 * time.Second,
		DialKeepAliveTimeout: s.opts.Timeout,
		PermitWithoutStream:  true,
		// Come back soon after etcd does: gRPC's default backoff grows
		// to two minutes between tries.
		DialOptions: []grpc.DialOption{grpc.WithConnectParams(grpc.ConnectParams{
			Backoff: backoff.Config{
				BaseDelay:  100 * time.Millisecond,
				Multiplier: 1.6,
				Jitter:     0.2,
				MaxDelay:   time.Second,
			},
			MinConnectTimeout: min(s.opts.Timeout, 20*time.Second),
		})},
	})
	if err != nil {
		return nil, wrap(err)
	}
	s.cli = cli
	return cli, nil
}

// Prefix implements store.Store.
func (s *Store) Prefix() string { return s.prefix }

// ReadOnly implements store.Store: etcd takes writes.
func (s *Store) ReadOnly() bool { return false }

// Close implements store.Store.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	if s.cli == nil {
		return nil
	}
	err := s.cli.Close()
	s.cli = nil
	if errors.Is(err, context.Canceled) {
		err = nil
	}
	return err
}

// call bounds ctx by the store's timeout and gets the client. A ctx that
// ends before the timeout would is bound already: an Admin API request's
// (30 s from its start, the timeout's default) is, and a context and
// timer of the call's own took 5 allocations of each of a route PUT's
// three calls for nothing (BenchmarkPutRoute/inprocess: 677 -> 661).
func (s *Store) call(ctx context.Context) (*clientv3.Client, context.Context, context.CancelFunc, error) {
	cancel := context.CancelFunc(noCancel)
	if d, ok := ctx.Deadline(); !ok || time.Until(d) > s.opts.Timeout {
		ctx, cancel = context.WithTimeout(ctx, s.opts.Timeout)
	}
	cli, err := s.client(ctx)
	if err != nil {
		cancel()
		return nil, nil, nil, err
	}
	return cli, ctx, cancel, nil
}

func noCancel() {}

// Get implements store.Store.
func (s *Store) Get(ctx context.Context, key string) (store.KV, error) {
	cli, ctx, cancel, err := s.call(ctx)
	if err != nil {
		return store.KV{}, err
	}
	defer cancel()
	resp, err := cli.Get(ctx, key, s.getOpts...)
	if err != nil {
		return store.KV{}, wrap(err)
	}
	if len(resp.Kvs) == 0 {
		return store.KV{}, fmt.Errorf("%w: %s", store.ErrNotFound, key)
	}
	return kvOf(resp.Kvs[0]), nil
}

// List implements store.Store. The key equal to dir itself, which APISIX's
// "init_etcd" writes as a directory placeholder ("init_dir"), is left out,
// as APISIX's own listing leaves it out.
func (s *Store) List(ctx context.Context, dir string) ([]store.KV, int64, error) {
	cli, ctx, cancel, err := s.call(ctx)
	if err != nil {
		return nil, 0, err
	}
	defer cancel()
	resp, err := cli.Get(ctx, dir, clientv3.WithPrefix(),
		clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend))
	if err != nil {
		return nil, 0, wrap(err)
	}
	s.cluster.Store(resp.Header.ClusterId)
	kvs := make([]store.KV, 0, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		if string(kv.Key) == dir {
			continue
		}
		kvs = append(kvs, kvOf(kv))
	}
	return kvs, resp.Header.Revision, nil
}

// ClusterID is the id of the etcd cluster the last List read from (0
// before one answered): a store rebuilt from nothing, or another cluster,
// has another id, where its revisions start over.
func (s *Store) ClusterID() uint64 { return s.cluster.Load() }

// Put implements store.Store.
func (s *Store) Put(ctx context.Context, key string, value []byte, opts store.PutOptions) (kv, prev store.KV, err error) {
	if opts.TTL < 0 {
		return kv, prev, fmt.Errorf("etcdstore: negative TTL %d", opts.TTL)
	}
	cli, ctx, cancel, err := s.call(ctx)
	if err != nil {
		return kv, prev, err
	}
	defer cancel()
	putOpts := []clientv3.OpOption{clientv3.WithPrevKV()}
	if opts.TTL > 0 {
		lease, err := cli.Grant(ctx, opts.TTL)
		if err != nil {
			return kv, prev, wrap(err)
		}
		putOpts = append(putOpts, clientv3.WithLease(lease.ID))
	}
	var pr *clientv3.PutResponse
	if opts.IfModRevision == 0 {
		pr, err = cli.Put(ctx, key, string(value), putOpts...)
		if err != nil {
			return kv, prev, wrap(err)
		}
	} else {
		tr, err := cli.Txn(ctx).If(cmpRevision(key, opts.IfModRevision)).
			Then(clientv3.OpPut(key, string(value), putOpts...)).Commit()
		if err != nil {
			return kv, prev, wrap(err)
		}
		if !tr.Succeeded {
			return kv, prev, fmt.Errorf("%w: %s", store.ErrConflict, key)
		}
		pr = (*clientv3.PutResponse)(tr.Responses[0].GetResponsePut())
		pr.Header = tr.Header
	}
	rev := pr.Header.Revision
	kv = store.KV{Key: key, Value: value, CreateRevision: rev, ModRevision: rev}
	if pr.PrevKv != nil {
		prev = kvOf(pr.PrevKv)
		kv.CreateRevision = prev.CreateRevision
	}
	return kv, prev, nil
}

// cmpRevision is the compare of a compare-and-swap: the key's mod revision
// is rev, or for -1 the key does not exist.
func cmpRevision(key string, rev int64) clientv3.Cmp {
	if rev < 0 {
		return clientv3.Compare(clientv3.CreateRevision(key), "=", 0)
	}
	return clientv3.Compare(clientv3.ModRevision(key), "=", rev)
}

// Delete implements store.Store.
func (s *Store) Delete(ctx context.Context, key string, ifModRevision int64) (store.KV, error) {
	cli, ctx, cancel, err := s.call(ctx)
	if err != nil {
		return store.KV{}, err
	}
	defer cancel()
	if ifModRevision == 0 {
		resp, err := cli.Delete(ctx, key, clientv3.WithPrevKV())
		if err != nil {
			return store.KV{}, wrap(err)
		}
		if resp.Deleted == 0 || len(resp.PrevKvs) == 0 {
			return store.KV{}, fmt.Errorf("%w: %s", store.ErrNotFound, key)
		}
		return kvOf(resp.PrevKvs[0]), nil
	}
	tr, err := cli.Txn(ctx).If(cmpRevision(key, ifModRevision)).
		Then(clientv3.OpDelete(key, clientv3.WithPrevKV())).
		Else(clientv3.OpGet(key, clientv3.WithCountOnly())).Commit()
	if err != nil {
		return store.KV{}, wrap(err)
	}
	if !tr.Succeeded {
		if tr.Responses[0].GetResponseRange().GetCount() == 0 {
			return store.KV{}, fmt.Errorf("%w: %s", store.ErrNotFound, key)
		}
		return store.KV{}, fmt.Errorf("%w: %s", store.ErrConflict, key)
	}
	dr := tr.Responses[0].GetResponseDeleteRange()
	if dr.GetDeleted() == 0 || len(dr.GetPrevKvs()) == 0 {
		return store.KV{}, fmt.Errorf("%w: %s", store.ErrNotFound, key)
	}
	return kvOf(dr.PrevKvs[0]), nil
}

// GenID implements store.Store: the revision of a write to <prefix>/gen_id,
// %020d, as APISIX's POST does.
func (s *Store) GenID(ctx context.Context) (string, error) {
	cli, ctx, cancel, err := s.call(ctx)
	if err != nil {
		return "", err
	}
	defer cancel()
	resp, err := cli.Put(ctx, s.prefix+"/gen_id", "0")
	if err != nil {
		return "", wrap(err)
	}
	return fmt.Sprintf("%020d", resp.Header.Revision), nil
}

// Compact compacts etcd's history up to rev: watches from an earlier
// revision then end with ErrCompacted. A node's embedded etcd compacts
// itself; this is for tools and tests.
func (s *Store) Compact(ctx context.Context, rev int64) error {
	cli, ctx, cancel, err := s.call(ctx)
	if err != nil {
		return err
	}
	defer cancel()
	if _, err := cli.Compact(ctx, rev, clientv3.WithCompactPhysical()); err != nil {
		return wrap(err)
	}
	return nil
}

// Watch implements store.Store.
func (s *Store) Watch(ctx context.Context, dir string, fromRev int64) <-chan store.WatchResponse {
	out := make(chan store.WatchResponse)
	go s.watch(ctx, dir, fromRev, out)
	return out
}

func (s *Store) watch(ctx context.Context, dir string, fromRev int64, out chan<- store.WatchResponse) {
	defer close(out)
	fail := func(err error) {
		select {
		case out <- store.WatchResponse{Err: err}:
		case <-ctx.Done():
		}
	}
	cli, err := s.client(ctx)
	if err != nil {
		fail(err)
		return
	}
	// The watch requires a leader, so a member cut from its cluster ends
	// it instead of going quiet. Progress requests go to the stream of
	// wctx's metadata, which is this watch's.
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	// The created notification carries the store's revision, for the
	// check that etcd did not go back.
	opts := []clientv3.OpOption{clientv3.WithPrefix(), clientv3.WithCreatedNotify()}
	if fromRev > 0 {
		opts = append(opts, clientv3.WithRev(fromRev))
	}
	// Watch waits until the stream is open, which it never is while etcd
	// is away: open it off this goroutine, so the keep-alive runs.
	opened := make(chan clientv3.WatchChan, 1)
	go func() { opened <- cli.Watch(wctx, dir, opts...) }()
	var wch clientv3.WatchChan // nil (never ready) until opened

	keepAlive := s.opts.KeepAlive
	tick := time.NewTicker(keepAlive)
	defer tick.Stop()
	lastHeard := time.Now()
	seen := fromRev - 1 // the highest store revision seen
	// reached: etcd is known to be at fromRev or past it. Until then it
	// sends this watch no progress notification (etcd 3.7 withholds them
	// from a watch whose start revision it has not reached, so that none
	// shows a revision below it: etcd-io/etcd#20229), and a watch from the revision
	// after a List's, on an etcd nobody writes to, would hear nothing:
	// the keep-alive asks for etcd's revision instead.
	reached := fromRev <= 0
	progress := make(chan struct{}, 1)
	type answer struct{ rev, floor int64 }
	probed := make(chan answer, 1)
	for {
		select {
		case <-ctx.Done():
			return
		case wch = <-opened:
			opened = nil
		case <-tick.C:
			if time.Since(lastHeard) > 3*keepAlive {
				fail(fmt.Errorf("%w: watch on %s: no answer from etcd for %v", store.ErrUnavailable, dir, time.Since(lastHeard).Round(time.Millisecond)))
				return
			}
			// Ask for a progress notification, or etcd's revision, off
			// this goroutine: the request waits while the client
			// reconnects.
			select {
			case progress <- struct{}{}:
				probe, floor := !reached && seen < fromRev, seen
				go func() {
					defer func() { <-progress }()
					pctx, pcancel := context.WithTimeout(wctx, keepAlive)
					defer pcancel()
					if !probe {
						_ = cli.RequestProgress(pctx)
						return
					}
					r, err := cli.Get(pctx, dir, clientv3.WithCountOnly())
					if err != nil {
						return
					}
					select {
					case probed <- answer{r.Header.Revision, floor}:
					case <-wctx.Done():
					}
				}()
			default:
			}
		case a := <-probed:
			switch {
			case a.rev < a.floor:
				// Below a revision this watch showed before the probe
				// was sent: etcd went back, as below.
				fail(fmt.Errorf("%w: watch on %s: etcd went back from revision %d to %d", store.ErrCompacted, dir, a.floor, a.rev))
				return
			case a.rev < fromRev:
				lastHeard = time.Now() // etcd answers; nothing to send yet
			default:
				reached = true // progress notifications from now on
			}
		case wr, ok := <-wch:
			if !ok {
				if ctx.Err() == nil {
					fail(fmt.Errorf("%w: watch on %s closed", store.ErrUnavailable, dir))
				}
				return
			}
			lastHeard = time.Now()
			if rev := wr.Header.Revision; rev != 0 && rev < seen {
				// etcd answers from an earlier revision than it already
				// showed: it was wiped or restored from a backup. What
				// this watch saw may be gone: start over.
				fail(fmt.Errorf("%w: watch on %s: etcd went back from revision %d to %d", store.ErrCompacted, dir, seen, rev))
				return
			}
			seen = max(seen, wr.Header.Revision)
			if wr.CompactRevision != 0 {
				fail(fmt.Errorf("%w: watch on %s from %d: compacted at %d", store.ErrCompacted, dir, fromRev, wr.CompactRevision))
				return
			}
			if err := wr.Err(); err != nil {
				fail(wrap(err))
				return
			}
			if len(wr.Events) == 0 {
				continue // progress notification, or the watch created
			}
			resp := store.WatchResponse{Events: make([]store.Event, len(wr.Events)), Revision: wr.Header.Revision}
			for i, ev := range wr.Events {
				e := store.Event{Type: store.EventPut, KV: kvOf(ev.Kv)}
				if ev.Type == mvccpb.DELETE {
					e.Type = store.EventDelete
					e.KV.Value = nil
					e.KV.CreateRevision = 0
				}
				resp.Events[i] = e
			}
			select {
			case out <- resp:
			case <-ctx.Done():
				return
			}
		}
	}
}

func kvOf(kv *mvccpb.KeyValue) store.KV {
	return store.KV{
		Key:            string(kv.Key),
		Value:          kv.Value,
		CreateRevision: kv.CreateRevision,
		ModRevision:    kv.ModRevision,
	}
}

// wrap maps an etcd client error to the store's sentinels: compaction to
// ErrCompacted, everything else (unreachable, timed out, no leader,
// refused) to ErrUnavailable. The cause stays in the chain.
func wrap(err error) error {
	if errors.Is(err, rpctypes.ErrCompacted) {
		return fmt.Errorf("%w: %w", store.ErrCompacted, err)
	}
	return fmt.Errorf("%w: %w", store.ErrUnavailable, err)
}

// ServerVersion is the version of the etcd server the store talks to
// (its first reachable endpoint's, as etcd's /version reports it), as
// APISIX's server_info shows it. It is safe for concurrent use.
func (s *Store) ServerVersion(ctx context.Context) (string, error) {
	cli, ctx, cancel, err := s.call(ctx)
	if err != nil {
		return "", err
	}
	defer cancel()
	var last error
	for _, ep := range s.opts.Endpoints {
		st, err := cli.Status(ctx, ep)
		if err == nil {
			return st.Version, nil
		}
		last = wrap(err)
	}
	return "", last
}
