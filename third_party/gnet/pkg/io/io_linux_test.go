package io

import (
	"bytes"
	"errors"
	"testing"

	"golang.org/x/sys/unix"
)

// socketPair is two connected non-blocking stream sockets, closed with the test.
func socketPair(t testing.TB) (a, b int) {
	t.Helper()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fds[0]); unix.Close(fds[1]) })
	return fds[0], fds[1]
}

// TestRaw: Read, Write and Writev move the bytes, and fail as
// golang.org/x/sys/unix's functions do: n is -1 and the error an
// unix.Errno that compares equal to unix.EAGAIN and the like.
func TestRaw(t *testing.T) {
	a, b := socketPair(t)
	buf := make([]byte, 64)

	if n, err := Read(a, buf); n != -1 || err != unix.EAGAIN {
		t.Fatalf("read of an empty socket: %d, %v; want -1, EAGAIN", n, err)
	}
	if n, err := Write(b, []byte("hello")); n != 5 || err != nil {
		t.Fatalf("write: %d, %v", n, err)
	}
	if n, err := Read(a, buf); n != 5 || err != nil || string(buf[:n]) != "hello" {
		t.Fatalf("read: %d, %v, %q", n, err, buf[:clamp(n)])
	}

	// Empty buffers are skipped; more than stackIovecs of them are passed too.
	var iov [][]byte
	var want []byte
	for i := 0; i < 3*stackIovecs; i++ {
		p := bytes.Repeat([]byte{byte('a' + i%26)}, i%3)
		iov = append(iov, p)
		want = append(want, p...)
	}
	if n, err := Writev(b, iov); n != len(want) || err != nil {
		t.Fatalf("writev: %d, %v; want %d", n, err, len(want))
	}
	if n, err := Read(a, buf); n != len(want) || err != nil || !bytes.Equal(buf[:n], want) {
		t.Fatalf("read after writev: %d, %v, %q; want %q", n, err, buf[:clamp(n)], want)
	}
	if n, err := Writev(b, [][]byte{nil, {}}); n != 0 || err != nil {
		t.Fatalf("writev of nothing: %d, %v", n, err)
	}
	if n, err := Write(b, nil); n != 0 || err != nil {
		t.Fatalf("write of nothing: %d, %v", n, err)
	}

	// A full socket: EAGAIN, as from x/sys.
	chunk := make([]byte, 64<<10)
	var err error
	for i := 0; i < 10000 && err == nil; i++ {
		_, err = Write(b, chunk)
	}
	if n, err := Write(b, chunk); n != -1 || err != unix.EAGAIN {
		t.Fatalf("write to a full socket: %d, %v; want -1, EAGAIN", n, err)
	}
	if n, err := Writev(b, [][]byte{chunk, chunk}); n != -1 || err != unix.EAGAIN {
		t.Fatalf("writev to a full socket: %d, %v; want -1, EAGAIN", n, err)
	}

	// The peer gone: a read of 0 at the end of the data, EPIPE on write.
	unix.Close(b)
	for {
		n, err := Read(a, chunk)
		if err != nil {
			t.Fatalf("read after the peer closed: %d, %v", n, err)
		}
		if n == 0 {
			break
		}
	}
	if n, err := Write(a, []byte("x")); n != -1 || !errors.Is(err, unix.EPIPE) {
		t.Fatalf("write to a closed peer: %d, %v; want -1, EPIPE", n, err)
	}
	if n, err := Read(-1, buf); n != -1 || err != unix.EBADF {
		t.Fatalf("read of fd -1: %d, %v; want -1, EBADF", n, err)
	}
}

// TestRawAllocs: no allocation for a read, a write or a writev of up to
// stackIovecs buffers, nor for the error of a socket with nothing to read.
func TestRawAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	a, b := socketPair(t)
	buf := make([]byte, 64)
	iov := make([][]byte, stackIovecs)
	for i := range iov {
		iov[i] = []byte("x")
	}
	n := testing.AllocsPerRun(100, func() {
		_, _ = Write(b, buf[:10])
		_, _ = Writev(b, iov)
		_, _ = Read(a, buf)
		_, _ = Read(a, buf) // EAGAIN
	})
	if n != 0 {
		t.Fatalf("%v allocations per round, want 0", n)
	}
}

// BenchmarkWrite compares a write and a read of one byte through these
// functions with x/sys's (entersyscall and exitsyscall around each).
func BenchmarkWrite(b *testing.B) {
	for _, bc := range []struct {
		name        string
		write, read func(int, []byte) (int, error)
	}{{"raw", Write, Read}, {"x-sys-unix", unix.Write, unix.Read}} {
		b.Run(bc.name, func(b *testing.B) {
			x, y := socketPair(b)
			p := []byte{1}
			for i := 0; i < b.N; i++ {
				if _, err := bc.write(x, p); err != nil {
					b.Fatal(err)
				}
				if _, err := bc.read(y, p); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func clamp(n int) int {
	if n < 0 {
		return 0
	}
	return n
}
