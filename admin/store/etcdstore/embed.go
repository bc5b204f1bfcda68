package etcdstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.etcd.io/etcd/server/v3/etcdserver/api/v3client"
	"go.etcd.io/etcd/server/v3/etcdserver/api/v3rpc"
	"go.etcd.io/etcd/server/v3/proxy/grpcproxy/adapter"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// EmbedOptions qualify StartEmbedded.
type EmbedOptions struct {
	// ClientURL and PeerURL are where the embedded etcd listens,
	// "http://127.0.0.1:2379". Empty: the URLs the data directory was
	// last started with (urls.json in it) when those ports are free, else
	// free ports on 127.0.0.1.
	ClientURL, PeerURL string
	// StartTimeout bounds the start (WAL replay included); 60 s when 0.
	StartTimeout time.Duration
	// LogLevel is etcd's own log level on stderr: "error" when empty
	// (quiet), "none" for nothing at all.
	LogLevel string
	// CompactionRetention is how many revisions of history the embedded
	// etcd keeps (it compacts itself every five minutes); 10000 when 0.
	CompactionRetention int
	// SnapshotCount is how many applied entries the embedded etcd lets
	// pass between two of its snapshots: a start replays the WAL written
	// since the last one. 10000 when 0 (etcd's own default, 100 000, had
	// a start at 50 000 routes and 20 000 upstreams replay all 70 000
	// writes).
	SnapshotCount uint64
	// Avoid are ports the free ports must not be: the node's own, which
	// it binds after etcd has started. A port of the ephemeral range that
	// is configured but not yet bound is free to the kernel, and etcd
	// listening there first would keep the node from starting.
	Avoid []int
}

// Embedded is a running embedded etcd.
type Embedded struct {
	// Endpoints are its client URLs, for Options.Endpoints.
	Endpoints []string
	// PeerURL is its peer URL; start again with it (and Endpoints[0]) to
	// come back on the same ports.
	PeerURL  string
	e        *embed.Etcd
	stop     sync.Once
	stopping *atomic.Bool // its log is silent from Stop on

	// calls is held shared by each in-process KV or status call
	// (guardedKV, guardedMaintenance) while it runs; Stop holds it alone
	// to set stopped. etcd closes its database as it stops, and a read
	// that reaches it then dereferences a closed bolt transaction: a nil
	// pointer, a crash of the process. etcd's gRPC server keeps its own
	// calls off that (it stops serving, and waits for the calls in
	// flight, before the server stops); in process nothing else does.
	calls   sync.RWMutex
	stopped bool // under calls
}

// Stop stops the embedded etcd and waits until its ports and data
// directory are released. Calls after the first do nothing. The
// in-process calls in flight that read the database end first; those
// that come later answer etcd's ErrStopped.
func (e *Embedded) Stop() {
	e.stop.Do(func() {
		// etcd logs its closed listeners as errors while it stops.
		e.stopping.Store(true)
		e.calls.Lock()
		e.stopped = true
		e.calls.Unlock()
		e.e.Close()
	})
}

// enter admits an in-process call that reads the database, false once
// Stop has begun; exit ends one admitted.
func (e *Embedded) enter() bool {
	e.calls.RLock()
	if e.stopped {
		e.calls.RUnlock()
		return false
	}
	return true
}

func (e *Embedded) exit() { e.calls.RUnlock() }

