package accesslog

import (
	"log/slog"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"
)

// Defaults of Options.
const (
	DefaultBufferSize = 16384 // APISIX's access_log_buffer
	DefaultBuffers    = 64
	DefaultFlush      = time.Second
)

// Options configure a Log.
type Options struct {
	// Path is the file, created if missing (and its directory).
	Path string
	// BufferSize is the size of each buffer (access_log_buffer); a line
	// longer than that gets a buffer of its own.
	BufferSize int
	// Buffers is how many buffers a worker has: one filling on the loop,
	// the others with the writer or free. At least 2.
	Buffers int
	// Flush is how long a buffer holding lines may wait before it goes to
	// the writer (nginx's flush=).
	Flush  time.Duration
	Logger *slog.Logger
}

// Log is one worker's access log. Line, Commit, Tick and Close belong to
// the worker's event loop (one goroutine, no lock); Reopen and Dropped
// may be called from any goroutine.
type Log struct {
	opt Options

	// Loop side. cur is the buffer being filled, nil while every buffer is
	// with the writer; it is the loop's from the time it is taken from
	// free until it is sent on full. since is the Tick time (any clock in
	// nanoseconds) of its first line, or -1 when its first line has not
	// had a Tick yet.
	cur   []byte
	since int64
	line  []byte // Line's buffer, valid until Commit
	now   int64  // the last Tick's time

	// full carries filled buffers to the writer, free brings them back
	// emptied; with Buffers buffers in all, neither ever blocks a sender.
	full, free chan []byte
	reopen     chan struct{}
	done       chan struct{}
	dropped    atomic.Uint64
}

// Open opens the file and starts the writer goroutine.
func Open(opt Options) (*Log, error) {
	if opt.BufferSize <= 0 {
		opt.BufferSize = DefaultBufferSize
	}
	if opt.Buffers < 2 {
		opt.Buffers = DefaultBuffers
	}
	if opt.Flush <= 0 {
		opt.Flush = DefaultFlush
	}
	if opt.Logger == nil {
		opt.Logger = slog.Default()
	}
	f, err := openFile(opt.Path)
	if err != nil {
		return nil, err
	}
	l := &Log{
		opt:    opt,
		since:  -1,
		full:   make(chan []byte, opt.Buffers),
		free:   make(chan []byte, opt.Buffers),
		reopen: make(chan struct{}, 1),
		done:   make(chan struct{}),
	}
	l.cur = make([]byte, 0, opt.BufferSize)
	for range opt.Buffers - 1 {
		l.free <- make([]byte, 0, opt.BufferSize)
	}
	go l.writer(f)
	go l.warnDrops()
	return l, nil
}

func openFile(path string) (*os.File, error) {
	if dir := filepath.Dir(path); dir != "" {
		_ = os.MkdirAll(dir, 0o755)
	}
	return os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
}

// Line returns an empty buffer to render a line into; the caller appends
// to it and passes the result to Commit. It is valid until Commit.
func (l *Log) Line() []byte { return l.line[:0] }

// Commit queues a rendered line (without its newline: Commit adds it).
// It never blocks: when no buffer is free the line is dropped and counted.
func (l *Log) Commit(line []byte) {
	line = append(line, '\n')
	l.line = line // keep the grown capacity
	if l.cur != nil && len(l.cur)+len(line) > cap(l.cur) && len(l.cur) > 0 {
		l.handOff()
	}
	if l.cur == nil && !l.take() {
		l.dropped.Add(1)
		return
	}
	if len(l.cur) == 0 {
		l.since = -1
	}
	l.cur = append(l.cur, line...)
	if len(l.cur) >= cap(l.cur) {
		l.handOff()
	}
}

// take gets a free buffer for cur, if there is one.
func (l *Log) take() bool {
	select {
	case b := <-l.free:
		l.cur = b[:0]
		return true
	default:
		return false
	}
}

// handOff sends cur to the writer and takes the next free buffer, if any.
func (l *Log) handOff() {
	l.full <- l.cur // never blocks: full has room for every buffer
	l.cur = nil
	l.take()
}

// Tick is called on the loop with the time (nanoseconds, any monotonic
// origin): a buffer holding lines for Flush goes to the writer.
func (l *Log) Tick(now int64) {
	l.now = now
	if l.cur == nil {
		l.take()
		return
	}
	if len(l.cur) == 0 {
		return
	}
	if l.since < 0 {
		l.since = now
		return
	}
	if now-l.since >= int64(l.opt.Flush) {
		l.handOff()
	}
}

// Close hands the last lines to the writer, waits for it to write them and
// closes the file. It is called once the loop has stopped.
func (l *Log) Close() {
	if len(l.cur) > 0 {
		l.full <- l.cur
	}
	l.cur = nil
	close(l.full)
	<-l.done
}

// Reopen has the writer open the path again, between two writes: after a
// rotation renamed the file, the lines go to a new one. Safe from any
// goroutine; it does not wait.
func (l *Log) Reopen() {
	select {
	case l.reopen <- struct{}{}:
	default: // one is pending already
	}
}

// Dropped is how many lines were dropped because the writer was behind.
func (l *Log) Dropped() uint64 { return l.dropped.Load() }

// writer writes the buffers it gets from full, in order, each in one write
// of whole lines, and gives them back on free; it reopens the file when
// asked. It ends when full is closed and
// drained.
func (l *Log) writer(f *os.File) {
	defer close(l.done)
	var lastErr time.Time
	failed := 0 // writes failed since the last error logged
	write := func(b []byte) {
		if _, err := f.Write(b); err != nil {
			// Logged once a second at most: a full disk fails every write.
			if failed++; time.Since(lastErr) >= time.Second {
				l.opt.Logger.Error("access log: write", "path", l.opt.Path, "err", err, "failed_writes", failed)
				lastErr, failed = time.Now(), 0
			}
		}
	}
	for {
		select {
		case <-l.reopen:
			nf, err := openFile(l.opt.Path)
			if err != nil {
				l.opt.Logger.Error("access log: reopen", "path", l.opt.Path, "err", err)
				continue
			}
			_ = f.Close()
			f = nf
		case b, ok := <-l.full:
			if !ok {
				_ = f.Close()
				return
			}
			write(b)
			select {
			case l.free <- b[:0]:
			default: // cannot happen: free has room for every buffer
			}
		}
	}
}

// warnDrops logs, once a second at most, how many lines were dropped since
// the last warning, until the writer ends. It runs apart from the writer,
// which may be stuck in a write for as long as the disk is.
func (l *Log) warnDrops() {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	var warned uint64
	warn := func() {
		if d := l.dropped.Load(); d != warned {
			l.opt.Logger.Warn("access log: lines dropped, the disk is behind", "path", l.opt.Path, "dropped", d-warned)
			warned = d
		}
	}
	for {
		select {
		case <-t.C:
			warn()
		case <-l.done:
			warn()
			return
		}
	}
}
