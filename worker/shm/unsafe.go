package shm

import (
	"sync/atomic"
	"unsafe"
)

// The segment's words are reached through typed pointers into the
// mapping: the one use of unsafe in this package. The mapping is
// page-aligned and every field is a 64-bit word at a multiple of 8, so
// the atomics are aligned.

var (
	_ [SlotBytes - unsafe.Sizeof(slot{})]byte
	_ [unsafe.Sizeof(slot{}) - SlotBytes]byte
	_ [headerSize - unsafe.Sizeof(header{})]byte
)

func headerOf(mem []byte) *header { return (*header)(unsafe.Pointer(&mem[0])) }

// init checks the header and lays the slots over the mapping.
func (t *Table) init() error {
	h := headerOf(t.mem)
	n := h.slots.Load()
	if h.magic.Load() != magic || h.version.Load() != version || h.slotSize.Load() != SlotBytes ||
		n == 0 || n&(n-1) != 0 || uint64(len(t.mem)) < headerSize+n*SlotBytes {
		return ErrLayout
	}
	t.slots = unsafe.Slice((*slot)(unsafe.Pointer(&t.mem[headerSize])), n)
	t.mask = n - 1
	t.seed = h.seed.Load()
	t.probe = int(min(n, MaxProbe))
	return nil
}

var (
	_ [regionHeadSize - unsafe.Sizeof(regionHeader{})]byte
	_ [entryBytes - unsafe.Sizeof(entry{})]byte
	_ [unsafe.Sizeof(entry{}) - entryBytes]byte
	_ [regionHeadSize - unsafe.Sizeof(metricsHeader{})]byte
)

func metricsHeaderOf(mem []byte) *metricsHeader {
	return (*metricsHeader)(unsafe.Pointer(&mem[0]))
}

func regionOf(mem []byte, off int) *regionHeader {
	return (*regionHeader)(unsafe.Pointer(&mem[off]))
}

func entriesOf(mem []byte, off, n int) []entry {
	return unsafe.Slice((*entry)(unsafe.Pointer(&mem[off])), n)
}

func wordsOf(mem []byte, off, n int) []atomic.Uint64 {
	return unsafe.Slice((*atomic.Uint64)(unsafe.Pointer(&mem[off])), n)
}
