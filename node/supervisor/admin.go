package supervisor

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"coregate/admin/adminapi"
	"coregate/admin/nodeconf"
	"coregate/admin/store"
)

// AdminKeysFile, beside config.yaml, keeps the keys generated for the
// admin_key entries config.yaml leaves empty (APISIX writes them back into
// config.yaml; coregate leaves config.yaml as its owner wrote it).
const AdminKeysFile = "admin-keys.json"

// adminKeys fills the admin_key entries whose key is empty: with the key
// generated at an earlier start (AdminKeysFile), or with a new random one,
// stored there (0600) and printed once on stderr.
func adminKeys(nc *nodeconf.Config) (nodeconf.AdminConfig, error) {
	a := nc.Deployment.Admin
	a.AdminKey = append([]nodeconf.AdminKey(nil), a.AdminKey...)
	path := filepath.Join(nc.Dir, AdminKeysFile)
	saved := map[string]string{}
	b, err := os.ReadFile(path)
	switch {
	case err == nil:
		if err := json.Unmarshal(b, &saved); err != nil {
			return a, fmt.Errorf("%s: %w", path, err)
		}
	case !errors.Is(err, fs.ErrNotExist):
		return a, err
	}
	var made []string
	for i := range a.AdminKey {
		k := &a.AdminKey[i]
		if k.Key != "" {
			continue
		}
		if s := saved[k.Name]; s != "" {
			k.Key = s
			continue
		}
		r := make([]byte, 16)
		if _, err := rand.Read(r); err != nil {
			return a, err
		}
		k.Key = hex.EncodeToString(r)
		saved[k.Name] = k.Key
		made = append(made, k.Name)
	}
	if len(made) == 0 {
		return a, nil
	}
	b, err = json.MarshalIndent(saved, "", "  ")
	if err != nil {
		return a, err
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o600); err != nil {
		return a, fmt.Errorf("admin key not stored: %w", err)
	}
	for _, name := range made {
		for _, k := range a.AdminKey {
			if k.Name == name {
				fmt.Fprintf(os.Stderr, "coregate: generated the Admin API key %q (role %s): %s — kept in %s\n", k.Name, k.Role, k.Key, path)
			}
		}
	}
	return a, nil
}

// statusKeys are the keys the status pages take on an export address
// other than loopback: the Admin API's (admin_key, with those generated
// for its empty entries when the Admin API is on), any role.
func statusKeys(nc *nodeconf.Config) ([]string, error) {
	a := nc.Deployment.Admin
	if nc.APISIX.EnableAdmin {
		var err error
		if a, err = adminKeys(nc); err != nil {
			return nil, err
		}
	}
	var keys []string
	for _, k := range a.AdminKey {
		if k.Key != "" {
			keys = append(keys, k.Key)
		}
	}
	return keys, nil
}

// serveAdmin serves the Admin API on deployment.admin.admin_listen over st
// until the returned stop is called. (Start-up has refused a public legacy
// key on an address other than loopback: adminapi.CheckKeys.)
func serveAdmin(nc *nodeconf.Config, st store.Store, log *slog.Logger) (stop func(), err error) {
	ac, err := adminKeys(nc)
	if err != nil {
		return nil, err
	}
	de := &nc.APISIX.DataEncryption
	h, err := adminapi.New(adminapi.Options{Store: st, Admin: ac, Log: log,
		Keyring: de.Keyring, FieldsKeyring: de.FieldsKeyring(nc.Provider())})
	if err != nil {
		return nil, err
	}
	addr := ac.AdminListen.Addr()
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("admin API: %w", err)
	}
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       60 * time.Second,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("admin API stopped", "err", err)
		}
	}()
	log.Info("admin API", "addr", l.Addr().String())
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		<-done
	}, nil
}