// client is a client of the embedded etcd that calls its server in this
// process (v3client): the same KV, watch, lease and maintenance servers
// that its gRPC listener serves, behind the same quota checks, without
// the socket, the HTTP/2 framing, the protobuf encoding both ways
// (requests and answers pass as Go values) and etcd's gRPC interceptors
// (metrics and request log). An Admin API PUT of a route with an
// upstream_id and two plugins, client and server together, took 634-712
// µs of CPU, 1461 allocations and 105 KB over the listener; 260-334 µs,
// 848 and 62-68 KB in process (BenchmarkPutRoute in admin/adminapi,
// -count 5, getrusage; on a loaded 2-CPU machine).
//
// What differs from a client over the listener, and why it does not
// matter to Store:
//   - No credentials: the server reads a token from incoming gRPC
//     metadata, which an in-process call has none of. The embedded etcd
//     has no users and auth off (the node configures none), and a
//     client over the listener without a user is refused as this one is
//     when someone turned auth on (TestAuth).
//   - No interceptors: the one that refuses a call marked
//     WithRequireLeader while the member has no leader does not run. A
//     one-member cluster is its own leader while it runs.
//   - Stop ends no watch: gRPC's server closes its streams as it stops,
//     nothing closes an in-process one, and no event or progress
//     notification comes on it any more. The watch's keep-alive reports
//     that silence (three KeepAlives), as it does for an etcd gone away;
//     calls fail with etcd's ErrStopped, ErrUnavailable
//     (TestEmbeddedInProcessStop).
//   - Answers are the server's own objects: a watch event's key and
//     value are shared with every other watcher of the key in this
//     process, read-only (Store copies the key and hands the value on
//     as it hands on one decoded from the wire: never written).
//   - A connection never breaks, so client never dials again; errors
//     keep their gRPC status codes (the server makes them), so the
//     client's mapping to rpctypes (ErrCompacted) is the same.
//   - Calls are kept off a stopping etcd's database: etcd's gRPC server
//     stops serving before etcd closes it, and nothing stops an
//     in-process call, so the KV and maintenance servers are wrapped
//     (guardedKV, guardedMaintenance) to wait for Stop, or answer
//     ErrStopped after it (TestEmbeddedInProcessStopRace). Writes and
//     lease grants go through raft, which answers ErrStopped itself; a
//     watch reads the database only from etcd's own goroutines, which
//     Stop ends.
func (e *Embedded) client() *clientv3.Client {
	c := v3client.New(e.e.Server)
	c.KV = clientv3.NewKVFromKVClient(adapter.KvServerToKvClient(guardedKV{v3rpc.NewQuotaKVServer(e.e.Server), e}), c)
	c.Maintenance = clientv3.NewMaintenanceFromMaintenanceClient(
		adapter.MaintenanceServerToMaintenanceClient(guardedMaintenance{v3rpc.NewMaintenanceServer(e.e.Server, nil), e}), c)
	return c
}

// guardedKV is etcd's KV server, each call admitted by Embedded.enter.
type guardedKV struct {
	pb.KVServer
	e *Embedded
}

func (g guardedKV) Range(ctx context.Context, r *pb.RangeRequest) (*pb.RangeResponse, error) {
	if !g.e.enter() {
		return nil, rpctypes.ErrGRPCStopped
	}
	defer g.e.exit()
	return g.KVServer.Range(ctx, r)
}

func (g guardedKV) Put(ctx context.Context, r *pb.PutRequest) (*pb.PutResponse, error) {
	if !g.e.enter() {
		return nil, rpctypes.ErrGRPCStopped
	}
	defer g.e.exit()
	return g.KVServer.Put(ctx, r)
}

func (g guardedKV) DeleteRange(ctx context.Context, r *pb.DeleteRangeRequest) (*pb.DeleteRangeResponse, error) {
	if !g.e.enter() {
		return nil, rpctypes.ErrGRPCStopped
	}
	defer g.e.exit()
	return g.KVServer.DeleteRange(ctx, r)
}

func (g guardedKV) Txn(ctx context.Context, r *pb.TxnRequest) (*pb.TxnResponse, error) {
	if !g.e.enter() {
		return nil, rpctypes.ErrGRPCStopped
	}
	defer g.e.exit()
	return g.KVServer.Txn(ctx, r)
}

func (g guardedKV) Compact(ctx context.Context, r *pb.CompactionRequest) (*pb.CompactionResponse, error) {
	if !g.e.enter() {
		return nil, rpctypes.ErrGRPCStopped
	}
	defer g.e.exit()
	return g.KVServer.Compact(ctx, r)
}

