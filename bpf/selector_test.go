//go:build linux

package bpf

import (
	"errors"
	"fmt"
	"os"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"
)

func newTestSelector(t testing.TB, mode Mode, slots int, cpus []int) *Selector {
	t.Helper()
	requireEBPF(t)
	s, err := NewSelector(mode, slots, cpus)
	if err != nil {
		t.Fatalf("NewSelector(%v, %d, %v): %v", mode, slots, cpus, err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("close selector: %v", err)
		}
	})
	return s
}

// joinAll opens one member per listener, slot i for listener i, and joins.
func joinAll(t testing.TB, s *Selector, ls []*listener) []*Member {
	t.Helper()
	ms := make([]*Member, len(ls))
	for i, l := range ls {
		m, err := OpenMember(s.Files(), i)
		if err != nil {
			t.Fatalf("OpenMember(slot %d): %v", i, err)
		}
		t.Cleanup(func() { m.Close() })
		if err := m.Join(l.fd); err != nil {
			t.Fatalf("Join(slot %d): %v", i, err)
		}
		ms[i] = m
	}
	return ms
}

func TestAllModesLoad(t *testing.T) {
	for _, mode := range []Mode{ModeHash, ModeCPU, ModeLeastConn} {
		for _, slots := range []int{1, 2, 17, 64, MaxSlots} {
			s, err := NewSelector(mode, slots, nil)
			if err != nil {
				requireEBPF(t)
				t.Fatalf("NewSelector(%v, %d): %v", mode, slots, err)
			}
			if got := len(s.Files()); got != NumFiles {
				t.Errorf("%v/%d: %d files, want %d", mode, slots, got, NumFiles)
			}
			if err := s.Close(); err != nil {
				t.Errorf("close: %v", err)
			}
			if err := s.Close(); err != nil {
				t.Errorf("second close: %v", err)
			}
		}
	}
}

func TestSteerHash(t *testing.T) {
	s := newTestSelector(t, ModeHash, 2, nil)
	ls := listenGroup(t, 2)
	joinAll(t, s, ls)
	counts := steer(t, ls, -1, 200)
	t.Logf("hash: %v", counts)
	if counts[0] == 0 || counts[1] == 0 {
		t.Errorf("hash mode: counts %v, want both slots used", counts)
	}
}

func TestSteerCPU(t *testing.T) {
	s := newTestSelector(t, ModeCPU, 2, nil)
	ls := listenGroup(t, 2)
	joinAll(t, s, ls)
	cpus := allowedCPUs(t)
	if len(cpus) > 2 {
		cpus = cpus[:2]
	}
	const n = 100
	for _, c := range cpus {
		for target := range 2 {
			m := []int{-1, -1}
			m[target] = c
			m[1-target] = -1
			if err := s.SetCPUs(m); err != nil {
				t.Fatal(err)
			}
			counts := steer(t, ls, c, n)
			t.Logf("client on cpu %d, cpu mapped to slot %d: %v", c, target, counts)
			if counts[target]*100 < 99*n {
				t.Errorf("client on cpu %d: counts %v, want >= 99%% on slot %d", c, counts, target)
			}
		}
	}
	// The default mapping (CPU i -> slot i), as the supervisor passes it.
	if err := s.SetCPUs(nil); err != nil {
		t.Fatal(err)
	}
	for _, c := range cpus {
		if c > 1 {
			continue
		}
		counts := steer(t, ls, c, n)
		if counts[c]*100 < 99*n {
			t.Errorf("identity map, client on cpu %d: counts %v", c, counts)
		}
	}
}

