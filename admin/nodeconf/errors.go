package nodeconf

import (
	"errors"
	"strconv"
	"strings"
)

// ErrNodeConfig: config.yaml has a value of the wrong type or out of range
// (*NodeConfigError). Every error this package returns matches it.
var ErrNodeConfig = errors.New("nodeconf: invalid node config")

// NodeConfigError is a config.yaml value of the wrong type or out of range.
// Key is the dotted key ("nginx_config.worker_processes"), Line the line
// of the file it is written on (0: unknown, or a key not written). It
// matches ErrNodeConfig. Its text is
// "nodeconf: FILE:LINE: KEY: MSG", as a compiler's.
type NodeConfigError struct {
	File string
	Line int
	Key  string
	Msg  string
}

func (e *NodeConfigError) Error() string {
	var b strings.Builder
	b.WriteString("nodeconf: ")
	if e.File != "" {
		b.WriteString(e.File)
		if e.Line > 0 {
			b.WriteByte(':')
			b.WriteString(strconv.Itoa(e.Line))
		}
		b.WriteString(": ")
	}
	if e.Key != "" {
		b.WriteString(e.Key)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// Is reports whether target is ErrNodeConfig.
func (e *NodeConfigError) Is(target error) bool { return target == ErrNodeConfig }