// guardedMaintenance is etcd's maintenance server with Status, the one
// call of it that Store makes (ServerVersion), admitted by
// Embedded.enter: it reads the database's size.
type guardedMaintenance struct {
	pb.MaintenanceServer
	e *Embedded
}

func (g guardedMaintenance) Status(ctx context.Context, r *pb.StatusRequest) (*pb.StatusResponse, error) {
	if !g.e.enter() {
		return nil, rpctypes.ErrGRPCStopped
	}
	defer g.e.exit()
	return g.MaintenanceServer.Status(ctx, r)
}

// Err reports an error that stopped the embedded etcd after it started.
func (e *Embedded) Err() <-chan error { return e.e.Err() }

// urlsFile, in the data directory, keeps the URLs it was last started
// with, so a restart comes back on the same ports.
const urlsFile = "urls.json"

type savedURLs struct {
	Client string `json:"client"`
	Peer   string `json:"peer"`
}

// SavedClientURL is the client URL the embedded etcd whose data is in
// dir was last started with ("" when it never was): where a node that
// runs on dir serves it, for a reader beside the node (coregate -t).
func SavedClientURL(dir string) string {
	var saved savedURLs
	if b, err := os.ReadFile(filepath.Join(dir, urlsFile)); err != nil || json.Unmarshal(b, &saved) != nil {
		return ""
	}
	return saved.Client
}

// StartEmbedded starts an etcd inside this process, a single-member
// cluster with its data in dir (created 0700 if absent; a directory
// beside config.yaml by default), and waits until it serves. Stop it with
// Stop.
//
// The database in dir is checked first (checkDB): one that would crash
// etcd as it opens it (garbage, a file cut short) is not opened, and the
// error is a *DamagedError naming the file.
func StartEmbedded(dir string, o EmbedOptions) (*Embedded, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("embedded etcd: %w", err)
	}
	if err := checkDB(dir); err != nil {
		return nil, err
	}
	if o.ClientURL == "" || o.PeerURL == "" {
		var saved savedURLs
		if b, err := os.ReadFile(filepath.Join(dir, urlsFile)); err == nil && json.Unmarshal(b, &saved) == nil &&
			saved.Client != "" && saved.Peer != "" && free(saved.Client, o.Avoid) && free(saved.Peer, o.Avoid) {
			o.ClientURL, o.PeerURL = saved.Client, saved.Peer
		} else {
			ports, err := freePorts(2, o.Avoid)
			if err != nil {
				return nil, fmt.Errorf("embedded etcd: %w", err)
			}
			o.ClientURL = fmt.Sprintf("http://127.0.0.1:%d", ports[0])
			o.PeerURL = fmt.Sprintf("http://127.0.0.1:%d", ports[1])
		}
	}
	curl, err := url.Parse(o.ClientURL)
	if err != nil {
		return nil, fmt.Errorf("embedded etcd: client url: %w", err)
	}
	purl, err := url.Parse(o.PeerURL)
	if err != nil {
		return nil, fmt.Errorf("embedded etcd: peer url: %w", err)
	}
	if o.StartTimeout <= 0 {
		o.StartTimeout = 60 * time.Second
	}
	if o.CompactionRetention <= 0 {
		o.CompactionRetention = 10000
	}
	if o.SnapshotCount == 0 {
		o.SnapshotCount = 10000
	}

	cfg := embed.NewConfig()
	cfg.Name = "coregate"
	cfg.Dir = dir
	cfg.ListenClientUrls = []url.URL{*curl}
	cfg.AdvertiseClientUrls = []url.URL{*curl}
	cfg.ListenPeerUrls = []url.URL{*purl}
	cfg.AdvertisePeerUrls = []url.URL{*purl}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	// The token makes the cluster id, and it is read only when the data
	// directory has no member/ yet: each new store gets an id of its own,
	// so that one rebuilt from nothing (member/ lost) on the same ports is
	// not taken for the store it replaces (storesync compares the ids).
	token := make([]byte, 8)
	if _, err := rand.Read(token); err != nil {
		return nil, fmt.Errorf("embedded etcd: %w", err)
	}
	cfg.InitialClusterToken = "coregate-" + hex.EncodeToString(token)
	cfg.AutoCompactionMode = embed.CompactorModeRevision
	cfg.AutoCompactionRetention = fmt.Sprint(o.CompactionRetention)
	cfg.SnapshotCount = o.SnapshotCount
	stopping := new(atomic.Bool)
	lg, err := embedLogger(o.LogLevel, stopping)
	if err != nil {
		return nil, err
	}
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(lg)

	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, fmt.Errorf("embedded etcd in %s: %w", dir, err)
	}
	t := time.NewTimer(o.StartTimeout)
	defer t.Stop()
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		e.Close()
		return nil, fmt.Errorf("embedded etcd in %s: %w", dir, err)
	case <-t.C:
		e.Close()
		return nil, fmt.Errorf("embedded etcd in %s: not ready after %v", dir, o.StartTimeout)
	}
	b, _ := json.Marshal(savedURLs{Client: o.ClientURL, Peer: o.PeerURL})
	if err := os.WriteFile(filepath.Join(dir, urlsFile), b, 0o600); err != nil {
		e.Close()
		return nil, fmt.Errorf("embedded etcd: %w", err)
	}
	return &Embedded{Endpoints: []string{o.ClientURL}, PeerURL: o.PeerURL, e: e, stopping: stopping}, nil
}