func TestSteerLeastConn(t *testing.T) {
	s := newTestSelector(t, ModeLeastConn, 2, nil)
	ls := listenGroup(t, 2)
	ms := joinAll(t, s, ls)
	const n = 200
	tests := []struct {
		name   string
		loads  [2]int64
		check  func(counts []int) bool
		expect string
	}{
		{"slot0 busy", [2]int64{1000, 0}, func(c []int) bool { return c[1]*100 >= 95*n }, ">= 95% on slot 1"},
		{"slot1 busy", [2]int64{0, 1000}, func(c []int) bool { return c[0]*100 >= 95*n }, ">= 95% on slot 0"},
		{"slightly busier", [2]int64{3, 2}, func(c []int) bool { return c[1]*100 >= 95*n }, ">= 95% on slot 1"},
		{"equal", [2]int64{5, 5}, func(c []int) bool { return c[0] > 0 && c[1] > 0 }, "both slots used"},
	}
	for _, tt := range tests {
		for i, m := range ms {
			m.AddConns(tt.loads[i] - m.Conns())
			if got := s.Conns(i); got != tt.loads[i] {
				t.Fatalf("%s: Selector.Conns(%d) = %d, want %d", tt.name, i, got, tt.loads[i])
			}
		}
		counts := steer(t, ls, -1, n)
		t.Logf("%s %v: %v", tt.name, tt.loads, counts)
		if !tt.check(counts) {
			t.Errorf("%s: counts %v, want %s", tt.name, counts, tt.expect)
		}
	}
}

// TestLiveAndLeave checks that SetLive bounds the slots in use and that the
// program skips emptied slots (probing onwards, wrapping at live) instead of
// handing their share to the kernel hash.
func TestLiveAndLeave(t *testing.T) {
	s := newTestSelector(t, ModeHash, 4, nil)
	ls := listenGroup(t, 4)
	ms := joinAll(t, s, ls)
	const n = 200
	nonzero := func(c []int) []int {
		var out []int
		for i, v := range c {
			if v > 0 {
				out = append(out, i)
			}
		}
		return out
	}
	steps := []struct {
		name string
		do   func() error
		want []int // slots that receive connections
	}{
		{"all live", func() error { return nil }, []int{0, 1, 2, 3}},
		{"live 1", func() error { return s.SetLive(1) }, []int{0}},
		{"live 2", func() error { return s.SetLive(2) }, []int{0, 1}},
		{"live 4, slots 1 and 2 left", func() error {
			return errors.Join(s.SetLive(4), ms[1].Leave(), ms[2].Leave())
		}, []int{0, 3}},
		{"slot 3 left too (probe wraps)", func() error { return ms[3].Leave() }, []int{0}},
		{"leave twice", func() error { return ms[3].Leave() }, []int{0}},
		// A worker told to drain while it boots leaves before it joins:
		// that Join must not put a draining socket back.
		{"slot 2 joins after leaving: stays out", func() error { return ms[2].Join(ls[2].fd) }, []int{0}},
	}
	for _, st := range steps {
		if err := st.do(); err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		counts := steer(t, ls, -1, n)
		t.Logf("%s: %v", st.name, counts)
		if diff := cmp.Diff(st.want, nonzero(counts)); diff != "" {
			t.Errorf("%s: slots used (-want +got):\n%s counts %v", st.name, diff, counts)
		}
	}
}

