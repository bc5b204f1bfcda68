package workerproc

import (
	"fmt"
	"log/slog"

	"golang.org/x/sys/unix"

	"coregate/admin/nodeconf"
	"coregate/admin/spec"
	"coregate/httpparse"
	"coregate/node"
	"coregate/worker"
	"coregate/worker/accesslog"
	"coregate/worker/router"
)

// workerConfig maps config.yaml onto a worker's settings.
func workerConfig(nc *nodeconf.Config, log *slog.Logger) worker.Config {
	cfg := worker.Config{
		ServerHeader:       nc.ServerHeader(spec.CompatVersion),
		Limits:             httpparse.DefaultLimits(),
		HeaderTimeout:      nc.NginxConfig.HTTP.ClientHeaderTimeout,
		BodyTimeout:        nc.NginxConfig.HTTP.ClientBodyTimeout,
		KeepaliveTimeout:   nc.NginxConfig.HTTP.KeepaliveTimeout,
		KeepaliveRequests:  nc.NginxConfig.HTTP.KeepaliveRequests,
		KeepaliveTime:      nc.NginxConfig.HTTP.KeepaliveTime,
		SendTimeout:        nc.NginxConfig.HTTP.SendTimeout,
		MaxBodySize:        nc.NginxConfig.HTTP.ClientMaxBodySize,
		DropUnderscores:    !nc.NginxConfig.HTTP.UnderscoresInHeaders,
		MaxConns:           nc.NginxConfig.WorkerConnections,
		ShowUpstreamStatus: nc.APISIX.ShowUpstreamStatusInResponseHeader,
		Logger:             log,
		UpstreamKeepalive: worker.Keepalive{
			Size:     nc.NginxConfig.HTTP.Upstream.Keepalive,
			Idle:     nc.NginxConfig.HTTP.Upstream.KeepaliveTimeout,
			Requests: nc.NginxConfig.HTTP.Upstream.KeepaliveRequests,
		},
	}
	// nginx's keepalive_timeout 0 turns keep-alive off, and a
	// keepalive_time of 0 ends a connection after its first request: both
	// are one request per connection (worker.Config's zeros mean defaults
	// and no bound).
	if nc.NginxConfig.HTTP.KeepaliveTimeout == 0 || nc.NginxConfig.HTTP.KeepaliveTime == 0 {
		cfg.KeepaliveRequests = 1
	}
	if nc.APISIX.RouterHTTP == "radixtree_uri" {
		cfg.RouterMode = router.URI
	}
	cfg.NormalizeURILikeServlet = nc.APISIX.NormalizeURILikeServlet
	cfg.DNS = worker.DNS{
		Servers: nc.APISIX.DNSResolver,
		Valid:   nc.APISIX.DNSResolverValid,
		Timeout: nc.APISIX.ResolverTimeout,
	}
	cfg.DiscoveryDNS = worker.DNS{Servers: nc.DiscoveryDNSServers, Timeout: nc.APISIX.ResolverTimeout}
	for _, l := range nc.APISIX.NodeListen {
		cfg.Listen = append(cfg.Listen, l.Addr())
	}
	if nc.APISIX.SSL.Enable {
		for _, l := range nc.APISIX.SSL.Listen {
			cfg.TLSListen = append(cfg.TLSListen, l.Addr())
		}
		cfg.TLS = node.TLSSettings(nc)
	}
	// Private keys stored encrypted (apisix.data_encryption) are read
	// with the node's keyring: ssls' keys, upstreams' tls.client_key.
	cfg.Decrypt = nc.APISIX.DataEncryption.Keyring.DecryptPrivateKey
	return cfg
}

func closeFD(fd int) { _ = unix.Close(fd) }

// openAccessLog opens the worker's access log (nginx_config.http's
// access_log, relative to the directory of config.yaml) and compiles its
// format.
func openAccessLog(nc *nodeconf.Config, log *slog.Logger) (*accesslog.Log, *accesslog.Format, error) {
	f, err := node.AccessLogFormat(nc)
	if err != nil {
		return nil, nil, err
	}
	h := &nc.NginxConfig.HTTP
	l, err := accesslog.Open(accesslog.Options{
		Path:       h.AccessLogPath(nc.Dir),
		BufferSize: int(h.AccessLogBuffer),
		Logger:     log,
	})
	if err != nil {
		return nil, nil, fmt.Errorf("access log: %w", err)
	}
	return l, f, nil
}
