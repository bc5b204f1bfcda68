package node

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"coregate/admin/nodeconf"

	"golang.org/x/sys/unix"
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

// OpenErrorLog makes the file at path (nginx_config.error_log,
// ErrorLogPath) this process's standard error: where NewLogger's loggers
// write, the Go runtime's panics, and the inherited standard error of
// the processes it starts afterwards. Called again, on SIGUSR1 after a
// rotation renamed the file, it opens the path anew. The switch is one
// dup3, atomic for every writer. Safe for concurrent use.
func OpenErrorLog(path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("node: error log %s: %w", path, err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("node: error log %s: %w", path, err)
	}
	defer f.Close()
	if err := unix.Dup3(int(f.Fd()), int(os.Stderr.Fd()), 0); err != nil {
		return fmt.Errorf("node: error log %s: %w", path, err)
	}
	return nil
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
