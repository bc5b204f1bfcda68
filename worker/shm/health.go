package shm

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"os"
	"sync/atomic"
	"unsafe"
)

// Upstream health: the state of every checked upstream node of the node
// (APISIX's checks), in a region of its own (a sealed memfd, like the
// counters), which the supervisor creates (CreateHealth) and every worker
// maps read-write (OpenHealth). The supervisor's active checker reports
// its probes into it; each worker reads a node's state when it picks one
// (HealthNode.Healthy: one atomic load, no lock, no allocation) and
// reports its real traffic into it (passive checks).
//
// A node's slot is found by its key, the upstream's and the node's
// address (HealthKey), hashed with SHA-256: an open-addressing table
// probed linearly from the hash, over at most MaxProbe slots. Only the
// supervisor claims and frees slots (HealthSegment.Node and Free), from
// one goroutine at a time; the workers only look keys up (Health.Lookup),
// and a key not found is a node not checked. A claim writes the slot's
// control word busy, then the digest, then the control word ready; a
// freed slot is marked deleted (a tombstone): lookups pass over it, so
// that the keys stored past it in their chains are still found, and a
// later claim takes it again. The control word carries a generation,
// bumped by every claim, that a lookup reads before and after the digest:
// a slot freed and claimed again under it is not taken for its old key.
//
// The region does not know which configuration a worker still runs: a
// slot must not be freed while a worker may still read or report into
// it. The supervisor frees a node's slot one configuration after the one
// that dropped it (node/supervisor/health.go), when the workers have
// built the configuration without it.
//
// A slot's state and counters are one word each, so that no reader ever
// sees half of a change. The counters are lua-resty-healthcheck's, shared
// by active and passive reports: consecutive successes, HTTP failures, TCP
// failures and timeouts, 16 bits each. A success clears the failures, a
// failure the successes; a report that agrees with the node's state is
// not counted (it clears the counters of the other kind); a counter that reaches its threshold flips the state and
// clears every counter.

// Health region layout constants.
const (
	// DefaultHealthSlots is the number of node slots of the region.
	DefaultHealthSlots = 4096
	// MaxHealthSlots bounds the slots of a region.
	MaxHealthSlots = 1 << 20

	healthMagic     = 0x636f_7265_6865_616c // "coreheal"
	healthVersion   = 1
	healthHeadSize  = 64
	healthSlotBytes = 64

	// A slot's control word: its state in the low byte, the generation
	// of its last claim above.
	hsEmpty = 0
	hsBusy  = 1
	hsReady = 2
	hsDead  = 3 // freed: a tombstone
	hsState = 0xff
	hsGen   = 1 << 8
	// hsSpins bounds the wait for a slot another process is claiming; past
	// them (a process that died while claiming) the slot is passed over.
	hsSpins = 1000
)

// healthHeader opens the region (healthHeadSize bytes).
type healthHeader struct {
	magic, version, slots atomic.Uint64
	_                     [5]uint64
}

// HealthNode is one node's slot in the health region. Its methods are safe
// for concurrent use by any number of goroutines and processes, and do
// not allocate; a nil *HealthNode is a node not checked: always healthy.
type HealthNode struct {
	ctl atomic.Uint64
	key [4]atomic.Uint64
	// state is 0 healthy, 1 unhealthy.
	state atomic.Uint64
	// ctr packs the counters: successes, HTTP failures, TCP failures and
	// timeouts, 16 bits each from the lowest.
	ctr atomic.Uint64
	// changes counts the state's flips.
	changes atomic.Uint64
}

var (
	_ [healthSlotBytes - unsafe.Sizeof(HealthNode{})]byte
	_ [unsafe.Sizeof(HealthNode{}) - healthSlotBytes]byte
	_ [healthHeadSize - unsafe.Sizeof(healthHeader{})]byte
)

// Report is what one probe or one proxied request said of a node.
type Report uint8

// Reports, in the order of their counters.
const (
	Success Report = iota
	HTTPFailure
	TCPFailure
	Timeout
)

// Health is one process's mapping of the health region. It is safe for
// concurrent use by any number of goroutines and processes.
type Health struct {
	slots []HealthNode
	mask  uint64
	probe int
	unmap func() error
}

// HealthSegment is the supervisor's side of the region: the memfd it
// passes to every worker (File), and its own mapping.
type HealthSegment struct {
	*Health
	file *os.File
}

