package accesslog

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// eventually retries f every 10 ms for 10 s.
func eventually(t *testing.T, f func() error) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func commit(l *Log, s string) { l.Commit(append(l.Line(), s...)) }

// Lines go to the file whole and in order: through full buffers, the
// last partial one at Close, and a line longer than a buffer.
func TestLogWritesLines(t *testing.T) {
	path := filepath.Join(t.TempDir(), "logs", "access.log")
	l, err := Open(Options{Path: path, BufferSize: 64, Buffers: 4, Flush: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	var want strings.Builder
	for i := range 200 {
		s := fmt.Sprintf("line %03d %s", i, strings.Repeat("x", i%7))
		if i == 100 {
			s += strings.Repeat("y", 300) // longer than a buffer
		}
		// A free buffer before each line (the writer gave the last one
		// back): nothing may be dropped here.
		eventually(t, func() error {
			if len(l.free) == 0 {
				return fmt.Errorf("writer behind")
			}
			return nil
		})
		commit(l, s)
		want.WriteString(s + "\n")
	}
	l.Close()
	if got := readFile(t, path); got != want.String() {
		t.Errorf("file:\n%s\nwant:\n%s", got, want.String())
	}
	if d := l.Dropped(); d != 0 {
		t.Errorf("%d lines dropped", d)
	}
}

// A buffer holding lines goes to the file once it has waited Flush.
func TestLogFlushInterval(t *testing.T) {
	path := filepath.Join(t.TempDir(), "access.log")
	l, err := Open(Options{Path: path, Flush: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	commit(l, "one")
	l.Tick(int64(time.Second))
	if got := readFile(t, path); got != "" {
		t.Fatalf("written before the flush interval: %q", got)
	}
	l.Tick(int64(time.Second + 49*time.Millisecond))
	time.Sleep(20 * time.Millisecond)
	if got := readFile(t, path); got != "" {
		t.Fatalf("written before the flush interval: %q", got)
	}
	l.Tick(int64(time.Second + 50*time.Millisecond))
	eventually(t, func() error {
		if got := readFile(t, path); got != "one\n" {
			return fmt.Errorf("file %q, want %q", got, "one\n")
		}
		return nil
	})
}

// Reopen after a rename: the lines before go to the renamed file, those
// after to a new one at the path.
func TestLogReopen(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "access.log")
	l, err := Open(Options{Path: path, Flush: time.Nanosecond})
	if err != nil {
		t.Fatal(err)
	}
	flush := func(want string) {
		l.Tick(1)
		l.Tick(2)
		eventually(t, func() error {
			if got := readFile(t, path); got != want {
				return fmt.Errorf("file %q, want %q", got, want)
			}
			return nil
		})
	}
	commit(l, "before")
	flush("before\n")
	if err := os.Rename(path, path+".1"); err != nil {
		t.Fatal(err)
	}
	l.Reopen()
	eventually(t, func() error {
		_, err := os.Stat(path)
		return err
	})
	commit(l, "after")
	flush("after\n")
	l.Close()
	if got := readFile(t, path+".1"); got != "before\n" {
		t.Errorf("rotated file %q", got)
	}
}

// A writer stuck on a file nobody reads (a FIFO whose reader is asleep)
// never blocks Commit: lines are dropped and counted, and the rest goes
// out once the reader wakes.
func TestLogWriterBlocked(t *testing.T) {
	path := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Skip("mkfifo:", err)
	}
	r, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	l, err := Open(Options{Path: path, BufferSize: 4096, Buffers: 2, Flush: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	line := strings.Repeat("z", 99)
	start := time.Now()
	const n = 10_000 // 1 MB: far past the pipe's buffer and both of ours
	for range n {
		commit(l, line)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("%d lines took %v", n, d)
	}
	dropped := l.Dropped()
	if dropped == 0 || dropped >= n {
		t.Fatalf("%d of %d lines dropped, want some", dropped, n)
	}
	// The reader wakes: what was not dropped comes out, whole lines.
	done := make(chan []byte)
	go func() {
		_ = syscall.SetNonblock(int(r.Fd()), false)
		var all []byte
		buf := make([]byte, 64<<10)
		for {
			k, err := r.Read(buf)
			all = append(all, buf[:k]...)
			if err != nil {
				done <- all
				return
			}
		}
	}()
	l.Close()
	all := <-done
	if want := int(n-dropped) * 100; len(all) != want {
		t.Errorf("read %d bytes, want %d", len(all), want)
	}
	for i, s := range strings.Split(strings.TrimSuffix(string(all), "\n"), "\n") {
		if s != line {
			t.Fatalf("line %d: %q", i, s)
		}
	}
}
