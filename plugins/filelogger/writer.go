package filelogger

import (
	"log/slog"
	"os"
	"os/signal"
	"sync"
	"sync/atomic"
	"syscall"
)

// queueLen is how many entries a writer holds, queued or being written,
// before the event loops drop theirs.
const queueLen = 1024

// buf is one entry on its way to the file: line is the JSON line, tmp the
// scratch its building decodes query arguments into. Both keep their
// capacity from entry to entry.
type buf struct {
	line, tmp []byte
}

// writer appends the entries of every instance logging to one path, from
// a goroutine of its own, so that no event loop waits on the file. The
// loops take a free buffer (take), fill it and queue it (put); the
// goroutine writes it and frees it. There are queueLen buffers and as
// many queue slots: put never blocks, and take, when every buffer is out,
// reports nil and counts the entry dropped. take and put are safe for
// concurrent use and do not allocate.
//
// The file is opened (O_APPEND, created 0644) at the first entry and
// again after a SIGUSR1 (the supervisor's, once the logs are rotated,
// which reopens the access log too). A writer lives as long as the
// process, as APISIX keeps the files it opened.
type writer struct {
	path    string
	queue   chan *buf
	free    chan *buf
	dropped atomic.Uint64
	written atomic.Uint64
}

var writers struct {
	sync.Mutex
	m map[string]*writer
}

// writerOf returns the writer of path, started at its first use.
func writerOf(path string) *writer {
	writers.Lock()
	defer writers.Unlock()
	if w := writers.m[path]; w != nil {
		return w
	}
	w := &writer{path: path, queue: make(chan *buf, queueLen), free: make(chan *buf, queueLen)}
	for range queueLen {
		w.free <- &buf{}
	}
	if writers.m == nil {
		writers.m = map[string]*writer{}
	}
	writers.m[path] = w
	go w.run()
	return w
}

// take returns a free buffer, or nil when there is none: the entry is
// then dropped, and counted.
func (w *writer) take() *buf {
	select {
	case b := <-w.free:
		return b
	default:
		w.dropped.Add(1)
		return nil
	}
}

// put queues b, taken from w, for writing.
func (w *writer) put(b *buf) { w.queue <- b }

// Dropped is the number of entries dropped for path because its file
// could not keep up; Written the number written. Both are 0 for a path no
// file-logger writes to.
func Dropped(path string) (dropped, written uint64) {
	writers.Lock()
	w := writers.m[path]
	writers.Unlock()
	if w == nil {
		return 0, 0
	}
	return w.dropped.Load(), w.written.Load()
}

func (w *writer) run() {
	reopen := make(chan os.Signal, 1)
	signal.Notify(reopen, syscall.SIGUSR1)
	var (
		f        *os.File
		failing  bool
		reported uint64
	)
	for {
		select {
		case <-reopen:
			if f != nil {
				f.Close()
				f = nil
			}
		case b := <-w.queue:
			if f == nil {
				var err error
				f, err = os.OpenFile(w.path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
				if err != nil && !failing {
					slog.Error("file-logger: failed to open file", "path", w.path, "err", err)
				}
				failing = err != nil
			}
			if f != nil {
				if _, err := f.Write(b.line); err != nil {
					slog.Error("file-logger: failed to write file", "path", w.path, "err", err)
				} else {
					w.written.Add(1)
				}
			}
			w.free <- b
			if d := w.dropped.Load(); d != reported {
				slog.Warn("file-logger: entries dropped, the file not keeping up", "path", w.path, "dropped", d)
				reported = d
			}
		}
	}
}