func TestSelectorErrors(t *testing.T) {
	requireEBPF(t)
	tests := []struct {
		mode  Mode
		slots int
		want  error
	}{
		{Mode(3), 2, ErrBadMode},
		{ModeHash, 0, ErrBadSlot},
		{ModeHash, -1, ErrBadSlot},
		{ModeHash, MaxSlots + 1, ErrBadSlot},
	}
	for _, tt := range tests {
		s, err := NewSelector(tt.mode, tt.slots, nil)
		if !errors.Is(err, tt.want) {
			t.Errorf("NewSelector(%d, %d) = %v, want %v", tt.mode, tt.slots, err, tt.want)
		}
		if s != nil {
			s.Close()
		}
	}
	s := newTestSelector(t, ModeCPU, 2, []int{0, 1})
	calls := []struct {
		name string
		err  error
		want error
	}{
		{"SetLive(-1)", s.SetLive(-1), ErrBadSlot},
		{"SetLive(3)", s.SetLive(3), ErrBadSlot},
		{"SetLive(0)", s.SetLive(0), nil},
		{"SetCPUs(3 entries)", s.SetCPUs([]int{0, 1, 0}), ErrBadSlot},
		{"SetCPUs(cpu 1<<20)", s.SetCPUs([]int{1 << 20}), ErrBadCPU},
		{"ResetConns(2)", s.ResetConns(2), ErrBadSlot},
		{"ResetConns(1)", s.ResetConns(1), nil},
	}
	for _, c := range calls {
		if !errors.Is(c.err, c.want) {
			t.Errorf("%s = %v, want %v", c.name, c.err, c.want)
		}
	}
	s.Close()
	if err := s.SetLive(1); !errors.Is(err, ErrClosed) {
		t.Errorf("SetLive after Close = %v, want ErrClosed", err)
	}
}

func TestOpenMemberErrors(t *testing.T) {
	s := newTestSelector(t, ModeHash, 2, nil)
	f := s.Files()
	notBPF, err := os.Open("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	defer notBPF.Close()
	tests := []struct {
		name  string
		files []*os.File
		slot  int
		want  error
	}{
		{"no files", nil, 0, ErrBadFiles},
		{"two files", f[:2], 0, ErrBadFiles},
		{"slot -1", f, -1, ErrBadSlot},
		{"slot 2 of 2", f, 2, ErrBadSlot},
		{"program first", []*os.File{f[FileProgram], f[FileSockArray], f[FileLoads]}, 0, ErrBadFiles},
		{"config as loads", []*os.File{f[FileSockArray], f[FileProgram], f[FileConfig]}, 0, ErrBadFiles},
		{"not a bpf object", []*os.File{notBPF, f[FileProgram], f[FileLoads]}, 0, ErrBadFiles},
		{"nil file", []*os.File{f[FileSockArray], nil, f[FileLoads]}, 0, ErrBadFiles},
		{"first three", f[:3], 1, nil},
	}
	for _, tt := range tests {
		m, err := OpenMember(tt.files, tt.slot)
		if !errors.Is(err, tt.want) {
			t.Errorf("%s: OpenMember = %v, want %v", tt.name, err, tt.want)
		}
		if m != nil {
			if err := m.Close(); err != nil {
				t.Errorf("%s: close: %v", tt.name, err)
			}
		}
	}
}

func TestJoinErrors(t *testing.T) {
	s := newTestSelector(t, ModeHash, 1, nil)
	m, err := OpenMember(s.Files(), 0)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	unbound, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(unbound)
	if err := m.Join(unbound); err == nil {
		t.Errorf("Join(socket without SO_REUSEPORT) = nil, want an error")
	}
	m.Close()
	if err := m.Join(unbound); !errors.Is(err, ErrClosed) {
		t.Errorf("Join after Close = %v, want ErrClosed", err)
	}
	if err := m.Leave(); !errors.Is(err, ErrClosed) {
		t.Errorf("Leave after Close = %v, want ErrClosed", err)
	}
}

// TestConnsShared checks that counts published through one mapping are seen
// through the others, and that the program sees them (least_conn steering
// above); ResetConns clears a slot.
func TestConnsShared(t *testing.T) {
	s := newTestSelector(t, ModeLeastConn, 3, nil)
	var ms []*Member
	for slot := range 3 {
		m, err := OpenMember(s.Files(), slot)
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		ms = append(ms, m)
	}
	second, err := OpenMember(s.Files(), 1)
	if err != nil {
		t.Fatal(err)
	}
	defer second.Close()
	ms[0].AddConns(5)
	ms[1].AddConns(3)
	second.AddConns(4)
	ms[2].AddConns(1)
	ms[2].AddConns(-1)
	got := []int64{s.Conns(0), s.Conns(1), s.Conns(2), s.Conns(3), second.Conns()}
	want := []int64{5, 7, 0, 0, 7}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("counts (-want +got):\n%s", diff)
	}
	if err := s.ResetConns(1); err != nil {
		t.Fatal(err)
	}
	if got := ms[1].Conns(); got != 0 {
		t.Errorf("after ResetConns(1): member sees %d", got)
	}
}

