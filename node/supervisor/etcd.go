package supervisor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"time"

	"coregate/admin/nodeconf"
	"coregate/admin/store"
	"coregate/admin/store/etcdstore"
	"coregate/admin/store/storesync"
	"coregate/plugins"
)

// EtcdDataDir is the embedded etcd's data directory, beside config.yaml.
const EtcdDataDir = "etcd-data"

// AcceptResetFlag is the command-line flag that accepts a reset store.
const AcceptResetFlag = "--accept-store-reset"

// etcdNode is a node's configuration in etcd: the embedded etcd it
// started (nil for an external cluster, or one whose database is
// damaged), the store over it, the Syncer that feeds the supervisor, and
// the store the Admin API writes through.
type etcdNode struct {
	embedded *etcdstore.Embedded
	store    store.Store
	sync     *storesync.Syncer
	admin    store.Store
}

// openEtcd connects a node to its etcd. With deployment.etcd.host written
// that is the external cluster it names; otherwise the node starts an
// etcd inside its own process, its data in dataDir (default etcd-data
// beside config.yaml), on free loopback ports (those of its last start
// when they are free). The local copy of the last good configuration is
// config-cache.json beside config.yaml; a store found reset against it
// (storesync.ResetError) is refused unless acceptReset.
//
// An embedded etcd whose database is damaged (etcdstore.DamagedError) is
// not started: the node logs the file and what to do, serves
// config-cache.json, reports etcd unreachable, and the Admin API answers
// 503 (without a local copy the node does not start).
func openEtcd(nc *nodeconf.Config, dataDir string, acceptReset bool, log *slog.Logger) (*etcdNode, error) {
	ec := nc.Deployment.Etcd
	o, err := etcdstore.OptionsFrom(ec)
	if err != nil {
		return nil, err
	}
	n := &etcdNode{}
	damaged := false // the embedded etcd's database: n.store is etcdstore.Down
	if !ec.External {
		if dataDir == "" {
			dataDir = filepath.Join(nc.Dir, EtcdDataDir)
		}
		emb, err := etcdstore.StartEmbedded(dataDir, etcdstore.EmbedOptions{Avoid: nc.Ports()})
		var de *etcdstore.DamagedError
		switch {
		case errors.As(err, &de):
			damaged = true
			log.Error("embedded etcd not started: its database is damaged; the node serves "+storesync.CacheFile+" and refuses changes",
				"path", de.Path, "err", de.Err,
				"remedy", "stop the node, then restore "+dataDir+" from a backup, or move it aside to start on an empty store with "+
					AcceptResetFlag+" ("+storesync.CacheFile+" keeps the last configuration)")
			if n.store, err = etcdstore.Down(o, err); err != nil {
				return nil, fmt.Errorf("deployment.etcd: %w", err)
			}
		case err != nil:
			return nil, err
		default:
			n.embedded = emb
			// The embedded etcd has no users and no TLS. The node calls
			// it in process (etcdstore.Options.Embedded), where a call
			// over its loopback listener cost the supervisor gRPC's
			// framing and encoding both ways; the data planes of a
			// cluster and etcdctl reach it over that listener as before.
			o.Endpoints, o.Username, o.Password, o.TLS = emb.Endpoints, "", "", nil
			o.Embedded = emb
			log.Info("embedded etcd started", "data", dataDir, "endpoints", strings.Join(emb.Endpoints, ","))
		}
	} else {
		log.Info("external etcd", "endpoints", strings.Join(o.Endpoints, ","), "prefix", o.Prefix)
	}
	if n.store == nil {
		if n.store, err = etcdstore.New(o); err != nil {
			n.close()
			return nil, fmt.Errorf("deployment.etcd: %w", err)
		}
	}
	n.sync = storesync.New(storesync.Options{
		Store:       n.store,
		CachePath:   filepath.Join(nc.Dir, storesync.CacheFile),
		Plugins:     plugins.Default,
		AcceptReset: acceptReset,
		ResetRemedy: "restore the store from a backup, or restart the node with " + AcceptResetFlag +
			" to serve the store as it is (the local copy is then replaced)",
		Log: log,
	})
	n.admin = guardedStore{n.store, n.sync}
	if damaged {
		n.admin = n.store // every call answers why, at once
	}
	return n, nil
}

