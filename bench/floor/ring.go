package floor

import (
	"errors"
	"fmt"
	"sync/atomic"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ring is the least of io_uring the ring floor needs: one submission queue
// and one completion queue mapped from the kernel, used by one goroutine on
// one locked OS thread (IORING_SETUP_SINGLE_ISSUER). Task work is deferred
// to the loop's own io_uring_enter (IORING_SETUP_DEFER_TASKRUN), so the
// kernel finishes a ready receive in the loop's call rather than in an
// interrupt of whatever the thread runs.
//
// The buffers an SQE names must stay where they are until its CQE is
// reaped; the Go heap does not move objects, and the ring floor keeps every
// conn reachable while an operation on it is in flight.
type ring struct {
	fd      int
	entries uint32
	sqTail  *uint32 // the kernel's view of the tail, published by enter
	sqHead  *uint32
	sqMask  uint32
	sqes    []sqe
	cqHead  *uint32
	cqTail  *uint32
	cqMask  uint32
	cqes    []cqe
	mem     [][]byte // mappings to unmap on close
	tail    uint32   // the local tail: SQEs filled, not yet published
	flushed uint32   // the tail published at the last enter
}

// sqe is struct io_uring_sqe (64 bytes).
type sqe struct {
	opcode      uint8
	flags       uint8
	ioprio      uint16
	fd          int32
	off         uint64
	addr        uint64
	len         uint32
	opFlags     uint32
	userData    uint64
	bufIndex    uint16
	personality uint16
	fileIndex   int32
	addr3       uint64
	_           uint64
}

// cqe is struct io_uring_cqe (16 bytes, without IORING_SETUP_CQE32).
type cqe struct {
	userData uint64
	res      int32
	flags    uint32
}

type sqringOffsets struct {
	head, tail, ringMask, ringEntries, flags, dropped, array, resv1 uint32
	userAddr                                                        uint64
}

type cqringOffsets struct {
	head, tail, ringMask, ringEntries, overflow, cqes, flags, resv1 uint32
	userAddr                                                        uint64
}

// uringParams is struct io_uring_params.
type uringParams struct {
	sqEntries, cqEntries, flags, sqThreadCPU, sqThreadIdle, features, wqFd uint32
	resv                                                                   [3]uint32
	sqOff                                                                  sqringOffsets
	cqOff                                                                  cqringOffsets
}

// From include/uapi/linux/io_uring.h.
const (
	setupSingleIssuer = 1 << 12
	setupDeferTaskrun = 1 << 13

	featSingleMmap = 1 << 0

	enterGetEvents = 1 << 0

	offSQRing = 0
	offSQEs   = 0x10000000

	opRead   = 22
	opAccept = 13
	opSend   = 26
	opRecv   = 27

	// recvPollFirst (IORING_RECVSEND_POLL_FIRST) arms the poll before
	// trying the receive: the loop posts a receive right after the last
	// one emptied the socket, so a first try would only find nothing.
	recvPollFirst = 1 << 0
)

var errRingFull = errors.New("floor: io_uring submission queue full")

func newRing(entries uint32) (*ring, error) {
	p := uringParams{flags: setupSingleIssuer | setupDeferTaskrun}
	fd, _, e := unix.Syscall(unix.SYS_IO_URING_SETUP, uintptr(entries), uintptr(unsafe.Pointer(&p)), 0)
	if e != 0 {
		return nil, fmt.Errorf("floor: io_uring_setup: %w", e)
	}
	r := &ring{fd: int(fd), entries: p.sqEntries}
	if p.features&featSingleMmap == 0 {
		r.close()
		return nil, errors.New("floor: io_uring without IORING_FEAT_SINGLE_MMAP")
	}
	size := max(p.sqOff.array+p.sqEntries*4, p.cqOff.cqes+p.cqEntries*uint32(unsafe.Sizeof(cqe{})))
	rings, err := unix.Mmap(r.fd, offSQRing, int(size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		r.close()
		return nil, fmt.Errorf("floor: mmap io_uring rings: %w", err)
	}
	r.mem = append(r.mem, rings)
	sqeBytes, err := unix.Mmap(r.fd, offSQEs, int(p.sqEntries)*int(unsafe.Sizeof(sqe{})), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		r.close()
		return nil, fmt.Errorf("floor: mmap io_uring SQEs: %w", err)
	}
	r.mem = append(r.mem, sqeBytes)
	at := func(off uint32) *uint32 { return (*uint32)(unsafe.Pointer(&rings[off])) }
	r.sqHead, r.sqTail = at(p.sqOff.head), at(p.sqOff.tail)
	r.sqMask = *at(p.sqOff.ringMask)
	r.cqHead, r.cqTail = at(p.cqOff.head), at(p.cqOff.tail)
	r.cqMask = *at(p.cqOff.ringMask)
	r.sqes = unsafe.Slice((*sqe)(unsafe.Pointer(&sqeBytes[0])), p.sqEntries)
	r.cqes = unsafe.Slice((*cqe)(unsafe.Pointer(&rings[p.cqOff.cqes])), p.cqEntries)
	// The SQ array maps ring slots to SQEs; slot i always holds SQE i.
	array := unsafe.Slice((*uint32)(unsafe.Pointer(&rings[p.sqOff.array])), p.sqEntries)
	for i := range array {
		array[i] = uint32(i)
	}
	r.tail = atomic.LoadUint32(r.sqTail)
	r.flushed = r.tail
	return r, nil
}

// get returns the next free SQE, zeroed, or nil when the queue is full of
// SQEs not yet submitted (the loop submits before it fills a queue of
// twice its connections' operations).
func (r *ring) get() *sqe {
	if r.tail-atomic.LoadUint32(r.sqHead) >= r.entries {
		return nil
	}
	e := &r.sqes[r.tail&r.sqMask]
	*e = sqe{}
	r.tail++
	return e
}

// enter publishes the SQEs filled since the last call and waits until at
// least wait completions are in the completion queue: the loop's one
// system call per wake-up. It makes the runtime's entersyscall and
// exitsyscall when it may block, as a blocking epoll_wait does.
func (r *ring) enter(wait uint32) error {
	atomic.StoreUint32(r.sqTail, r.tail)
	submit := r.tail - r.flushed
	r.flushed = r.tail
	for {
		var e syscall.Errno
		if wait > 0 {
			_, _, e = unix.Syscall6(unix.SYS_IO_URING_ENTER, uintptr(r.fd), uintptr(submit), uintptr(wait), enterGetEvents, 0, 0)
		} else {
			_, _, e = unix.RawSyscall6(unix.SYS_IO_URING_ENTER, uintptr(r.fd), uintptr(submit), 0, enterGetEvents, 0, 0)
		}
		switch e {
		case 0:
			return nil
		case unix.EINTR:
			submit = 0 // the SQEs were consumed before the wait was interrupted
			continue
		default:
			return fmt.Errorf("floor: io_uring_enter: %w", e)
		}
	}
}

// reap calls f on each completion in the queue, oldest first, and frees
// their slots.
func (r *ring) reap(f func(c *cqe)) {
	head := *r.cqHead
	tail := atomic.LoadUint32(r.cqTail)
	for ; head != tail; head++ {
		f(&r.cqes[head&r.cqMask])
	}
	atomic.StoreUint32(r.cqHead, head)
}

func (r *ring) close() {
	for _, m := range r.mem {
		_ = unix.Munmap(m)
	}
	r.mem = nil
	if r.fd >= 0 {
		unix.Close(r.fd)
		r.fd = -1
	}
}
