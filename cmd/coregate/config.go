package main

import (
	"fmt"
	"log/slog"
	"os"

	"golang.org/x/sys/unix"

	"coregate/admin/nodeconf"
	"coregate/admin/spec"
	"coregate/httpparse"
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
	for _, l := range nc.APISIX.NodeListen {
		cfg.Listen = append(cfg.Listen, l.Addr())
	}
	return cfg
}

func closeFD(fd int) { _ = unix.Close(fd) }

// accessLogFormat compiles nginx_config.http's access log format; the
// supervisor checks it at load, each worker compiles it for its loop.
func accessLogFormat(nc *nodeconf.Config) (*accesslog.Format, error) {
	h := &nc.NginxConfig.HTTP
	esc, err := accesslog.ParseEscape(h.AccessLogFormatEscape)
	if err != nil {
		return nil, err
	}
	return accesslog.Compile(h.AccessLogFormat, esc)
}

// checkAccessLog refuses a config.yaml whose access log format a worker
// could not compile, before any worker starts with it.
func checkAccessLog(nc *nodeconf.Config) error {
	if !nc.NginxConfig.HTTP.EnableAccessLog {
		return nil
	}
	if _, err := accessLogFormat(nc); err != nil {
		return fmt.Errorf("config.yaml: nginx_config.http.access_log_format: %w", err)
	}
	return nil
}

// openAccessLog opens the worker's access log (nginx_config.http's
// access_log, relative to the directory of config.yaml) and compiles its
// format.
func openAccessLog(nc *nodeconf.Config, log *slog.Logger) (*accesslog.Log, *accesslog.Format, error) {
	f, err := accessLogFormat(nc)
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

// logLevel is the level of the process's log, nginx_config.error_log_level
// once config.yaml is read (info until then, so that a config.yaml that
// cannot be read is still explained).
var logLevel = func() *slog.LevelVar {
	v := new(slog.LevelVar)
	v.Set(slog.LevelInfo)
	return v
}()

// newLogger is the process's log, on stderr, at logLevel.
func newLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: logLevel}))
}

// setLogLevel applies nginx_config.error_log_level. nginx's notice is
// what this log writes at INFO (a worker started, a configuration
// applied), so info and notice both show it; crit, alert and emerg, which
// nothing here logs at, leave only what is above ERROR.
func setLogLevel(nc *nodeconf.Config) {
	logLevel.Set(logLevelOf(nc.NginxConfig.ErrorLogLevel))
}

func logLevelOf(name string) slog.Level {
	switch name {
	case "debug":
		return slog.LevelDebug
	case "info", "notice":
		return slog.LevelInfo
	case "warn", "":
		return slog.LevelWarn
	case "error":
		return slog.LevelError
	default: // crit, alert, emerg
		return slog.LevelError + 4
	}
}
