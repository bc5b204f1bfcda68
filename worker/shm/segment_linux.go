package shm

import (
	"fmt"
	"math/rand/v2"
	"os"

	"golang.org/x/sys/unix"
)

// Segment is the supervisor's side of the table: the memfd it passes to
// every worker (File), and its own mapping of it.
type Segment struct {
	*Table
	file *os.File
}

// Create makes a segment of slots counters (rounded up to a power of two;
// 0 means DefaultSlots), sealed so that its size never changes, and maps
// it.
func Create(slots int) (*Segment, error) {
	if slots == 0 {
		slots = DefaultSlots
	}
	if slots < 1 || slots > MaxSlots {
		return nil, fmt.Errorf("%w: %d (1 to %d)", ErrSize, slots, MaxSlots)
	}
	n := 1
	for n < slots {
		n <<= 1
	}
	size := headerSize + n*SlotBytes
	f, err := sealedMemfd("coregate-counters", size)
	if err != nil {
		return nil, err
	}
	t, err := mapTable(int(f.Fd()), size)
	if err != nil {
		_ = f.Close()
		return nil, err
	}
	h := headerOf(t.mem)
	h.slotSize.Store(SlotBytes)
	h.slots.Store(uint64(n))
	h.seed.Store(rand.Uint64())
	h.version.Store(version)
	h.magic.Store(magic)
	if err := t.init(); err != nil {
		_ = t.close()
		_ = f.Close()
		return nil, err
	}
	return &Segment{Table: t, file: f}, nil
}

// File is the segment's memfd, for a child process (exec.Cmd.ExtraFiles);
// it stays open until Close.
func (s *Segment) File() *os.File { return s.file }

// Close unmaps the segment and closes its file. No counter of it may be
// used afterwards.
func (s *Segment) Close() error {
	err := s.Table.close()
	if cerr := s.file.Close(); err == nil {
		err = cerr
	}
	return err
}

// Open maps the segment of an inherited file (a worker's side). The file
// may be closed afterwards: the mapping stays for the process's life, or
// until Table.Close.
func Open(f *os.File) (*Table, error) {
	size, err := fileSize(f, headerSize+SlotBytes)
	if err != nil {
		return nil, err
	}
	t, err := mapTable(int(f.Fd()), size)
	if err != nil {
		return nil, err
	}
	if err := t.init(); err != nil {
		_ = t.close()
		return nil, err
	}
	return t, nil
}

// Adopt maps the segment of f, made by Create in another process (a
// supervisor before this one, whose worker passed it on), as this
// process's Segment: f becomes the Segment's, closed by Close.
func Adopt(f *os.File) (*Segment, error) {
	t, err := Open(f)
	if err != nil {
		return nil, err
	}
	return &Segment{Table: t, file: f}, nil
}

func mapTable(fd, size int) (*Table, error) {
	mem, unmap, err := mapShared(fd, size)
	if err != nil {
		return nil, err
	}
	return &Table{mem: mem, close: unmap}, nil
}

// sealedMemfd makes a memfd of size bytes, sealed so that its size never
// changes (a worker may trust it), for a segment the supervisor passes on.
func sealedMemfd(name string, size int) (*os.File, error) {
	fd, err := unix.MemfdCreate(name, unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return nil, fmt.Errorf("shm: memfd_create: %w", err)
	}
	f := os.NewFile(uintptr(fd), name)
	if err := unix.Ftruncate(fd, int64(size)); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("shm: ftruncate: %w", err)
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_SHRINK|unix.F_SEAL_GROW|unix.F_SEAL_SEAL); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("shm: seal: %w", err)
	}
	return f, nil
}

// fileSize is the size of an inherited segment's file, which must be at
// least min bytes.
func fileSize(f *os.File, min int) (int, error) {
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return 0, fmt.Errorf("shm: fstat: %w", err)
	}
	if st.Size < int64(min) {
		return 0, fmt.Errorf("%w: %d bytes", ErrLayout, st.Size)
	}
	return int(st.Size), nil
}

// mapShared maps size bytes of fd shared, and returns how to unmap them.
func mapShared(fd, size int) ([]byte, func() error, error) {
	mem, err := unix.Mmap(fd, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, nil, fmt.Errorf("shm: mmap: %w", err)
	}
	return mem, func() error { return unix.Munmap(mem) }, nil
}

// Close unmaps the table. No counter of it may be used afterwards.
func (t *Table) Close() error { return t.close() }

// osYield gives up the CPU to another thread or process (sched_yield).
func osYield() { _, _, _ = unix.Syscall(unix.SYS_SCHED_YIELD, 0, 0, 0) }

// CreateMetrics makes the metrics segment of regions regions (one per
// worker slot) of series series each (0 means DefaultSeries), sealed so
// that its size never changes, and maps it. Pages are taken as series are
// registered: a region costs the memory its series use.
func CreateMetrics(regions, series int) (*MetricsSegment, error) {
	if series == 0 {
		series = DefaultSeries
	}
	if series < 1 || series > MaxSeries || regions < 1 || regions > 1<<16 {
		return nil, fmt.Errorf("%w: %d regions of %d series", ErrSize, regions, series)
	}
	_, arena, size := metricsSize(regions, series)
	f, err := sealedMemfd("coregate-metrics", size)
	if err != nil {
		return nil, err
	}
	m, err := mapMetrics(int(f.Fd()), size)
	if err != nil {
		_ = f.Close()
		return nil, err
	}
	h := metricsHeaderOf(m.mem)
	h.regions.Store(uint64(regions))
	h.series.Store(uint64(series))
	h.arena.Store(uint64(arena))
	h.version.Store(metricsVersion)
	h.magic.Store(metricsMagic)
	if err := m.initMetrics(); err != nil {
		_ = m.close()
		_ = f.Close()
		return nil, err
	}
	return &MetricsSegment{MetricsMap: m, file: f}, nil
}

// File is the segment's memfd, for a child process (exec.Cmd.ExtraFiles);
// it stays open until Close.
func (s *MetricsSegment) File() *os.File { return s.file }

// Close unmaps the segment and closes its file.
func (s *MetricsSegment) Close() error {
	err := s.MetricsMap.Close()
	if cerr := s.file.Close(); err == nil {
		err = cerr
	}
	return err
}

// OpenMetrics maps the metrics segment of an inherited file (a worker's
// side). The file may be closed afterwards: the mapping stays for the
// process's life, or until Close.
func OpenMetrics(f *os.File) (*MetricsMap, error) {
	size, err := fileSize(f, regionHeadSize)
	if err != nil {
		return nil, err
	}
	m, err := mapMetrics(int(f.Fd()), size)
	if err != nil {
		return nil, err
	}
	if err := m.initMetrics(); err != nil {
		_ = m.close()
		return nil, err
	}
	return m, nil
}

// AdoptMetrics maps the metrics segment of f, made by CreateMetrics in
// another process (see Adopt), as this process's MetricsSegment: f becomes
// the segment's, closed by Close.
func AdoptMetrics(f *os.File) (*MetricsSegment, error) {
	m, err := OpenMetrics(f)
	if err != nil {
		return nil, err
	}
	return &MetricsSegment{MetricsMap: m, file: f}, nil
}

func mapMetrics(fd, size int) (*MetricsMap, error) {
	mem, unmap, err := mapShared(fd, size)
	if err != nil {
		return nil, err
	}
	return &MetricsMap{mem: mem, close: unmap}, nil
}
