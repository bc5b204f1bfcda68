package worker

import (
	"fmt"
	"log/slog"
)

// gnetLogger sends gnet's own messages to the worker's log: debug and info
// at debug level (gnet announces every start at info), the rest as they are.
type gnetLogger struct{ l *slog.Logger }

func (g gnetLogger) Debugf(format string, args ...any) { g.l.Debug(fmt.Sprintf(format, args...)) }
func (g gnetLogger) Infof(format string, args ...any)  { g.l.Debug(fmt.Sprintf(format, args...)) }
func (g gnetLogger) Warnf(format string, args ...any)  { g.l.Warn(fmt.Sprintf(format, args...)) }
func (g gnetLogger) Errorf(format string, args ...any) { g.l.Error(fmt.Sprintf(format, args...)) }
func (g gnetLogger) Fatalf(format string, args ...any) { g.l.Error(fmt.Sprintf(format, args...)) }