// HealthKey is the key of an upstream's node: the upstream as APISIX's
// Control API names it ("/apisix/upstreams/1") and the node's host:port.
func HealthKey(upstream, addr string) string { return upstream + "#" + addr }

// CreateHealth makes the region of slots node slots (rounded up to a power
// of two; 0 means DefaultHealthSlots), sealed so that its size never
// changes, and maps it.
func CreateHealth(slots int) (*HealthSegment, error) {
	if slots == 0 {
		slots = DefaultHealthSlots
	}
	if slots < 1 || slots > MaxHealthSlots {
		return nil, fmt.Errorf("%w: %d (1 to %d)", ErrSize, slots, MaxHealthSlots)
	}
	n := 1
	for n < slots {
		n <<= 1
	}
	size := healthHeadSize + n*healthSlotBytes
	f, err := sealedMemfd("coregate-health", size)
	if err != nil {
		return nil, err
	}
	mem, unmap, err := mapShared(int(f.Fd()), size)
	if err != nil {
		_ = f.Close()
		return nil, err
	}
	h := (*healthHeader)(unsafe.Pointer(&mem[0]))
	h.slots.Store(uint64(n))
	h.version.Store(healthVersion)
	h.magic.Store(healthMagic)
	hl, err := healthOf(mem, unmap)
	if err != nil {
		_ = unmap()
		_ = f.Close()
		return nil, err
	}
	return &HealthSegment{Health: hl, file: f}, nil
}

// File is the region's memfd, for a child process (exec.Cmd.ExtraFiles);
// it stays open until Close.
func (s *HealthSegment) File() *os.File { return s.file }

// Close unmaps the region and closes its file.
func (s *HealthSegment) Close() error {
	err := s.Health.Close()
	if cerr := s.file.Close(); err == nil {
		err = cerr
	}
	return err
}

// OpenHealth maps the region of an inherited file (a worker's side). The
// file may be closed afterwards: the mapping stays for the process's life,
// or until Close.
func OpenHealth(f *os.File) (*Health, error) {
	size, err := fileSize(f, healthHeadSize+healthSlotBytes)
	if err != nil {
		return nil, err
	}
	mem, unmap, err := mapShared(int(f.Fd()), size)
	if err != nil {
		return nil, err
	}
	h, err := healthOf(mem, unmap)
	if err != nil {
		_ = unmap()
		return nil, err
	}
	return h, nil
}

func healthOf(mem []byte, unmap func() error) (*Health, error) {
	h := (*healthHeader)(unsafe.Pointer(&mem[0]))
	n := h.slots.Load()
	if h.magic.Load() != healthMagic || h.version.Load() != healthVersion ||
		n == 0 || n&(n-1) != 0 || uint64(len(mem)) < healthHeadSize+n*healthSlotBytes {
		return nil, ErrLayout
	}
	return &Health{
		slots: unsafe.Slice((*HealthNode)(unsafe.Pointer(&mem[healthHeadSize])), n),
		mask:  n - 1,
		probe: int(min(n, MaxProbe)),
		unmap: unmap,
	}, nil
}

// Close unmaps the region; no HealthNode of it may be used afterwards.
func (h *Health) Close() error { return h.unmap() }

// digest is key's SHA-256, as the words a slot stores.
func digest(key string) (d [4]uint64) {
	sum := sha256.Sum256([]byte(key))
	for i := range d {
		d[i] = binary.LittleEndian.Uint64(sum[8*i:])
	}
	return d
}

// Lookup finds key's slot (HealthKey), or nil when the supervisor has not
// claimed one for it: a node not checked. It allocates (the key's digest):
// call it when compiling, not per request. Safe for concurrent use; it
// never changes the region.
func (h *Health) Lookup(key string) *HealthNode {
	d := digest(key)
	for p := 0; p < h.probe; p++ {
		s := &h.slots[(d[0]+uint64(p))&h.mask]
		for spins := 0; ; spins++ {
			c := s.ctl.Load()
			if c&hsState == hsEmpty {
				return nil // the end of key's chain
			}
			if c&hsState == hsReady {
				if s.key[0].Load() == d[0] && s.key[1].Load() == d[1] && s.key[2].Load() == d[2] && s.key[3].Load() == d[3] &&
					s.ctl.Load() == c {
					return s
				}
				break
			}
			if c&hsState == hsDead || spins >= hsSpins {
				break
			}
			osYield() // being claimed
		}
	}
	return nil
}

