package bpf

import (
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"unsafe"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"
)

// Selector owns the eBPF objects of the socket selector: the
// REUSEPORT_SOCKARRAY indexed by worker slot, the sk_reuseport program, the
// per-slot active-connection counts and the live-slot and cpu maps. The
// supervisor creates it once (loading the program needs CAP_BPF) and hands
// Files to each worker, which opens them with OpenMember.
//
// The objects live as long as any process holds one of their file
// descriptors, so workers keep working while the supervisor restarts others.
//
// SetLive, SetCPUs, Conns, ResetConns and Remove are safe for concurrent use; Close
// must not run concurrently with them.
type Selector struct {
	mode      Mode
	slots     int
	migrate   bool
	ncpu      int
	sockarray *ebpf.Map
	config    *ebpf.Map
	cpumap    *ebpf.Map
	loads     *ebpf.Map
	prog      *ebpf.Program
	files     []*os.File
	mem       []byte
	closed    bool
}

// NewSelector creates the maps and loads the program for mode with room for
// slots workers, all of them live. cpus[i] is the CPU that the worker in slot i
// runs on, used by ModeCPU to map the SYN's CPU to a slot (a negative entry
// maps no CPU to the slot; when two slots list the same CPU the first wins);
// nil maps CPU i to slot i. The program is loaded
// with the SELECT_OR_MIGRATE attach type when the kernel has it (5.14) and with
// SELECT otherwise (see Migrates).
//
// The error wraps ErrNotSupported when this kernel or process cannot run the
// eBPF selector (Probe then reports a fallback).
func NewSelector(mode Mode, slots int, cpus []int) (*Selector, error) {
	return newSelector(mode, slots, cpus, true)
}

func newSelector(mode Mode, slots int, cpus []int, migrate bool) (_ *Selector, err error) {
	if !mode.valid() {
		return nil, fmt.Errorf("%w: %d", ErrBadMode, mode)
	}
	if slots < 1 || slots > MaxSlots {
		return nil, fmt.Errorf("%w: %d slots (want 1..%d)", ErrBadSlot, slots, MaxSlots)
	}
	ncpu, err := ebpf.PossibleCPU()
	if err != nil {
		return nil, fmt.Errorf("bpf: possible cpus: %w", err)
	}
	for _, c := range cpus {
		ncpu = max(ncpu, c+1)
	}
	if err := probeEBPFFeatures(); err != nil {
		return nil, err
	}
	s := &Selector{mode: mode, slots: slots, ncpu: ncpu}
	defer func() {
		if err != nil {
			s.Close()
		}
	}()
	if s.sockarray, err = ebpf.NewMap(&ebpf.MapSpec{
		Name: "cg_socks", Type: ebpf.ReusePortSockArray,
		KeySize: 4, ValueSize: 8, MaxEntries: uint32(slots),
	}); err != nil {
		return nil, unsupported("reuseport sockarray", err)
	}
	if s.config, err = ebpf.NewMap(&ebpf.MapSpec{
		Name: "cg_config", Type: ebpf.Array,
		KeySize: 4, ValueSize: 4, MaxEntries: 1,
	}); err != nil {
		return nil, unsupported("config array", err)
	}
	if s.cpumap, err = ebpf.NewMap(&ebpf.MapSpec{
		Name: "cg_cpus", Type: ebpf.Array,
		KeySize: 4, ValueSize: 4, MaxEntries: uint32(ncpu),
	}); err != nil {
		return nil, unsupported("cpu array", err)
	}
	if s.loads, err = ebpf.NewMap(&ebpf.MapSpec{
		Name: "cg_loads", Type: ebpf.Array,
		KeySize: 4, ValueSize: loadStride, MaxEntries: uint32(slots),
		Flags: unix.BPF_F_MMAPABLE,
	}); err != nil {
		return nil, unsupported("mmapable load array", err)
	}
	if s.mem, err = mmapLoads(s.loads); err != nil {
		return nil, err
	}
	if err = s.SetCPUs(cpus); err != nil {
		return nil, err
	}
	if err = s.SetLive(slots); err != nil {
		return nil, err
	}
	fds := objectFDs{
		sockarray: s.sockarray.FD(), config: s.config.FD(),
		cpumap: s.cpumap.FD(), loads: s.loads.FD(),
	}
	spec := &ebpf.ProgramSpec{
		Name: progMigrate, Type: ebpf.SkReuseport, License: "GPL",
		AttachType:   ebpf.AttachSkReuseportSelectOrMigrate,
		Instructions: programInsns(mode, slots, fds, migrate),
	}
	if !migrate {
		spec.Name = progSelect
		spec.AttachType = ebpf.AttachSkReuseportSelect
	}
	s.prog, err = ebpf.NewProgram(spec)
	s.migrate = err == nil && migrate
	if err != nil && migrate {
		// Before 5.14 the kernel rejects the SELECT_OR_MIGRATE attach type
		// (and the context's migrating_sk).
		spec.Name = progSelect
		spec.AttachType = ebpf.AttachSkReuseportSelect
		spec.Instructions = programInsns(mode, slots, fds, false)
		var err2 error
		if s.prog, err2 = ebpf.NewProgram(spec); err2 == nil {
			err = nil
		}
	}
	if err != nil {
		return nil, unsupported("load sk_reuseport program", err)
	}
	for i, fd := range []int{s.sockarray.FD(), s.prog.FD(), s.loads.FD(), s.config.FD(), s.cpumap.FD()} {
		d, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 0)
		if err != nil {
			return nil, fmt.Errorf("bpf: dup %s: %w", fileNames[i], err)
		}
		s.files = append(s.files, os.NewFile(uintptr(d), fileNames[i]))
	}
	return s, nil
}

