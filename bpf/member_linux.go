package bpf

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"
)

// Member is a worker's handle on the selector: it puts the worker's listening
// socket into its slot and publishes the worker's active-connection count. It
// works from inherited descriptors and needs no capability on kernels since
// 5.19 (before, with kernel.unprivileged_bpf_disabled set, its bpf() calls
// need CAP_BPF).
//
// AddConns is safe for concurrent use and allocation-free; Join, Rejoin and
// Leave are safe for concurrent use (a worker told to drain while it boots
// leaves before it joins: the Join that comes after a Leave does nothing);
// Close must not run concurrently with the others.
type Member struct {
	slot      int
	sockarray *ebpf.Map
	prog      *ebpf.Program
	loads     *ebpf.Map
	mem       []byte
	conns     *atomic.Int64
	closed    bool

	mu     sync.Mutex
	left   bool   // Leave ran: the member never takes its slot again
	cookie uint64 // SO_COOKIE of the socket Join put in the slot
}

// OpenMember opens the selector objects in files, ordered as Selector.Files
// (only the first three are used), for the worker in slot. It duplicates the
// descriptors it keeps, so the caller may close files afterwards.
func OpenMember(files []*os.File, slot int) (_ *Member, err error) {
	if len(files) <= FileLoads {
		return nil, fmt.Errorf("%w: %d files, want at least %d", ErrBadFiles, len(files), FileLoads+1)
	}
	m := &Member{slot: slot}
	defer func() {
		if err != nil {
			m.Close()
		}
	}()
	if m.sockarray, err = mapFromFile(files[FileSockArray]); err != nil {
		return nil, err
	}
	if m.sockarray.Type() != ebpf.ReusePortSockArray {
		return nil, fmt.Errorf("%w: file %d is a %s map, want a reuseport sockarray", ErrBadFiles, FileSockArray, m.sockarray.Type())
	}
	if slot < 0 || slot >= int(m.sockarray.MaxEntries()) {
		return nil, fmt.Errorf("%w: %d of %d", ErrBadSlot, slot, m.sockarray.MaxEntries())
	}
	fd, err := dupFile(files[FileProgram])
	if err != nil {
		return nil, err
	}
	if m.prog, err = ebpf.NewProgramFromFD(fd); err != nil {
		return nil, fmt.Errorf("%w: file %d: %w", ErrBadFiles, FileProgram, err)
	}
	if m.prog.Type() != ebpf.SkReuseport {
		return nil, fmt.Errorf("%w: file %d is a %s program, want sk_reuseport", ErrBadFiles, FileProgram, m.prog.Type())
	}
	if m.loads, err = mapFromFile(files[FileLoads]); err != nil {
		return nil, err
	}
	if m.loads.Type() != ebpf.Array || m.loads.ValueSize() != loadStride ||
		m.loads.Flags()&unix.BPF_F_MMAPABLE == 0 || int(m.loads.MaxEntries()) <= slot {
		return nil, fmt.Errorf("%w: file %d is not the load array", ErrBadFiles, FileLoads)
	}
	if m.mem, err = mmapLoads(m.loads); err != nil {
		return nil, err
	}
	m.conns = loadCounter(m.mem, slot)
	return m, nil
}

func dupFile(f *os.File) (int, error) {
	if f == nil {
		return -1, fmt.Errorf("%w: nil file", ErrBadFiles)
	}
	sc, err := f.SyscallConn()
	if err != nil {
		return -1, fmt.Errorf("%w: %s: %w", ErrBadFiles, f.Name(), err)
	}
	fd, dupErr := -1, error(nil)
	if err := sc.Control(func(raw uintptr) {
		fd, dupErr = unix.FcntlInt(raw, unix.F_DUPFD_CLOEXEC, 0)
	}); err != nil {
		return -1, fmt.Errorf("%w: %s: %w", ErrBadFiles, f.Name(), err)
	}
	if dupErr != nil {
		return -1, fmt.Errorf("%w: dup %s: %w", ErrBadFiles, f.Name(), dupErr)
	}
	return fd, nil
}

func mapFromFile(f *os.File) (*ebpf.Map, error) {
	fd, err := dupFile(f)
	if err != nil {
		return nil, err
	}
	m, err := ebpf.NewMapFromFD(fd)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrBadFiles, f.Name(), err)
	}
	return m, nil
}

