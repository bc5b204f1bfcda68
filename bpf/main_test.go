//go:build linux

package bpf

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Environment of the child role: the test binary re-executes itself as a
// worker that joins the selector from inherited descriptors.
const (
	envRole     = "COREGATE_BPF_TEST_ROLE"
	envPort     = "COREGATE_BPF_TEST_PORT"
	envSlot     = "COREGATE_BPF_TEST_SLOT"
	envDropCaps = "COREGATE_BPF_TEST_DROPCAPS"
	roleMember  = "member"
	childConns  = 7 // count the child publishes
	childLife   = 60 * time.Second
)

func TestMain(m *testing.M) {
	if os.Getenv(envRole) == roleMember {
		os.Exit(memberChild())
	}
	before := kernelFDs()
	code := m.Run()
	if code == 0 {
		if leaked := kernelFDs() - before; leaked > 0 {
			fmt.Fprintf(os.Stderr, "bpf: %d socket or bpf descriptors leaked by the tests\n", leaked)
			code = 99
		}
	}
	os.Exit(code)
}

// kernelFDs counts this process's sockets and BPF objects.
func kernelFDs() int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return 0
	}
	n := 0
	for _, e := range ents {
		link, err := os.Readlink("/proc/self/fd/" + e.Name())
		if err == nil && (strings.HasPrefix(link, "socket:") || strings.HasPrefix(link, "anon_inode:bpf")) {
			n++
		}
	}
	return n
}

// memberChild is the worker role: optionally drop every capability (by
// emptying the bounding set and re-executing, while staying uid 0 so that the
// reuseport group accepts the socket), open the inherited selector objects,
// listen on the given port, join, publish childConns, report "ready" and wait
// to be killed (bounded by childLife).
func memberChild() int {
	fail := func(err error) int {
		fmt.Printf("error %v\n", err)
		return 1
	}
	if os.Getenv(envDropCaps) == "1" {
		runtime.LockOSThread()
		last, err := os.ReadFile("/proc/sys/kernel/cap_last_cap")
		if err != nil {
			return fail(err)
		}
		n, err := strconv.Atoi(strings.TrimSpace(string(last)))
		if err != nil {
			return fail(err)
		}
		for c := 0; c <= n; c++ {
			if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0); err != nil {
				return fail(fmt.Errorf("drop cap %d: %w", c, err))
			}
		}
		var env []string
		for _, kv := range os.Environ() {
			if !strings.HasPrefix(kv, envDropCaps+"=") {
				env = append(env, kv)
			}
		}
		exe, err := os.Executable()
		if err != nil {
			return fail(err)
		}
		return fail(syscall.Exec(exe, os.Args, env))
	}
	port, err1 := strconv.Atoi(os.Getenv(envPort))
	slot, err2 := strconv.Atoi(os.Getenv(envSlot))
	if err := errors.Join(err1, err2); err != nil {
		return fail(err)
	}
	files := InheritedFiles(3)
	mb, err := OpenMember(files, slot)
	for _, f := range files {
		f.Close()
	}
	if err != nil {
		return fail(err)
	}
	fd, _, err := rawListen(port)
	if err != nil {
		return fail(err)
	}
	if err := mb.Join(fd); err != nil {
		return fail(err)
	}
	mb.AddConns(childConns)
	fmt.Printf("ready capeff=%s\n", capEff())
	done := make(chan struct{})
	go func() {
		r := bufio.NewReader(os.Stdin)
		for {
			if _, err := r.ReadByte(); err != nil {
				close(done)
				return
			}
		}
	}()
	select {
	case <-done:
	case <-time.After(childLife):
	}
	return 0
}

// capEff returns the CapEff line of /proc/self/status.
func capEff() string {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return "?"
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "CapEff:"); ok {
			return strings.TrimSpace(v)
		}
	}
	return "?"
}

var probeOnce = sync.OnceValues(Probe)

// requireEBPF skips when the kernel or process truly lacks the eBPF selector.
func requireEBPF(t testing.TB) {
	t.Helper()
	k, err := probeOnce()
	if k != KindEBPF {
		skipUnsupported(t, "eBPF selector (probe: "+k.String()+")", err)
	}
}

// skipUnsupported skips for a probe error that wraps ErrNotSupported (the
// capability is truly missing), never when CI=true, and fails on an
// inconclusive error or a bare, unwrapped ErrNotSupported.
func skipUnsupported(t testing.TB, what string, err error) {
	t.Helper()
	switch {
	case err == nil:
		t.Fatalf("%s: unavailable without a reason", what)
	case err == ErrNotSupported:
		t.Fatalf("%s: bare ErrNotSupported", what)
	case os.Getenv("CI") == "true":
		t.Fatalf("%s: unavailable under CI=true: %v", what, err)
	case errors.Is(err, ErrNotSupported):
		t.Skipf("%s: %v", what, err)
	default:
		t.Fatalf("%s: inconclusive probe: %v", what, err)
	}
}
