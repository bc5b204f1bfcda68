package shm

import (
	"encoding/binary"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
)

// The metrics segment: one region per worker slot, each written by the
// worker process of that slot (and, during a rolling restart, by the one
// it replaces), read by the supervisor at scrape time. The supervisor
// creates it (CreateMetrics) and keeps it for its whole life, so that what
// a worker counted survives the worker: a worker killed with SIGKILL loses
// nothing it had counted, and the process respawned in its slot continues
// from its region.
//
// A region is a header (the node's counters of the slot, the number of
// entries claimed, the arena words used, the series dropped), a directory
// of entries and an arena. An entry is a series: a value word and a meta
// word that says where its key (the metric's name and label values) lies
// in the arena, and that the key is written. A series is registered once
// (an entry and arena words claimed with atomic adds, the key written,
// the meta word stored last); from then on only its value changes, with
// atomic adds. Every word is read and written with atomic operations, so
// that processes and goroutines never race on plain memory.
//
// Two processes registering one key (a worker and its replacement) may
// claim two entries: a reader sums the entries of a key, so nothing is
// counted twice or lost.

// Metrics segment layout constants.
const (
	// DefaultSeries is the number of series of a region when none is
	// configured.
	DefaultSeries = 16384
	// MaxSeries bounds the series of a region.
	MaxSeries = 1 << 20
	// arenaPerSeries is the arena words per entry: 128 bytes of key on
	// average.
	arenaPerSeries = 16

	metricsMagic   = 0x636f_7265_6d65_7472 // "coremetr"
	metricsVersion = 1
	regionHeadSize = 128
	entryBytes     = 16
	metaReady      = 1 << 31
)

// metricsHeader opens the metrics segment.
type metricsHeader struct {
	magic   atomic.Uint64
	version atomic.Uint64
	regions atomic.Uint64
	series  atomic.Uint64
	arena   atomic.Uint64 // words per region
}

// NodeCounters are a worker slot's share of the node's counters (nginx's
// stub_status counters), in its region: every process of the slot adds to
// them, so that they survive the process.
type NodeCounters struct {
	Accepted atomic.Uint64 // client connections accepted
	Handled  atomic.Uint64 // of which served (not closed at once)
	Requests atomic.Uint64 // request heads read
}

// regionHeader opens a region (regionHeadSize bytes).
type regionHeader struct {
	next    atomic.Uint64 // entries claimed (may pass the directory's size)
	used    atomic.Uint64 // arena words claimed (may pass the arena's size)
	dropped atomic.Uint64 // series refused: directory or arena full
	node    NodeCounters
}

// entry is one series of a region's directory.
type entry struct {
	meta atomic.Uint64 // arena word offset<<32 | metaReady | key length
	val  atomic.Uint64
}

// MetricsSegment is the supervisor's side of the metrics segment: the
// memfd every worker inherits (File) and the supervisor's own mapping,
// which it reads at scrape time.
type MetricsSegment struct {
	*MetricsMap
	file *os.File
}

// MetricsMap is one process's mapping of the metrics segment. Its regions
// are safe for concurrent use by any number of goroutines and processes.
type MetricsMap struct {
	mem     []byte
	regions int
	series  int
	arena   int
	rsize   int
	close   func() error
}

func metricsSize(regions, series int) (rsize, arena, total int) {
	arena = series * arenaPerSeries
	rsize = regionHeadSize + series*entryBytes + arena*8
	return rsize, arena, regionHeadSize + regions*rsize
}

// Regions is the number of regions (worker slots) of the segment.
func (m *MetricsMap) Regions() int { return m.regions }

// Series is the number of series a region holds.
func (m *MetricsMap) Series() int { return m.series }

// Close unmaps the segment; nothing of it may be used afterwards.
func (m *MetricsMap) Close() error { return m.close() }

func (m *MetricsMap) initMetrics() error {
	h := metricsHeaderOf(m.mem)
	if h.magic.Load() != metricsMagic || h.version.Load() != metricsVersion {
		return ErrLayout
	}
	regions, series := h.regions.Load(), h.series.Load()
	if regions == 0 || series == 0 || series > MaxSeries || regions > 1<<16 {
		return ErrLayout
	}
	rsize, arena, total := metricsSize(int(regions), int(series))
	if uint64(arena) != h.arena.Load() || len(m.mem) < total {
		return ErrLayout
	}
	m.regions, m.series, m.arena, m.rsize = int(regions), int(series), arena, rsize
	return nil
}

// parts returns region i's header, directory and arena.
func (m *MetricsMap) parts(i int) (*regionHeader, []entry, []atomic.Uint64) {
	off := regionHeadSize + i*m.rsize
	return regionOf(m.mem, off), entriesOf(m.mem, off+regionHeadSize, m.series),
		wordsOf(m.mem, off+regionHeadSize+m.series*entryBytes, m.arena)
}

// Node returns region i's node counters; nil when there is no region i.
func (m *MetricsMap) Node(i int) *NodeCounters {
	if i < 0 || i >= m.regions {
		return nil
	}
	h, _, _ := m.parts(i)
	return &h.node
}