// quietCore drops every entry once stopping is set.
type quietCore struct {
	zapcore.Core
	stopping *atomic.Bool
}

func (c quietCore) With(f []zapcore.Field) zapcore.Core {
	return quietCore{c.Core.With(f), c.stopping}
}

func (c quietCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if c.stopping.Load() {
		return ce
	}
	return c.Core.Check(e, ce)
}

func embedLogger(level string, stopping *atomic.Bool) (*zap.Logger, error) {
	switch level {
	case "none":
		return zap.NewNop(), nil
	case "":
		level = "error"
	}
	lvl, err := zapcore.ParseLevel(level)
	if err != nil {
		return nil, fmt.Errorf("embedded etcd: log level: %w", err)
	}
	c := zap.NewProductionConfig()
	c.Level = zap.NewAtomicLevelAt(lvl)
	c.Sampling = nil
	c.OutputPaths = []string{"stderr"}
	c.ErrorOutputPaths = []string{"stderr"}
	return c.Build(zap.WrapCore(func(core zapcore.Core) zapcore.Core {
		return quietCore{core, stopping}
	}))
}

// free reports whether a URL's host:port can be listened on now and its
// port is not in avoid.
func free(u string, avoid []int) bool {
	p, err := url.Parse(u)
	if err != nil {
		return false
	}
	if port, err := strconv.Atoi(p.Port()); err != nil || slices.Contains(avoid, port) {
		return false
	}
	l, err := net.Listen("tcp", p.Host)
	if err != nil {
		return false
	}
	l.Close()
	return true
}

// freePorts returns n distinct ports free on 127.0.0.1 now and not in
// avoid. They are closed again before etcd listens; another process could
// take one in between, which the start then reports.
func freePorts(n int, avoid []int) ([]int, error) {
	ls := make([]net.Listener, 0, n)
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	ports := make([]int, 0, n)
	// Every port taken stays open until the end, so the kernel hands out
	// a different one each time; 100 tries bound the search.
	for range 100 {
		if len(ports) == n {
			break
		}
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		if p := l.Addr().(*net.TCPAddr).Port; !slices.Contains(avoid, p) {
			ports = append(ports, p)
		}
	}
	if len(ports) != n {
		return nil, errors.New("no free port")
	}
	return ports, nil
}