func ExampleNewSelector() {
	// Supervisor: one selector for 2 workers on CPUs 0 and 1.
	s, err := NewSelector(ModeHash, 2, []int{0, 1})
	if err != nil {
		fmt.Println("fall back:", err)
		return
	}
	defer s.Close()
	// cmd.ExtraFiles = append(cmd.ExtraFiles, s.Files()...) for each worker.
	// Worker i: m, _ := OpenMember(InheritedFiles(3), i); m.Join(listenFD).
	fmt.Println(len(s.Files()), s.Mode())
}

// TestLeaveKeepsSuccessor checks that a draining worker leaving its slot does
// not empty it when the worker that replaced it already joined there.
func TestLeaveKeepsSuccessor(t *testing.T) {
	s := newTestSelector(t, ModeHash, 1, nil)
	ls := listenGroup(t, 2)
	old, err := OpenMember(s.Files(), 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { old.Close() })
	next, err := OpenMember(s.Files(), 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { next.Close() })
	if err := old.Join(ls[0].fd); err != nil {
		t.Fatal(err)
	}
	if got := steer(t, ls, -1, 50); got[0] != 50 {
		t.Fatalf("before the restart: %v, want all on the old socket", got)
	}
	if err := next.Join(ls[1].fd); err != nil {
		t.Fatal(err)
	}
	if err := old.Leave(); err != nil {
		t.Fatal(err)
	}
	if got := steer(t, ls, -1, 50); got[1] != 50 {
		t.Fatalf("after the old worker left: %v, want all on its successor", got)
	}
	if err := next.Leave(); err != nil {
		t.Fatal(err)
	}
	var cur uint64
	if err := s.sockarray.Lookup(uint32(0), &cur); !errors.Is(err, ebpf.ErrKeyNotExist) {
		t.Fatalf("slot after the successor left: %v %v, want empty", cur, err)
	}
}

// TestJoinLeaveConcurrent: a worker told to drain while it boots calls
// Leave on its control goroutine while its event loop calls Join. Whichever
// comes first, the slot ends empty (run with -race for the data race).
func TestJoinLeaveConcurrent(t *testing.T) {
	s := newTestSelector(t, ModeHash, 2, nil)
	ls := listenGroup(t, 2)
	joinAll(t, s, ls[:1])
	for i := range 50 {
		m, err := OpenMember(s.Files(), 1)
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- m.Leave() }()
		if err := m.Join(ls[1].fd); err != nil {
			t.Fatalf("round %d: Join: %v", i, err)
		}
		if err := <-done; err != nil {
			t.Fatalf("round %d: Leave: %v", i, err)
		}
		if counts := steer(t, ls, -1, 20); counts[1] != 0 {
			t.Fatalf("round %d: slot 1 still gets connections after Leave: %v", i, counts)
		}
		m.Close()
	}
}