// Node finds key's slot (HealthKey), claiming one the first time (the
// first tombstone of its chain, or its first empty slot), or nil when its
// probe chain is full. A new node is healthy with its counters cleared. It
// allocates (the key's digest). Only the region's creator claims slots:
// Node and Free must not be called by two goroutines at once, nor by a
// process that maps the region with OpenHealth.
func (s *HealthSegment) Node(key string) *HealthNode {
	d := digest(key)
	var free *HealthNode
	for p := 0; p < s.probe; p++ {
		n := &s.slots[(d[0]+uint64(p))&s.mask]
		c := n.ctl.Load()
		if c&hsState == hsReady {
			if n.key[0].Load() == d[0] && n.key[1].Load() == d[1] && n.key[2].Load() == d[2] && n.key[3].Load() == d[3] {
				return n
			}
			continue
		}
		if free == nil {
			free = n
		}
		if c&hsState == hsEmpty {
			break // key is not past it
		}
	}
	if free == nil {
		return nil
	}
	gen := free.ctl.Load()&^hsState + hsGen
	free.ctl.Store(gen | hsBusy)
	for i := range d {
		free.key[i].Store(d[i])
	}
	free.state.Store(0)
	free.ctr.Store(0)
	free.ctl.Store(gen | hsReady)
	return free
}

// Free gives n's slot back: a lookup of its key finds nothing from now on
// and a later Node may claim it for another key. A worker that still holds
// n reads and reports into whatever node the slot is given to next: free a
// slot only once no worker runs a configuration that names it. The same
// rules as Node's hold; a nil n is ignored.
func (s *HealthSegment) Free(n *HealthNode) {
	if n == nil {
		return
	}
	c := n.ctl.Load()
	if c&hsState == hsReady {
		n.ctl.Store(c&^hsState | hsDead)
	}
}

// Healthy reports whether the node may be given traffic. It is one atomic
// load: the balancer's per-request read.
func (n *HealthNode) Healthy() bool { return n == nil || n.state.Load() == 0 }

// Changes is the number of times the node's state flipped.
func (n *HealthNode) Changes() uint64 {
	if n == nil {
		return 0
	}
	return n.changes.Load()
}

// Counters are the node's consecutive successes, HTTP failures, TCP
// failures and timeouts, as one consistent reading.
func (n *HealthNode) Counters() (successes, httpFailures, tcpFailures, timeouts int) {
	if n == nil {
		return 0, 0, 0, 0
	}
	c := n.ctr.Load()
	return int(c & 0xffff), int(c >> 16 & 0xffff), int(c >> 32 & 0xffff), int(c >> 48)
}

// Reset makes the node healthy with every counter cleared: a checker that
// starts (or starts again on a changed configuration) starts so, as
// APISIX's.
func (n *HealthNode) Reset() {
	if n.state.Swap(0) != 0 {
		n.changes.Add(1)
	}
	n.ctr.Store(0)
}

// Report counts r against limit, the threshold that the configuration
// sets for r's kind (0: not counted), and reports whether the node's state
// flipped. A success is not counted on a healthy node, a failure not on an
// unhealthy one (there is nothing to flip): they clear the counters of the
// other kind, whose run they break.
func (n *HealthNode) Report(r Report, limit int) bool {
	if n == nil || limit <= 0 {
		return false
	}
	want := uint64(0) // the state r argues for
	if r != Success {
		want = 1
	}
	for {
		st := n.state.Load()
		c := n.ctr.Load()
		if st == want {
			// Nothing to count, but the run of the other kind is broken.
			if c == 0 || n.ctr.CompareAndSwap(c, 0) {
				return false
			}
			continue
		}
		shift := 16 * uint(r)
		cnt := min(c>>shift&0xffff+1, 0xffff)
		var next uint64
		if r == Success {
			next = cnt // the failures cleared
		} else {
			next = c&^(0xffff<<shift)&^0xffff | cnt<<shift // the successes cleared
		}
		if cnt < uint64(limit) {
			if n.ctr.CompareAndSwap(c, next) {
				return false
			}
			continue
		}
		if !n.ctr.CompareAndSwap(c, 0) {
			continue
		}
		if n.state.CompareAndSwap(st, want) {
			n.changes.Add(1)
			return true
		}
		return false
	}
}