// Usage reports region i's series registered and series refused because
// it was full.
func (m *MetricsMap) Usage(i int) (series int, dropped uint64) {
	h, dir, _ := m.parts(i)
	n := min(int(h.next.Load()), len(dir))
	for j := range n {
		if dir[j].meta.Load()&metaReady != 0 {
			series++
		}
	}
	return series, h.dropped.Load()
}

// Each calls fn with every series of region i that is registered: its key
// (as AppendKey makes it, valid during the call only; buf is its backing,
// reused) and its value now. It reads the region without a lock; a series
// being registered meanwhile is seen on the next call.
func (m *MetricsMap) Each(i int, buf []byte, fn func(key []byte, v uint64)) []byte {
	h, dir, arena := m.parts(i)
	n := min(int(h.next.Load()), len(dir))
	for j := range n {
		meta := dir[j].meta.Load()
		if meta&metaReady == 0 {
			continue
		}
		buf = readKey(buf[:0], arena, meta)
		fn(buf, dir[j].val.Load())
	}
	return buf
}

func readKey(buf []byte, arena []atomic.Uint64, meta uint64) []byte {
	off, n := int(meta>>32), int(meta&(metaReady-1))
	var w [8]byte
	for k := 0; k < n; k += 8 {
		binary.LittleEndian.PutUint64(w[:], arena[off+k/8].Load())
		buf = append(buf, w[:min(8, n-k)]...)
	}
	return buf
}

// AppendKey appends the key of a series, its metric's name and label
// values, each as a uvarint length and its bytes.
func AppendKey(b []byte, name string, labels ...string) []byte {
	b = binary.AppendUvarint(b, uint64(len(name)))
	b = append(b, name...)
	for _, l := range labels {
		b = binary.AppendUvarint(b, uint64(len(l)))
		b = append(b, l...)
	}
	return b
}

// SplitKey is AppendKey undone: the name and the label values of a key;
// ok is false for a key AppendKey did not make.
func SplitKey(key []byte) (name string, labels []string, ok bool) {
	first := true
	for len(key) > 0 {
		n, k := binary.Uvarint(key)
		if k <= 0 || uint64(len(key)-k) < n {
			return "", nil, false
		}
		s := string(key[k : k+int(n)])
		key = key[k+int(n):]
		if first {
			name, first = s, false
		} else {
			labels = append(labels, s)
		}
	}
	return name, labels, !first
}

// Region is one worker slot's region as its worker writes it: it
// implements plugins.Metrics. Slot takes a mutex and may allocate (it is
// called when a series is first seen); the slots it returns are words of
// the segment, updated with atomic adds and no lock.
type Region struct {
	m   *MetricsMap
	idx int

	mu    sync.Mutex
	index map[string]*atomic.Uint64
	buf   []byte
}

// Region returns region i for its worker to write, with the series
// already registered in it (by the slot's earlier processes) indexed, so
// that a respawned worker continues its series.
func (m *MetricsMap) Region(i int) (*Region, error) {
	if i < 0 || i >= m.regions {
		return nil, fmt.Errorf("%w: region %d of %d", ErrSize, i, m.regions)
	}
	r := &Region{m: m, idx: i, index: map[string]*atomic.Uint64{}}
	h, dir, arena := m.parts(i)
	n := min(int(h.next.Load()), len(dir))
	for j := range n {
		meta := dir[j].meta.Load()
		if meta&metaReady == 0 {
			continue
		}
		r.buf = readKey(r.buf[:0], arena, meta)
		if _, ok := r.index[string(r.buf)]; !ok {
			r.index[string(r.buf)] = &dir[j].val
		}
	}
	return r, nil
}

// Node returns the region's node counters.
func (r *Region) Node() *NodeCounters { return r.m.Node(r.idx) }

// Slot implements plugins.Metrics: the value word of the series name and
// labels, registered in the region when new; nil when the region is full
// (the refusal is counted).
func (r *Region) Slot(name string, labels ...string) *atomic.Uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.buf = AppendKey(r.buf[:0], name, labels...)
	if s, ok := r.index[string(r.buf)]; ok {
		return s
	}
	h, dir, arena := r.m.parts(r.idx)
	if len(r.buf) >= metaReady || int(h.next.Load()) >= len(dir) {
		h.dropped.Add(1)
		return nil
	}
	j := int(h.next.Add(1) - 1)
	if j >= len(dir) {
		h.dropped.Add(1)
		return nil
	}
	words := uint64(len(r.buf)+7) / 8
	off := h.used.Add(words) - words
	if off+words > uint64(len(arena)) {
		// The entry stays unready: readers skip it.
		h.dropped.Add(1)
		return nil
	}
	var w [8]byte
	for k := 0; k < len(r.buf); k += 8 {
		clear(w[:])
		copy(w[:], r.buf[k:])
		arena[off+uint64(k/8)].Store(binary.LittleEndian.Uint64(w[:]))
	}
	dir[j].meta.Store(off<<32 | metaReady | uint64(len(r.buf)))
	s := &dir[j].val
	r.index[string(r.buf)] = s
	return s
}