// TestRemoveRejoin: the supervisor takes a silent worker's socket out of
// its slot (Selector.Remove) and the worker puts it back when it speaks
// again (Member.Rejoin). While out, the slot's share goes to the other
// slots; what waited in the removed socket's queue stays there. Rejoin
// leaves a successor's socket alone and does nothing after Leave.
func TestRemoveRejoin(t *testing.T) {
	s := newTestSelector(t, ModeHash, 2, nil)
	ls := listenGroup(t, 3)
	ms := joinAll(t, s, ls[:2])
	const n = 100
	if got := steer(t, ls[:2], -1, n); got[0] == 0 || got[1] == 0 {
		t.Fatalf("both joined: %v, want both slots used", got)
	}
	// A connection waits in slot 1's queue, dialed until one lands there.
	var queued []int
	t.Cleanup(func() {
		for _, fd := range queued {
			closeReset(fd)
		}
	})
	for i := 0; queueLen(t, ls[1].fd) == 0; i++ {
		if i == 100 {
			t.Fatal("no connection reached slot 1 in 100 dials")
		}
		fd, err := dial(ls[0].port)
		if err != nil {
			t.Fatal(err)
		}
		queued = append(queued, fd)
	}
	for queueLen(t, ls[0].fd) > 0 {
		afd, _, err := unix.Accept4(ls[0].fd, unix.SOCK_CLOEXEC)
		if err != nil {
			t.Fatal(err)
		}
		unix.Close(afd)
	}

	if err := s.Remove(1); err != nil {
		t.Fatal(err)
	}
	if err := s.Remove(1); err != nil {
		t.Fatalf("removing an empty slot: %v", err)
	}
	if got := steer(t, ls[:1], -1, n); got[0] != n {
		t.Fatalf("slot 1 removed: %v, want all %d on slot 0", got, n)
	}
	if q := queueLen(t, ls[1].fd); q == 0 {
		t.Errorf("the removed socket's queue was emptied")
	}
	for queueLen(t, ls[1].fd) > 0 {
		afd, _, err := unix.Accept4(ls[1].fd, unix.SOCK_CLOEXEC)
		if err != nil {
			t.Fatal(err)
		}
		unix.Close(afd)
	}

	if ok, err := ms[1].Rejoin(ls[1].fd); !ok || err != nil {
		t.Fatalf("Rejoin: %v %v, want the socket back", ok, err)
	}
	if got := steer(t, ls[:2], -1, n); got[0] == 0 || got[1] == 0 {
		t.Fatalf("after Rejoin: %v, want both slots used", got)
	}
	if ok, err := ms[1].Rejoin(ls[1].fd); ok || err != nil {
		t.Fatalf("Rejoin of a slot that holds the socket: %v %v, want false, nil", ok, err)
	}

	// A successor holds slot 1: Rejoin leaves it there.
	next, err := OpenMember(s.Files(), 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { next.Close() })
	if err := next.Join(ls[2].fd); err != nil {
		t.Fatal(err)
	}
	if err := s.Remove(1); err != nil {
		t.Fatal(err)
	}
	if err := next.Join(ls[2].fd); err != nil {
		t.Fatal(err)
	}
	if ok, err := ms[1].Rejoin(ls[1].fd); ok || err != nil {
		t.Fatalf("Rejoin over a successor: %v %v, want false, nil", ok, err)
	}
	if got := steer(t, []*listener{ls[0], ls[2]}, -1, n); got[0] == 0 || got[1] == 0 {
		t.Fatalf("with the successor in slot 1: %v, want both used", got)
	}

	// After Leave, no Rejoin.
	if err := next.Leave(); err != nil {
		t.Fatal(err)
	}
	if ok, err := next.Rejoin(ls[2].fd); ok || err != nil {
		t.Fatalf("Rejoin after Leave: %v %v, want false, nil", ok, err)
	}
	if got := steer(t, ls[:1], -1, n); got[0] != n {
		t.Fatalf("slot 1 left: %v, want all on slot 0", got)
	}
}