// Slot returns the member's slot.
func (m *Member) Slot() int { return m.slot }

// Join puts listenFD, a bound and listening TCP socket with SO_REUSEPORT, into
// the member's slot and attaches the program to its reuseport group
// (SO_ATTACH_REUSEPORT_EBPF). Attaching again, from any member, is harmless:
// the group keeps one program. The sockarray holds the socket itself, so
// listenFD may be a duplicate that the caller closes afterwards; the kernel
// empties the slot when the socket closes.
func (m *Member) Join(listenFD int) error {
	if m.closed {
		return ErrClosed
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.left {
		return nil
	}
	if err := unix.SetsockoptInt(listenFD, unix.SOL_SOCKET, unix.SO_ATTACH_REUSEPORT_EBPF, m.prog.FD()); err != nil {
		return fmt.Errorf("bpf: attach program to listener: %w", err)
	}
	if err := m.sockarray.Update(uint32(m.slot), uint64(listenFD), ebpf.UpdateAny); err != nil {
		return fmt.Errorf("bpf: put listener in slot %d: %w", m.slot, err)
	}
	if c, err := unix.GetsockoptUint64(listenFD, unix.SOL_SOCKET, unix.SO_COOKIE); err == nil {
		m.cookie = c
	}
	return nil
}

// Rejoin puts listenFD, the socket of the member's Join (or a duplicate of
// it), back into the member's slot after someone else emptied it
// (Selector.Remove: the supervisor took a silent worker out). It leaves a
// slot that holds a socket alone (the member's own, or a successor's that
// joined meanwhile), and does nothing after Leave. It reports whether the
// socket went back.
func (m *Member) Rejoin(listenFD int) (bool, error) {
	if m.closed {
		return false, ErrClosed
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.left {
		return false, nil
	}
	err := m.sockarray.Update(uint32(m.slot), uint64(listenFD), ebpf.UpdateNoExist)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, ebpf.ErrKeyExist):
		return false, nil
	}
	return false, fmt.Errorf("bpf: put listener back in slot %d: %w", m.slot, err)
}

// Leave empties the member's slot, so that the program steers new connections
// to the other live slots while this worker drains its accept queue; its
// socket still gets connections only when no slot can be selected. Leaving an
// empty slot is not an error.
func (m *Member) Leave() error {
	if m.closed {
		return ErrClosed
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.left = true
	// A new worker may already hold this slot (a restart, or a quick
	// resize down and up again): a lookup gives the slot's socket cookie
	// (kernel ≥ 5.1 for an 8-byte value), and the slot is left alone when
	// it is not this member's socket. The window between lookup and delete
	// remains, but shrinks from a drain's length to a syscall's.
	if m.cookie != 0 {
		var cur uint64
		if err := m.sockarray.Lookup(uint32(m.slot), &cur); err != nil {
			if errors.Is(err, ebpf.ErrKeyNotExist) {
				return nil
			}
		} else if cur != m.cookie {
			return nil
		}
	}
	if err := m.sockarray.Delete(uint32(m.slot)); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
		return fmt.Errorf("bpf: empty slot %d: %w", m.slot, err)
	}
	return nil
}

// AddConns adds delta to the worker's published active-connection count, which
// ModeLeastConn reads: one atomic add on shared memory, no system call, no
// allocation. Call it with +1 when a connection opens and -1 when it closes.
func (m *Member) AddConns(delta int64) {
	m.conns.Add(delta)
}

// Conns returns the worker's published count.
func (m *Member) Conns() int64 {
	return m.conns.Load()
}

// Close releases the member's descriptors and mapping; the slot keeps the
// socket until the socket closes or Leave runs. Close is idempotent.
func (m *Member) Close() error {
	if m.closed {
		return nil
	}
	m.closed = true
	var errs []error
	if m.mem != nil {
		m.conns = nil
		errs = append(errs, unix.Munmap(m.mem))
		m.mem = nil
	}
	if m.prog != nil {
		errs = append(errs, m.prog.Close())
	}
	for _, mp := range []*ebpf.Map{m.sockarray, m.loads} {
		if mp != nil {
			errs = append(errs, mp.Close())
		}
	}
	return errors.Join(errs...)
}
