package main

import (
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"

	"coregate/admin/nodeconf"
	"coregate/admin/store/etcdstore"
	"coregate/admin/store/storesync"
	"coregate/plugins"
)

// etcdDataDir is the embedded etcd's data directory, beside config.yaml.
const etcdDataDir = "etcd-data"

// etcdNode is a node's configuration in etcd: the embedded etcd it
// started (nil for an external cluster), the store over it, and the Syncer
// that feeds the supervisor.
type etcdNode struct {
	embedded *etcdstore.Embedded
	store    *etcdstore.Store
	sync     *storesync.Syncer
}

// openEtcd connects a node to its etcd. With deployment.etcd.host written
// that is the external cluster it names; otherwise the node starts an
// etcd inside its own process, its data in dataDir (default etcd-data
// beside config.yaml), on free loopback ports (those of its last start
// when they are free). The local copy of the last good configuration is
// config-cache.json beside config.yaml.
func openEtcd(nc *nodeconf.Config, dataDir string, log *slog.Logger) (*etcdNode, error) {
	ec := nc.Deployment.Etcd
	o, err := etcdstore.OptionsFrom(ec)
	if err != nil {
		return nil, err
	}
	n := &etcdNode{}
	if !ec.External {
		if dataDir == "" {
			dataDir = filepath.Join(nc.Dir, etcdDataDir)
		}
		emb, err := etcdstore.StartEmbedded(dataDir, etcdstore.EmbedOptions{Avoid: nc.Ports()})
		if err != nil {
			return nil, err
		}
		n.embedded = emb
		// The embedded etcd has no users and no TLS.
		o.Endpoints, o.Username, o.Password, o.TLS = emb.Endpoints, "", "", nil
		log.Info("embedded etcd started", "data", dataDir, "endpoints", strings.Join(emb.Endpoints, ","))
	} else {
		log.Info("external etcd", "endpoints", strings.Join(o.Endpoints, ","), "prefix", o.Prefix)
	}
	n.store, err = etcdstore.New(o)
	if err != nil {
		n.close()
		return nil, fmt.Errorf("deployment.etcd: %w", err)
	}
	n.sync = storesync.New(storesync.Options{
		Store:     n.store,
		CachePath: filepath.Join(nc.Dir, storesync.CacheFile),
		Plugins:   plugins.Default,
		Log:       log,
	})
	return n, nil
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