// TestNoLiveRefuses: with no live slot (a stopping gateway) a new
// connection is refused at once, as if the listeners were closed, not
// queued to a listener about to close (and reset then); no queue grows,
// and once a slot is live again connections are accepted.
func TestNoLiveRefuses(t *testing.T) {
	for _, migrate := range []bool{true, false} {
		t.Run(fmt.Sprintf("migrate=%v", migrate), func(t *testing.T) {
			requireEBPF(t)
			s, err := newSelector(ModeHash, 2, nil, migrate)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			ls := listenGroup(t, 2)
			joinAll(t, s, ls)
			if err := s.SetLive(0); err != nil {
				t.Fatal(err)
			}
			for i := range 20 {
				if fd, err := dial(ls[0].port); !errors.Is(err, unix.ECONNREFUSED) {
					if err == nil {
						closeReset(fd)
					}
					t.Fatalf("connection %d with no live slot: %v, want ECONNREFUSED", i, err)
				}
			}
			for i, l := range ls {
				if q := queueLen(t, l.fd); q != 0 {
					t.Fatalf("listener %d queue = %d with no live slot, want 0", i, q)
				}
			}
			if err := s.SetLive(2); err != nil {
				t.Fatal(err)
			}
			fd, err := dial(ls[0].port)
			if err != nil {
				t.Fatalf("with live slots again: %v", err)
			}
			closeReset(fd)
		})
	}
}

// TestAdoptSelector: a selector taken over from another holder's files (a
// new supervisor, from a worker) after the creator closed its own is the
// same objects: same slots, counts, migration, and its SetLive and Remove
// steer the members the first one joined.
func TestAdoptSelector(t *testing.T) {
	orig := newTestSelector(t, ModeHash, 2, nil)
	ls := listenGroup(t, 2)
	ms := joinAll(t, orig, ls)
	ms[1].AddConns(3)
	// What a worker holds: its own duplicates of the files.
	var held []*os.File
	for i, f := range orig.Files() {
		fd, err := dupFile(f)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, os.NewFile(uintptr(fd), FileName(i)))
	}
	migrates := orig.Migrates()
	if err := orig.Close(); err != nil {
		t.Fatal(err)
	}
	s, err := AdoptSelector(held, ModeHash)
	for _, f := range held {
		f.Close()
	}
	if err != nil {
		t.Fatalf("AdoptSelector: %v", err)
	}
	defer s.Close()
	if s.Slots() != 2 || s.Migrates() != migrates || s.Mode() != ModeHash || len(s.Files()) != NumFiles {
		t.Errorf("adopted: %d slots, migrates %v (want %v), mode %v, %d files", s.Slots(), s.Migrates(), migrates, s.Mode(), len(s.Files()))
	}
	if got := s.Conns(1); got != 3 {
		t.Errorf("slot 1's count through the adopted selector: %d, want 3", got)
	}
	if counts := steer(t, ls, -1, 100); counts[0] == 0 || counts[1] == 0 {
		t.Errorf("after the takeover: counts %v, want both slots used", counts)
	}
	if err := s.SetLive(1); err != nil {
		t.Fatal(err)
	}
	if counts := steer(t, ls, -1, 100); counts[1] != 0 {
		t.Errorf("one live slot set through the adopted selector: counts %v, want slot 0 only", counts)
	}
	if err := s.SetLive(2); err != nil {
		t.Fatal(err)
	}
	if err := s.Remove(0); err != nil {
		t.Fatal(err)
	}
	if counts := steer(t, ls, -1, 100); counts[0] != 0 {
		t.Errorf("slot 0 removed through the adopted selector: counts %v, want slot 1 only", counts)
	}
	// A member can open the adopted selector's files, as a worker the new
	// supervisor starts does.
	m, err := OpenMember(s.Files(), 0)
	if err != nil {
		t.Fatalf("OpenMember on the adopted files: %v", err)
	}
	m.Close()

	if _, err := AdoptSelector(s.Files()[:2], ModeHash); !errors.Is(err, ErrBadFiles) {
		t.Errorf("AdoptSelector of 2 files = %v, want ErrBadFiles", err)
	}
	swapped := append([]*os.File{s.Files()[FileLoads], s.Files()[FileProgram], s.Files()[FileSockArray]}, s.Files()[3:]...)
	if _, err := AdoptSelector(swapped, ModeHash); !errors.Is(err, ErrBadFiles) {
		t.Errorf("AdoptSelector of misordered files = %v, want ErrBadFiles", err)
	}
}
