package standalone

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"coregate/admin/spec"
)

const (
	pollEvery = 20 * time.Millisecond
	waitFor   = 5 * time.Second // bound on any single expected event
	quietFor  = 300 * time.Millisecond
)

func routeFile(uri string) string {
	return fmt.Sprintf("routes:\n  - id: 1\n    uri: %s\n    upstream:\n      nodes:\n        \"127.0.0.1:1980\": 1\n#END\n", uri)
}

// writeFile replaces the file atomically, as editors and config tools do.
func writeFile(t *testing.T, path, body string) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

type events struct {
	specs chan *spec.Spec
	errs  chan error
}

func startWatcher(t *testing.T, path string) *events {
	t.Helper()
	ev := &events{specs: make(chan *spec.Spec, 64), errs: make(chan error, 64)}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		Watch(ctx, path, pollEvery,
			func(s *spec.Spec) { ev.specs <- s },
			func(err error) { ev.errs <- err })
	}()
	t.Cleanup(func() {
		cancel()
		wg.Wait()
	})
	return ev
}

func (ev *events) wantSpec(t *testing.T, uri string) {
	t.Helper()
	select {
	case s := <-ev.specs:
		if len(s.Routes) != 1 || s.Routes[0].URI != uri {
			t.Fatalf("got a spec with routes %+v, want uri %s", s.Routes, uri)
		}
	case err := <-ev.errs:
		t.Fatalf("got error %v, want a spec with uri %s", err, uri)
	case <-time.After(waitFor):
		t.Fatalf("no spec with uri %s within %v", uri, waitFor)
	}
}

func (ev *events) wantErr(t *testing.T, kind error) {
	t.Helper()
	select {
	case err := <-ev.errs:
		if !errors.Is(err, kind) {
			t.Fatalf("got error %v, want %v", err, kind)
		}
	case s := <-ev.specs:
		t.Fatalf("got a spec (routes %+v), want an error %v", s.Routes, kind)
	case <-time.After(waitFor):
		t.Fatalf("no error within %v", waitFor)
	}
}

func (ev *events) wantQuiet(t *testing.T) {
	t.Helper()
	select {
	case s := <-ev.specs:
		t.Fatalf("unexpected spec (routes %+v)", s.Routes)
	case err := <-ev.errs:
		t.Fatalf("unexpected error %v", err)
	case <-time.After(quietFor):
	}
}

func TestWatcherChangeInvalidRestore(t *testing.T) {
	path := filepath.Join(t.TempDir(), "apisix.yaml")
	writeFile(t, path, routeFile("/one"))
	ev := startWatcher(t, path)
	ev.wantSpec(t, "/one")

	writeFile(t, path, routeFile("/two"))
	ev.wantSpec(t, "/two")

	// invalid content: reported, no new spec
	writeFile(t, path, "routes:\n  - uri: /x\n    foo: 1\n#END\n")
	ev.wantErr(t, ErrInvalid)
	ev.wantQuiet(t)

	// restoring the last good content brings it back
	writeFile(t, path, routeFile("/two"))
	ev.wantSpec(t, "/two")

	// the same content written again is not a change
	writeFile(t, path, routeFile("/two"))
	ev.wantQuiet(t)
}

func TestWatcherMidWrite(t *testing.T) {
	path := filepath.Join(t.TempDir(), "apisix.yaml")
	writeFile(t, path, routeFile("/one"))
	ev := startWatcher(t, path)
	ev.wantSpec(t, "/one")

	// a writer that has not reached #END yet
	full := routeFile("/three")
	writeFile(t, path, full[:30])
	ev.wantErr(t, ErrEndFlag)
	ev.wantQuiet(t) // not reported again while it does not change

	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(full[30:]); err != nil {
		t.Fatal(err)
	}
	ev.wantSpec(t, "/three")
}

func TestWatcherBurstCoalesces(t *testing.T) {
	path := filepath.Join(t.TempDir(), "apisix.yaml")
	writeFile(t, path, routeFile("/start"))
	ev := startWatcher(t, path)
	ev.wantSpec(t, "/start")

	const writes = 50
	for i := 0; i < writes; i++ {
		writeFile(t, path, routeFile(fmt.Sprintf("/burst%d", i)))
	}
	last := fmt.Sprintf("/burst%d", writes-1)
	seen := 0
	deadline := time.After(waitFor)
	for {
		select {
		case s := <-ev.specs:
			seen++
			if s.Routes[0].URI == last {
				if seen >= writes {
					t.Fatalf("%d writes gave %d reloads; a burst should coalesce", writes, seen)
				}
				ev.wantQuiet(t)
				return
			}
		case err := <-ev.errs:
			t.Fatalf("unexpected error %v", err)
		case <-deadline:
			t.Fatalf("the last write of the burst was not loaded within %v (%d reloads seen)", waitFor, seen)
		}
	}
}

func TestWatcherMissingFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "apisix.yaml")
	ev := startWatcher(t, path)
	ev.wantErr(t, os.ErrNotExist)
	ev.wantQuiet(t) // reported once, not on every poll
	writeFile(t, path, routeFile("/late"))
	ev.wantSpec(t, "/late")
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	ev.wantErr(t, os.ErrNotExist)
	writeFile(t, path, routeFile("/late"))
	ev.wantSpec(t, "/late") // back after an error: reported even though unchanged
}

// A rewrite that keeps the size and lands within the same mtime tick is
// still seen, by content.
func TestWatcherSameSizeRewrite(t *testing.T) {
	path := filepath.Join(t.TempDir(), "apisix.yaml")
	if err := os.WriteFile(path, []byte(routeFile("/aaa")), 0o644); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	ev := startWatcher(t, path)
	ev.wantSpec(t, "/aaa")
	if err := os.WriteFile(path, []byte(routeFile("/bbb")), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(path, fi.ModTime(), fi.ModTime()); err != nil {
		t.Fatal(err)
	}
	ev.wantSpec(t, "/bbb")
}

func TestWatcherStops(t *testing.T) {
	path := filepath.Join(t.TempDir(), "apisix.yaml")
	writeFile(t, path, routeFile("/one"))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		(&Watcher{Path: path, Interval: pollEvery, OnChange: func(*spec.Spec) {}}).Run(ctx)
		close(done)
	}()
	cancel()
	select {
	case <-done:
	case <-time.After(waitFor):
		t.Fatal("Run did not return after its context was cancelled")
	}
}

// A failure is judged once the file has settled: content caught mid-write
// and complete at the next poll loads without an error; content that stays
// as it was, or is replaced by content that fails too, is reported once.
// The polls are driven by hand, with the file's change seen by its size
// and mtime (by-stat) or, within the racy window, by its content.
func TestWatcherJudgesSettledFile(t *testing.T) {
	for _, mode := range []struct {
		name     string
		interval time.Duration
	}{{"by-stat", time.Nanosecond}, {"by-content", time.Hour}} {
		t.Run(mode.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "apisix.yaml")
			var specs []*spec.Spec
			var errs []error
			w := &Watcher{Path: path,
				OnChange: func(s *spec.Spec) { specs = append(specs, s) },
				OnError:  func(err error) { errs = append(errs, err) }}
			var st watchState
			poll := func() { w.poll(&st, mode.interval, os.LookupEnv) }
			want := func(step string, nSpecs, nErrs int) {
				t.Helper()
				if len(specs) != nSpecs || len(errs) != nErrs {
					t.Fatalf("%s: %d specs and errors %v; want %d specs and %d errors", step, len(specs), errs, nSpecs, nErrs)
				}
			}

			// Caught mid-write, complete at the next poll: no error.
			full := routeFile("/one")
			writeFile(t, path, full[:30])
			poll()
			want("half written", 0, 0)
			appendFile(t, path, full[30:])
			poll()
			want("completed", 1, 0)

			// Left half written: reported at the next poll, once.
			full = routeFile("/two")
			writeFile(t, path, full[:40])
			poll()
			want("half written again", 1, 0)
			poll()
			want("unchanged", 1, 1)
			if !errors.Is(errs[0], ErrEndFlag) {
				t.Fatalf("got %v, want %v", errs[0], ErrEndFlag)
			}
			poll()
			want("still unchanged", 1, 1)
			appendFile(t, path, full[40:])
			poll()
			want("completed at last", 2, 1)

			// Two failing contents in a row: the second is reported.
			writeFile(t, path, full[:35])
			poll()
			want("half written a third time", 2, 1)
			writeFile(t, path, "routes:\n  - uri: /x\n    foo: 1\n#END\n")
			poll()
			want("replaced by invalid content", 2, 2)
			if !errors.Is(errs[1], ErrInvalid) {
				t.Fatalf("got %v, want %v", errs[1], ErrInvalid)
			}
		})
	}
}

// appendFile appends to the file in place, as a slow writer does.
func appendFile(t *testing.T, path, s string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(s); err != nil {
		t.Fatal(err)
	}
}