// The program's names: the kernel keeps no attach type a later process
// could read back, so the name says which one it was loaded with
// (AdoptSelector).
const (
	progMigrate = "cg_select"
	progSelect  = "cg_select_only"
)

// AdoptSelector makes a Selector of objects another process created with
// NewSelector, from files ordered as Selector.Files: the descriptors of a
// worker that a new supervisor takes over, after its own was killed. mode
// is the mode the program was built for (the program cannot tell it). The
// Selector duplicates the descriptors it keeps: the caller may close
// files.
func AdoptSelector(files []*os.File, mode Mode) (_ *Selector, err error) {
	if len(files) != NumFiles {
		return nil, fmt.Errorf("%w: %d files, want %d", ErrBadFiles, len(files), NumFiles)
	}
	if !mode.valid() {
		return nil, fmt.Errorf("%w: %d", ErrBadMode, mode)
	}
	s := &Selector{mode: mode}
	defer func() {
		if err != nil {
			s.Close()
		}
	}()
	maps := []struct {
		m   **ebpf.Map
		typ ebpf.MapType
	}{
		FileSockArray: {&s.sockarray, ebpf.ReusePortSockArray},
		FileLoads:     {&s.loads, ebpf.Array},
		FileConfig:    {&s.config, ebpf.Array},
		FileCPUMap:    {&s.cpumap, ebpf.Array},
	}
	for i, m := range maps {
		if m.m == nil {
			continue
		}
		if *m.m, err = mapFromFile(files[i]); err != nil {
			return nil, err
		}
		if (*m.m).Type() != m.typ {
			return nil, fmt.Errorf("%w: file %d is a %s map, want %s", ErrBadFiles, i, (*m.m).Type(), m.typ)
		}
	}
	s.slots, s.ncpu = int(s.sockarray.MaxEntries()), int(s.cpumap.MaxEntries())
	if s.loads.ValueSize() != loadStride || s.loads.Flags()&unix.BPF_F_MMAPABLE == 0 ||
		int(s.loads.MaxEntries()) != s.slots || s.config.MaxEntries() != 1 {
		return nil, fmt.Errorf("%w: not the selector's maps", ErrBadFiles)
	}
	fd, err := dupFile(files[FileProgram])
	if err != nil {
		return nil, err
	}
	if s.prog, err = ebpf.NewProgramFromFD(fd); err != nil {
		return nil, fmt.Errorf("%w: file %d: %w", ErrBadFiles, FileProgram, err)
	}
	info, err := s.prog.Info()
	if err != nil {
		return nil, fmt.Errorf("bpf: program info: %w", err)
	}
	if s.prog.Type() != ebpf.SkReuseport || (info.Name != progMigrate && info.Name != progSelect) {
		return nil, fmt.Errorf("%w: file %d is not the selector's program", ErrBadFiles, FileProgram)
	}
	s.migrate = info.Name == progMigrate
	if s.mem, err = mmapLoads(s.loads); err != nil {
		return nil, err
	}
	for i, f := range files {
		d, err := dupFile(f)
		if err != nil {
			return nil, err
		}
		s.files = append(s.files, os.NewFile(uintptr(d), fileNames[i]))
	}
	return s, nil
}

// Mode returns the mode the program was built for.
func (s *Selector) Mode() Mode { return s.mode }

// Slots returns the slot capacity.
func (s *Selector) Slots() int { return s.slots }

// Migrates reports whether the program carries the SELECT_OR_MIGRATE attach
// type, so that a closing listener's queued and half-open connections move to
// a live worker whatever net.ipv4.tcp_migrate_req says.
func (s *Selector) Migrates() bool { return s.migrate }

// Files returns the objects to hand to worker processes, in the order of the
// File* constants (sockarray, program, loads, config, cpu map): pass them as
// exec.Cmd.ExtraFiles (possibly after other files) and open them in the worker
// with OpenMember(InheritedFiles(first), slot). The files belong to the
// Selector and stay valid until Close; do not close them. The slice is shared:
// do not modify it.
func (s *Selector) Files() []*os.File { return s.files }

// SetLive sets the number of slots in use: the program picks among slots
// 0..n-1 and ignores the others. n == 0 is a stopping gateway: new
// connections are refused (RST), as if the listeners were closed, while
// the queue of a closing listener still migrates to another one if any
// remains.
func (s *Selector) SetLive(n int) error {
	if s.closed {
		return ErrClosed
	}
	if n < 0 || n > s.slots {
		return fmt.Errorf("%w: %d live of %d", ErrBadSlot, n, s.slots)
	}
	if err := s.config.Put(uint32(0), uint32(n)); err != nil {
		return fmt.Errorf("bpf: set live slots: %w", err)
	}
	return nil
}

