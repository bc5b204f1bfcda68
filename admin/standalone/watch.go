package standalone

import (
	"context"
	"crypto/sha256"
	"os"
	"path/filepath"
	"time"

	"coregate/admin/spec"
)

// DefaultInterval is how often a Watcher looks at the file, as APISIX does.
const DefaultInterval = time.Second

// Watcher reloads a standalone file when it changes. It polls the file's
// identity, size and modification time every Interval; a file modified
// within the last two intervals is also re-read and compared by content,
// so a change that keeps size and (coarse) mtime is not missed. Writes
// that land between two polls are loaded once (a burst coalesces).
//
// OnChange gets each new valid Spec; OnError gets each load failure — an
// invalid file, or one caught mid-write without its #END — and the previous
// Spec stays the caller's current one, since OnChange is not called. A
// failure is judged once the file has settled: it is reported when the next
// poll finds the file as it was (same identity, size, mtime and content),
// or when the content that replaced it fails too; a file caught mid-write
// and complete at the next poll loads without an error. The failed content
// is retried as soon as the file changes again. A change
// back to the last good content after an error calls OnChange again; a
// rewrite with identical content after success does not (compare Spec.Hash
// to skip others).
//
// Callbacks run on the goroutine that called Run, one at a time; they must
// not block for long. A Watcher must not be copied or changed once Run has
// started.
type Watcher struct {
	Path     string
	Interval time.Duration // 0 means DefaultInterval
	OnChange func(*spec.Spec)
	OnError  func(error)
	// LookupEnv resolves ${{VAR}}; nil means os.LookupEnv.
	LookupEnv func(string) (string, bool)
}

// Watch runs a Watcher on path until ctx is done: it loads the file at
// once, then polls it every interval (0 means DefaultInterval).
func Watch(ctx context.Context, path string, interval time.Duration, onChange func(*spec.Spec), onError func(error)) {
	w := &Watcher{Path: path, Interval: interval, OnChange: onChange, OnError: onError}
	w.Run(ctx)
}

// Run loads the file, then polls it until ctx is done.
func (w *Watcher) Run(ctx context.Context) {
	interval := w.Interval
	if interval <= 0 {
		interval = DefaultInterval
	}
	lookup := w.LookupEnv
	if lookup == nil {
		lookup = os.LookupEnv
	}
	st := watchState{}
	w.poll(&st, interval, lookup)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			w.poll(&st, interval, lookup)
		}
	}
}

type watchState struct {
	info     os.FileInfo // of the last content read
	readAt   time.Time
	sum      [32]byte // of the last content read
	statErr  string   // the last stat error reported
	good     bool     // the last content read loaded, or its failure is not reported yet
	goodHash [32]byte // Spec.Hash of the last good load
	// pending is the failure of the last content read, not reported yet:
	// the file may have been caught mid-write.
	pending error
}

// settled reports the pending failure: the file has not changed since it
// was read.
func (w *Watcher) settled(st *watchState) {
	if err := st.pending; err != nil {
		st.pending, st.good = nil, false
		w.report(err)
	}
}

func sameFile(a, b os.FileInfo) bool {
	return a != nil && b != nil && os.SameFile(a, b) && a.Size() == b.Size() && a.ModTime().Equal(b.ModTime())
}

func (w *Watcher) poll(st *watchState, interval time.Duration, lookup func(string) (string, bool)) {
	fi, err := os.Stat(w.Path)
	if err != nil {
		if msg := err.Error(); msg != st.statErr {
			st.statErr = msg
			st.info, st.sum, st.good, st.pending = nil, [32]byte{}, false, nil
			w.report(&LoadError{File: filepath.Base(w.Path), Msg: msg, kind: ErrFormat, err: err})
		}
		return
	}
	st.statErr = ""
	racy := fi.ModTime().After(st.readAt.Add(-2 * interval))
	if sameFile(fi, st.info) && !racy {
		w.settled(st)
		return
	}
	data, err := os.ReadFile(w.Path)
	if err != nil {
		return // gone or unreadable between stat and read: next poll reports it
	}
	if fi2, err := os.Stat(w.Path); err != nil || !sameFile(fi, fi2) {
		return // still being written: take it on the next poll
	}
	st.info, st.readAt = fi, time.Now()
	sum := sha256.Sum256(data)
	if sum == st.sum {
		w.settled(st)
		return
	}
	st.sum = sum
	s, err := Parse(data, w.Path, lookup)
	if err != nil {
		if st.pending == nil {
			st.pending = err // judged at the next poll
			return
		}
		// The second failure in a row.
		st.pending = err
		w.settled(st)
		return
	}
	st.pending = nil
	if st.good && s.Hash == st.goodHash {
		return
	}
	st.good, st.goodHash = true, s.Hash
	if w.OnChange != nil {
		w.OnChange(s)
	}
}

func (w *Watcher) report(err error) {
	if w.OnError != nil {
		w.OnError(err)
	}
}
