package node

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"

	"coregate/admin/nodeconf"
	"coregate/admin/secret"
	"coregate/tlsconf"
	"coregate/worker/accesslog"
)

// Settings fingerprints what a worker reads from config.yaml, all but
// worker_processes (which the supervisor applies itself): the supervisor
// replaces its workers when it changes (supervisor.Reload), and a worker
// tells it the fingerprint of the config.yaml it started with when a
// supervisor takes it over.
func Settings(nc *nodeconf.Config) string {
	c := *nc
	c.NginxConfig.WorkerProcesses = 0
	b, err := json.Marshal(&c)
	if err != nil {
		return ""
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// AccessLogFormat compiles nginx_config.http's access log format; the
// supervisor checks it at load (CheckAccessLog), each worker compiles it
// for its loop.
func AccessLogFormat(nc *nodeconf.Config) (*accesslog.Format, error) {
	h := &nc.NginxConfig.HTTP
	esc, err := accesslog.ParseEscape(h.AccessLogFormatEscape)
	if err != nil {
		return nil, err
	}
	return accesslog.Compile(h.AccessLogFormat, esc)
}

// CheckAccessLog refuses a config.yaml whose access log format a worker
// could not compile, before any worker starts with it.
func CheckAccessLog(nc *nodeconf.Config) error {
	if !nc.NginxConfig.HTTP.EnableAccessLog {
		return nil
	}
	if _, err := AccessLogFormat(nc); err != nil {
		return fmt.Errorf("config.yaml: nginx_config.http.access_log_format: %w", err)
	}
	return nil
}

// TLSSettings are apisix.ssl's settings, as the workers serve the ssls
// with them.
func TLSSettings(nc *nodeconf.Config) tlsconf.Settings {
	s := &nc.APISIX.SSL
	return tlsconf.Settings{
		Protocols:      strings.Fields(s.Protocols),
		Ciphers:        s.Ciphers,
		SessionTickets: s.SessionTickets,
		FallbackSNI:    s.FallbackSNI,
	}
}

// CheckTLS refuses a config.yaml whose apisix.ssl settings no handshake
// could be served with (an ssl_ciphers of which nothing is usable),
// before any worker starts with it.
func CheckTLS(nc *nodeconf.Config) error {
	if !nc.APISIX.SSL.Enable {
		return nil
	}
	if err := TLSSettings(nc).Check(); err != nil {
		return fmt.Errorf("config.yaml: apisix.ssl: %w", err)
	}
	return nil
}

// SecretResolver is a node's reader of $secret:// references: the secret
// objects' credentials decrypted with the keyring the Admin API encrypts
// them with (DataEncryption.FieldsKeyring), values and failures kept for
// apisix.lru.secret's ttl and neg_ttl.
func SecretResolver(nc *nodeconf.Config) *secret.Resolver {
	r := secret.NewResolver(nc.APISIX.DataEncryption.FieldsKeyring(nc.Provider()))
	r.TTL, r.NegTTL = nc.APISIX.SecretTTL, nc.APISIX.SecretNegTTL
	return r
}
