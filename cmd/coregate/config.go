package main

import (
	"log/slog"

	"golang.org/x/sys/unix"

	"coregate/admin/nodeconf"
	"coregate/admin/spec"
	"coregate/httpparse"
	"coregate/worker"
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
		SendTimeout:        nc.NginxConfig.HTTP.SendTimeout,
		MaxBodySize:        nc.NginxConfig.HTTP.ClientMaxBodySize,
		MaxConns:           nc.NginxConfig.WorkerConnections,
		ShowUpstreamStatus: nc.APISIX.ShowUpstreamStatusInResponseHeader,
		Logger:             log,
		UpstreamKeepalive: worker.Keepalive{
			Size:     nc.NginxConfig.HTTP.Upstream.Keepalive,
			Idle:     nc.NginxConfig.HTTP.Upstream.KeepaliveTimeout,
			Requests: nc.NginxConfig.HTTP.Upstream.KeepaliveRequests,
		},
	}
	if nc.APISIX.RouterHTTP == "radixtree_uri" {
		cfg.RouterMode = router.URI
	}
	for _, l := range nc.APISIX.NodeListen {
		cfg.Listen = append(cfg.Listen, l.Addr())
	}
	return cfg
}

func closeFD(fd int) { _ = unix.Close(fd) }