// guardedStore is the Admin API's store: changes are refused (503) while
// the node does not serve from the store (storesync.Syncer.Refusal): one
// written into a store found reset would be acknowledged and not served,
// and would move that store's revision on towards the local copy's. A
// change that comes before the store was first read waits for that read
// (a node that starts), at most storesync.DefaultStartTimeout. Reads
// answer from the store as it is.
//
// While the node's sync has lost the store (storesync.Syncer.Lost,
// apisix_etcd_reachable 0: etcd down, or a cluster without its quorum,
// whose members left answer no request), reads and changes are answered
// ErrUnavailable at once rather than after the store's timeout
// (deployment.etcd.timeout, 30 s by default) each: they would wait it out
// and fail. The sync has lost the store when a call to it failed: its
// first read (a node started with etcd down, from its first failed
// connect on), a full read, or a watch that heard nothing and a probe
// that failed too (a watch alone is late under load). The sync tries the
// store again every storesync.DefaultRetry; calls pass again once it
// answered.
type guardedStore struct {
	store.Store
	sync *storesync.Syncer
}

func (g guardedStore) refused(ctx context.Context) error {
	if err := g.lost(); err != nil && errors.Is(g.sync.Refusal(), storesync.ErrNotRead) {
		return err // no first read to wait for before the store answers
	}
	if errors.Is(g.sync.Refusal(), storesync.ErrNotRead) {
		t := time.NewTimer(storesync.DefaultStartTimeout)
		defer t.Stop()
		select {
		case <-g.sync.FirstRead():
		case <-ctx.Done():
		case <-t.C:
		}
	}
	if err := g.sync.Refusal(); err != nil {
		return fmt.Errorf("%w: changes refused: %w", store.ErrUnavailable, err)
	}
	return g.lost()
}

// lost is the error of a call made while the sync has lost the store,
// nil when it has not (or has not tried it yet).
func (g guardedStore) lost() error {
	if !g.sync.Lost() {
		return nil
	}
	return fmt.Errorf("%w: etcd unreachable (apisix_etcd_reachable 0): the node serves its last configuration until it answers", store.ErrUnavailable)
}

func (g guardedStore) Get(ctx context.Context, key string) (store.KV, error) {
	if err := g.lost(); err != nil {
		return store.KV{}, err
	}
	return g.Store.Get(ctx, key)
}

func (g guardedStore) List(ctx context.Context, dir string) ([]store.KV, int64, error) {
	if err := g.lost(); err != nil {
		return nil, 0, err
	}
	return g.Store.List(ctx, dir)
}

func (g guardedStore) Put(ctx context.Context, key string, value []byte, opts store.PutOptions) (kv, prev store.KV, err error) {
	if err := g.refused(ctx); err != nil {
		return kv, prev, err
	}
	return g.Store.Put(ctx, key, value, opts)
}

func (g guardedStore) Delete(ctx context.Context, key string, ifModRevision int64) (store.KV, error) {
	if err := g.refused(ctx); err != nil {
		return store.KV{}, err
	}
	return g.Store.Delete(ctx, key, ifModRevision)
}

func (g guardedStore) GenID(ctx context.Context) (string, error) {
	if err := g.refused(ctx); err != nil {
		return "", err
	}
	return g.Store.GenID(ctx)
}

// close releases the store and stops the embedded etcd, in that order.
func (n *etcdNode) close() {
	if n.store != nil {
		_ = n.store.Close()
	}
	if n.embedded != nil {
		n.embedded.Stop()
	}
}
