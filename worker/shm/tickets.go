package shm

import (
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// TLS session ticket keys, shared by every worker so that a session one
// worker issued a ticket for resumes on any other: a small region of its
// own (a sealed memfd, like the counters and the metrics), which the
// supervisor creates with TicketKeyCount random keys (CreateTicketKeys)
// and rotates (Rotate, every TicketKeyRotation: a new key first, the
// oldest dropped, as nginx's ssl_session_ticket_key files: the first
// encrypts new tickets, all decrypt), and each worker maps read-only
// (OpenTicketKeys) and reads on its tick (Gen, then Load when it
// changed). A supervisor that takes the workers over adopts the region
// (AdoptTicketKeys), so tickets stay valid across it.
//
// The writer, one supervisor at a time, writes under a sequence word
// (a seqlock): odd while it writes, even once done; a reader reads the
// keys between two loads of it and keeps them only if it was even and
// unchanged. Every word is read and written atomically, so no process
// ever races on plain memory, and a reader never takes a lock.

// TicketKeyCount is the number of session ticket keys: the one that
// encrypts and two older ones that still decrypt.
const TicketKeyCount = 3

// TicketKeyRotation is how often the supervisor rotates the keys: a
// ticket stays resumable for up to TicketKeyCount rotations.
const TicketKeyRotation = time.Hour

const (
	ticketsMagic   = 0x636f72656774746b // "coregttk"
	ticketsVersion = 1
	// ticketsSize is the region's size: one page.
	ticketsSize = 4096
	// ticketsSpins bounds a reader's tries while the writer writes; past
	// them (a writer that died mid-write) Load fails and the worker keeps
	// the keys it had.
	ticketsSpins = 1000
)

// ticketsHeader is the region's layout: every field a 64-bit word.
type ticketsHeader struct {
	magic, version atomic.Uint64
	// seq is the seqlock: odd while the writer writes.
	seq atomic.Uint64
	// gen counts the writes of keys: 1 after CreateTicketKeys.
	gen atomic.Uint64
	// rotated is when the keys were last written, in Unix nanoseconds.
	rotated atomic.Int64
	keys    [TicketKeyCount][4]atomic.Uint64
}

// TicketKeys is a mapping of the ticket keys region. Its methods are safe
// for concurrent use by any number of goroutines and processes; Load does
// not allocate into a dst of TicketKeyCount capacity, and takes no lock.
type TicketKeys struct {
	h     *ticketsHeader
	unmap func() error
}

// TicketSegment is the supervisor's side of the region: the memfd it
// passes to every worker (File), and its mapping, which it writes.
type TicketSegment struct {
	*TicketKeys
	file *os.File
	// mu makes this process's writers one.
	mu sync.Mutex
}

// CreateTicketKeys makes the region, sealed so that its size never
// changes, with TicketKeyCount keys from crypto/rand (gen 1).
func CreateTicketKeys() (*TicketSegment, error) {
	f, err := sealedMemfd("coregate-tickets", ticketsSize)
	if err != nil {
		return nil, err
	}
	mem, unmap, err := mapShared(int(f.Fd()), ticketsSize)
	if err != nil {
		_ = f.Close()
		return nil, err
	}
	s := &TicketSegment{TicketKeys: &TicketKeys{h: (*ticketsHeader)(unsafe.Pointer(&mem[0])), unmap: unmap}, file: f}
	keys, err := randomKeys()
	if err != nil {
		_ = s.Close()
		return nil, err
	}
	s.store(keys)
	s.h.version.Store(ticketsVersion)
	s.h.magic.Store(ticketsMagic)
	return s, nil
}

// OpenTicketKeys maps the region of an inherited file read-only (a
// worker's side). The file may be closed afterwards: the mapping stays for
// the process's life, or until Close.
func OpenTicketKeys(f *os.File) (*TicketKeys, error) {
	if _, err := fileSize(f, ticketsSize); err != nil {
		return nil, err
	}
	mem, err := unix.Mmap(int(f.Fd()), 0, ticketsSize, unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("shm: mmap: %w", err)
	}
	t := &TicketKeys{h: (*ticketsHeader)(unsafe.Pointer(&mem[0])), unmap: func() error { return unix.Munmap(mem) }}
	if err := t.check(); err != nil {
		_ = t.Close()
		return nil, err
	}
	return t, nil
}

// AdoptTicketKeys maps the region of f, made by CreateTicketKeys in
// another process (a supervisor before this one, whose worker passed it
// on), as this process's TicketSegment: f becomes the segment's, closed by
// Close. Keys left half written by a writer that died are replaced by
// fresh ones (a rotation).
func AdoptTicketKeys(f *os.File) (*TicketSegment, error) {
	if _, err := fileSize(f, ticketsSize); err != nil {
		return nil, err
	}
	mem, unmap, err := mapShared(int(f.Fd()), ticketsSize)
	if err != nil {
		return nil, err
	}
	s := &TicketSegment{TicketKeys: &TicketKeys{h: (*ticketsHeader)(unsafe.Pointer(&mem[0])), unmap: unmap}, file: f}
	if err := s.check(); err != nil {
		_ = unmap()
		return nil, err
	}
	if s.h.seq.Load()&1 != 0 {
		// A writer died while writing: the keys may be torn, all are
		// replaced (tickets issued before are not resumed).
		keys, err := randomKeys()
		if err != nil {
			_ = unmap()
			return nil, err
		}
		s.h.seq.Add(1)
		s.store(keys)
	}
	return s, nil
}

// randomKeys makes TicketKeyCount keys from crypto/rand.
func randomKeys() ([TicketKeyCount][32]byte, error) {
	var keys [TicketKeyCount][32]byte
	for i := range keys {
		if _, err := rand.Read(keys[i][:]); err != nil {
			return keys, fmt.Errorf("shm: ticket keys: %w", err)
		}
	}
	return keys, nil
}

func (t *TicketKeys) check() error {
	if t.h.magic.Load() != ticketsMagic || t.h.version.Load() != ticketsVersion {
		return fmt.Errorf("%w: not a ticket keys region of version %d", ErrLayout, ticketsVersion)
	}
	return nil
}

// File is the region's memfd, for a child process (exec.Cmd.ExtraFiles);
// it stays open until Close.
func (s *TicketSegment) File() *os.File { return s.file }

// Close unmaps the region and closes its file.
func (s *TicketSegment) Close() error {
	err := s.TicketKeys.Close()
	if cerr := s.file.Close(); err == nil {
		err = cerr
	}
	return err
}

// Close unmaps the region. No method may be called afterwards.
func (t *TicketKeys) Close() error { return t.unmap() }

// Rotate writes a new key from crypto/rand first and keeps the others
// after it, the oldest dropped: the new key encrypts, all decrypt.
func (s *TicketSegment) Rotate() error {
	var fresh [32]byte
	if _, err := rand.Read(fresh[:]); err != nil {
		return fmt.Errorf("shm: ticket keys: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var keys [TicketKeyCount][32]byte
	keys[0] = fresh
	cur, _, ok := s.load(make([][32]byte, 0, TicketKeyCount))
	if ok {
		copy(keys[1:], cur)
	}
	s.storeLocked(keys)
	return nil
}

// RotateDue rotates the keys when they were last written
// TicketKeyRotation or more before now: the supervisor calls it
// periodically, and a supervisor that adopted the region keeps its
// predecessor's schedule. It reports whether it rotated.
func (s *TicketSegment) RotateDue(now time.Time) (bool, error) {
	if now.Sub(s.Rotated()) < TicketKeyRotation {
		return false, nil
	}
	return true, s.Rotate()
}

// store writes keys, the first encrypting (gen + 1).
func (s *TicketSegment) store(keys [TicketKeyCount][32]byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.storeLocked(keys)
}

func (s *TicketSegment) storeLocked(keys [TicketKeyCount][32]byte) {
	h := s.h
	h.seq.Add(1) // odd: readers retry
	for i := range keys {
		for w := range 4 {
			h.keys[i][w].Store(binary.LittleEndian.Uint64(keys[i][8*w:]))
		}
	}
	h.gen.Add(1)
	h.rotated.Store(time.Now().UnixNano())
	h.seq.Add(1) // even: done
}

// Gen is the generation of the keys: it changes each time they are
// written. One atomic load, for a worker's tick: Load when it changed.
func (t *TicketKeys) Gen() uint64 { return t.h.gen.Load() }

// Rotated is when the keys were last written.
func (t *TicketKeys) Rotated() time.Time { return time.Unix(0, t.h.rotated.Load()) }

// Load appends the keys to dst[:0], the one that encrypts first, and
// returns them with their generation; ok is false when the writer was
// still writing after many tries (one that died mid-write), and the
// caller keeps the keys it had.
func (t *TicketKeys) Load(dst [][32]byte) (keys [][32]byte, gen uint64, ok bool) {
	return t.load(dst)
}

func (t *TicketKeys) load(dst [][32]byte) ([][32]byte, uint64, bool) {
	h := t.h
	for range ticketsSpins {
		s1 := h.seq.Load()
		if s1&1 != 0 {
			osYield()
			continue
		}
		keys := dst[:0]
		for i := range TicketKeyCount {
			var k [32]byte
			for w := range 4 {
				binary.LittleEndian.PutUint64(k[8*w:], h.keys[i][w].Load())
			}
			keys = append(keys, k)
		}
		gen := h.gen.Load()
		if h.seq.Load() == s1 {
			return keys, gen, true
		}
	}
	return dst[:0], 0, false
}
