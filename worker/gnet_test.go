package worker

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/panjf2000/gnet/v2"
	"golang.org/x/sys/unix"
)

// TestLoopFDs: the worker finds its loop's epoll fd (read back-pressure)
// and listening socket (draining) through the carried gnet's accessors.
func TestLoopFDs(t *testing.T) {
	w := startWorker(t, nil)
	c, br := dialWorker(t, w)
	if resp := getOn(t, c, br, "/none"); resp.StatusCode != 404 {
		t.Fatalf("got %d", resp.StatusCode)
	}
	type fds struct {
		ep  int
		lns []int
	}
	got := make(chan fds, 1)
	err := w.loopRef.Load().el.Execute(context.Background(), gnet.RunnableFunc(func(context.Context) error {
		got <- fds{w.epfd, gnet.ListenerFDs(w.loop, nil)}
		return nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	var f fds
	select {
	case f = <-got:
	case <-time.After(5 * time.Second):
		t.Fatal("the loop did not run the check")
	}
	if link, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(f.ep)); err != nil || link != "anon_inode:[eventpoll]" {
		t.Errorf("epfd %d is %q (%v), want an epoll instance", f.ep, link, err)
	}
	if len(f.lns) != 1 {
		t.Fatalf("listener fds %v, want one", f.lns)
	}
	sa, err := unix.Getsockname(f.lns[0])
	if err != nil {
		t.Fatal(err)
	}
	if in, ok := sa.(*unix.SockaddrInet4); !ok || in.Port != w.Addr().Port {
		t.Errorf("listener fd %d is bound to %v, want port %d", f.lns[0], sa, w.Addr().Port)
	}
	if gnet.PollerFD(nil) != -1 {
		t.Error("PollerFD(nil) != -1")
	}
}