// SetCPUs replaces the cpu → slot mapping of ModeCPU: cpus[i] is the CPU of
// the worker in slot i (negative: none; the first slot wins when a CPU
// repeats; nil maps CPU i to slot i). A CPU that maps to no live slot falls
// back to the hash. Other modes keep the mapping but do not use it. It
// returns ErrBadCPU for a CPU beyond those the selector was created for.
func (s *Selector) SetCPUs(cpus []int) error {
	if s.closed {
		return ErrClosed
	}
	if len(cpus) > s.slots {
		return fmt.Errorf("%w: %d cpus for %d slots", ErrBadSlot, len(cpus), s.slots)
	}
	table := make([]uint32, s.ncpu)
	for i := range table {
		table[i] = noSlot
	}
	if cpus == nil {
		for i := range min(s.slots, s.ncpu) {
			table[i] = uint32(i)
		}
	}
	for slot, c := range cpus {
		if c < 0 {
			continue
		}
		if c >= s.ncpu {
			return fmt.Errorf("%w: %d (have %d)", ErrBadCPU, c, s.ncpu)
		}
		if table[c] == noSlot {
			table[c] = uint32(slot)
		}
	}
	for c, slot := range table {
		if err := s.cpumap.Put(uint32(c), slot); err != nil {
			return fmt.Errorf("bpf: set cpu %d: %w", c, err)
		}
	}
	return nil
}

// Conns returns the active-connection count that the worker in slot publishes
// (Member.AddConns). It reads shared memory and makes no system call.
func (s *Selector) Conns(slot int) int64 {
	if s.closed || slot < 0 || slot >= s.slots {
		return 0
	}
	return loadCounter(s.mem, slot).Load()
}

// ResetConns zeroes slot's count. Call it once the process that used the slot
// has exited, before a new worker takes the slot, so that ModeLeastConn does
// not avoid the newcomer for the dead worker's connections.
func (s *Selector) ResetConns(slot int) error {
	if s.closed {
		return ErrClosed
	}
	if slot < 0 || slot >= s.slots {
		return fmt.Errorf("%w: %d of %d", ErrBadSlot, slot, s.slots)
	}
	loadCounter(s.mem, slot).Store(0)
	return nil
}

// Remove empties slot, so that the program steers the connections it would
// have picked for slot to the next slots with a socket, as after a Leave.
// The socket itself stays open and keeps what its accept queue holds; the
// member puts it back with Member.Rejoin. Removing an empty slot is not an
// error.
func (s *Selector) Remove(slot int) error {
	if s.closed {
		return ErrClosed
	}
	if slot < 0 || slot >= s.slots {
		return fmt.Errorf("%w: %d of %d", ErrBadSlot, slot, s.slots)
	}
	if err := s.sockarray.Delete(uint32(slot)); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
		return fmt.Errorf("bpf: empty slot %d: %w", slot, err)
	}
	return nil
}

// Close releases the Selector's descriptors and mapping. Workers holding
// their own descriptors keep the objects alive. Close is idempotent.
func (s *Selector) Close() error {
	if s.closed {
		return nil
	}
	s.closed = true
	var errs []error
	for _, f := range s.files {
		errs = append(errs, f.Close())
	}
	if s.mem != nil {
		errs = append(errs, unix.Munmap(s.mem))
		s.mem = nil
	}
	if s.prog != nil {
		errs = append(errs, s.prog.Close())
	}
	for _, m := range []*ebpf.Map{s.sockarray, s.config, s.cpumap, s.loads} {
		if m != nil {
			errs = append(errs, m.Close())
		}
	}
	return errors.Join(errs...)
}

// mmapLoads maps the whole value area of the mmapable load array read-write.
func mmapLoads(m *ebpf.Map) ([]byte, error) {
	size := int(m.MaxEntries()) * loadStride
	page := os.Getpagesize()
	size = (size + page - 1) / page * page
	mem, err := unix.Mmap(m.FD(), 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("bpf: mmap load array: %w", err)
	}
	return mem, nil
}

// loadCounter returns the count of slot inside a mapped load array. The
// mapping is page-aligned and the stride is 64, so the counter is aligned.
func loadCounter(mem []byte, slot int) *atomic.Int64 {
	return (*atomic.Int64)(unsafe.Pointer(&mem[slot*loadStride]))
}

// unsupported wraps err with ErrNotSupported when it says the kernel lacks the
// feature or the process lacks the privilege.
func unsupported(what string, err error) error {
	if errors.Is(err, ebpf.ErrNotSupported) || errors.Is(err, unix.EPERM) ||
		errors.Is(err, unix.EACCES) || errors.Is(err, unix.ENOSYS) {
		return fmt.Errorf("%w: %s: %w", ErrNotSupported, what, err)
	}
	return fmt.Errorf("bpf: %s: %w", what, err)
}
