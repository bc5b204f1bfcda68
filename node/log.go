package node

import (
	"log/slog"
	"os"

	"coregate/admin/nodeconf"
)

// logLevel is the level of the process's log, nginx_config.error_log_level
// once config.yaml is read (info until then, so that a config.yaml that
// cannot be read is still explained).
var logLevel = func() *slog.LevelVar {
	v := new(slog.LevelVar)
	v.Set(slog.LevelInfo)
	return v
}()

// NewLogger is the process's log, on stderr, at the level SetLogLevel
// set last. Safe for concurrent use, as every logger made by it.
func NewLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: logLevel}))
}

// SetLogLevel applies nginx_config.error_log_level to every logger
// NewLogger made and makes. nginx's notice is what this log writes at
// INFO (a worker started, a configuration applied), so info and notice
// both show it; crit, alert and emerg, which nothing here logs at, leave
// only what is above ERROR. Safe for concurrent use.
func SetLogLevel(nc *nodeconf.Config) {
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
