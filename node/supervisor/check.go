package supervisor

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"coregate/admin/nodeconf"
	"coregate/admin/spec"
	"coregate/admin/store/etcdstore"
	"coregate/admin/store/storesync"
	"coregate/node"
	"coregate/plugins"
	"coregate/worker"
	"coregate/worker/router"
)

// checkEtcd is Check's part for a node whose configuration is in etcd:
// every object under deployment.etcd.prefix read once and checked as the
// node's sync checks it (its schema, its plugins' configurations as the
// Admin API checks them, its references), each problem named by its key,
// and the configuration then built as a worker builds it (checkBuild).
// The etcd is the external cluster deployment.etcd.host names; for the
// embedded one, the running node's (its client URL in the data
// directory) when the node runs, else one started on the data directory
// for the check and stopped after it (dataDir "": EtcdDataDir beside
// config.yaml), by the user it belongs to only. A node never started has
// nothing to check.
func checkEtcd(nc *nodeconf.Config, dataDir string, w io.Writer) error {
	ec := nc.Deployment.Etcd
	o, err := etcdstore.OptionsFrom(ec)
	if err != nil {
		return err
	}
	where := strings.Join(o.Endpoints, ",")
	if !ec.External {
		if dataDir == "" {
			dataDir = filepath.Join(nc.Dir, EtcdDataDir)
		}
		fi, err := os.Stat(filepath.Join(dataDir, "member"))
		if err != nil {
			fmt.Fprintf(w, "coregate: the embedded etcd in %s holds no configuration yet\n", dataDir)
			return nil
		}
		// The embedded etcd has no users and no TLS.
		o.Username, o.Password, o.TLS = "", "", nil
		if url := etcdstore.SavedClientURL(dataDir); url != "" && node.PIDFileHeld(nc.APISIX.PIDFilePath(nc.Dir)) {
			o.Endpoints = []string{url}
			where = "the running node's embedded etcd at " + url
		} else {
			// Started by another user (root, by hand), etcd would leave
			// files the node's own user could not open at its next start.
			if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Geteuid() {
				return fmt.Errorf("the embedded etcd in %s belongs to uid %d: run coregate -t as that user, or with the node running", dataDir, st.Uid)
			}
			emb, err := etcdstore.StartEmbedded(dataDir, etcdstore.EmbedOptions{Avoid: nc.Ports(), LogLevel: "none"})
			if err != nil {
				return fmt.Errorf("embedded etcd in %s: %w", dataDir, err)
			}
			defer emb.Stop()
			o.Endpoints = emb.Endpoints
			where = "the embedded etcd in " + dataDir
		}
	}
	st, err := etcdstore.New(o)
	if err != nil {
		return fmt.Errorf("deployment.etcd: %w", err)
	}
	// As Main: the plugins' fields stored encrypted are checked in clear,
	// $secret:// references read with the secret objects.
	plugins.Default.SetKeyring(nc.APISIX.DataEncryption.FieldsKeyring(nc.Provider()))
	plugins.Default.SetSecrets(node.SecretResolver(nc))
	defer st.Close()
	sync := storesync.New(storesync.Options{Store: st, Plugins: plugins.Default, Log: slog.New(slog.DiscardHandler)})
	ctx, cancel := context.WithTimeout(context.Background(), max(o.Timeout, 5*time.Second))
	defer cancel()
	n, sp, err := sync.Check(ctx)
	if err == nil {
		err = checkBuild(nc, sp)
	}
	if err != nil {
		return fmt.Errorf("etcd (%s, prefix %s): %w", where, st.Prefix(), err)
	}
	fmt.Fprintf(w, "coregate: etcd (%s, prefix %s): %d objects ok\n", where, st.Prefix(), n)
	return nil
}

// checkBuild builds sp as a worker of nc builds it (worker.CompileCheck:
// the router, the balancers, the plugins' instances, with the node's
// keyring), for -t.
func checkBuild(nc *nodeconf.Config, sp *spec.Spec) error {
	mode := router.HostURI
	if nc.APISIX.RouterHTTP == "radixtree_uri" {
		mode = router.URI
	}
	if _, err := worker.CompileCheck(sp, mode, nc.APISIX.DataEncryption.Keyring.DecryptPrivateKey); err != nil {
		return fmt.Errorf("a worker would refuse the configuration: %w", err)
	}
	return nil
}

// checkFileBuild reads a data plane's file as the node serves it (the
// sync over it, fileSource) and builds it as a worker would; the file's
// own checks (standalone.CheckFile) come first.
func checkFileBuild(nc *nodeconf.Config, path string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, sp, err := fileSource(path, slog.New(slog.DiscardHandler)).Check(ctx)
	if err != nil {
		return err
	}
	return checkBuild(nc, sp)
}
