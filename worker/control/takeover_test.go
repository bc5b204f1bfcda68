package control

import (
	"fmt"
	"net"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"
)

// unixPair is a connected pair of Unix stream sockets.
func unixPair(t *testing.T) (*net.UnixConn, *net.UnixConn) {
	t.Helper()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	conn := func(fd int) *net.UnixConn {
		f := os.NewFile(uintptr(fd), "pair")
		defer f.Close()
		c, err := net.FileConn(f)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c.(*net.UnixConn)
	}
	return conn(fds[0]), conn(fds[1])
}

// TestHelloFiles: a Hello and the files beside it arrive whole, the files
// open on the same objects, and the socket goes on as a control socket
// with nothing read past the Hello.
func TestHelloFiles(t *testing.T) {
	a, b := unixPair(t)
	var files []*os.File
	for i := range 3 {
		f, err := os.CreateTemp(t.TempDir(), "obj")
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(f, "object %d", i)
		defer f.Close()
		files = append(files, f)
	}
	hello := HelloMsg{Proto: TakeoverProto, ID: 3, PID: 77, CPU: 1, Selector: "ebpf", Mode: "hash",
		Ready: true, Settings: strings.Repeat("s", 64), Files: []string{"a", "b", "c"}}
	errc := make(chan error, 1)
	go func() {
		if err := SendFiles(a, Hello, hello, files); err != nil {
			errc <- err
			return
		}
		errc <- New(a).Send(Ready, ReadyMsg{ID: 3})
	}()
	typ, payload, got, err := RecvFiles(b)
	if err != nil || typ != Hello {
		t.Fatalf("RecvFiles: %v %v", typ, err)
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if string(payload) == "" || !strings.Contains(string(payload), `"settings":"sss`) {
		t.Errorf("payload %s", payload)
	}
	if len(got) != 3 {
		t.Fatalf("%d files, want 3", len(got))
	}
	for i, f := range got {
		defer f.Close()
		b := make([]byte, 32)
		n, _ := f.ReadAt(b, 0)
		if want := fmt.Sprintf("object %d", i); string(b[:n]) != want {
			t.Errorf("file %d reads %q, want %q", i, b[:n], want)
		}
		if flags, err := unix.FcntlInt(f.Fd(), unix.F_GETFD, 0); err != nil || flags&unix.FD_CLOEXEC == 0 {
			t.Errorf("file %d: not close-on-exec (%d, %v)", i, flags, err)
		}
	}
	typ, _, err = New(b).Recv()
	if err != nil || typ != Ready {
		t.Errorf("the frame after Hello: %v %v, want Ready", typ, err)
	}
}

// TestRecvFilesEOF: a peer that closes without a Hello is end of file.
func TestRecvFilesEOF(t *testing.T) {
	a, b := unixPair(t)
	a.Close()
	if _, _, _, err := RecvFiles(b); err == nil {
		t.Fatal("RecvFiles on a closed peer: no error")
	}
}

func TestParseTakeover(t *testing.T) {
	const table = `Num       RefCount Protocol Flags    Type St Inode Path
0000000000000000: 00000002 00000000 00010000 0001 01 40063 @coregate-takeover/k1/0/24655
0000000000000000: 00000002 00000000 00010000 0001 01 39435 @coregate-takeover/k1/1/24656
0000000000000000: 00000003 00000000 00000000 0001 03 39436 @coregate-takeover/k1/2/24657
0000000000000000: 00000002 00000000 00010000 0001 01 39437 @coregate-takeover/k2/0/24658
0000000000000000: 00000002 00000000 00010000 0001 01 39438 @coregate-takeover/k1/x/24659
0000000000000000: 00000002 00000000 00010000 0001 01 39439 /run/coregate-takeover/k1/3/24660
0000000000000000: 00000003 00000000 00000000 0001 03  1060
`
	got, err := parseTakeover(strings.NewReader(table), "k1")
	if err != nil {
		t.Fatal(err)
	}
	want := []TakeoverSocket{
		{Addr: TakeoverAddr("k1", 0, 24655), Slot: 0, PID: 24655},
		{Addr: TakeoverAddr("k1", 1, 24656), Slot: 1, PID: 24656},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// TestFindTakeover: a listening abstract socket named by TakeoverAddr is
// found in this namespace's /proc/net/unix; another key's is not.
func TestFindTakeover(t *testing.T) {
	key := fmt.Sprintf("test%d", os.Getpid())
	addr := TakeoverAddr(key, 5, os.Getpid())
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: addr, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	got, err := FindTakeover(key)
	if err != nil {
		t.Fatal(err)
	}
	want := []TakeoverSocket{{Addr: addr, Slot: 5, PID: os.Getpid()}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if got, _ := FindTakeover(key + "x"); len(got) != 0 {
		t.Errorf("another key finds %v", got)
	}
	c, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: addr, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	pid, uid, err := PeerCred(c)
	if err != nil || pid != os.Getpid() || uid != os.Getuid() {
		t.Errorf("PeerCred = %d, %d, %v; want %d, %d", pid, uid, err, os.Getpid(), os.Getuid())
	}
}
