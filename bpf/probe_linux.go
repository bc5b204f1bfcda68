package bpf

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/features"
	"golang.org/x/sys/unix"
)

// migrateSysctl is net.ipv4.tcp_migrate_req of the caller's network namespace.
const migrateSysctl = "/proc/sys/net/ipv4/tcp_migrate_req"

// Probe reports the best selection mechanism this kernel and process can use,
// trying in order: eBPF (it builds and discards a real Selector), classic BPF
// (SO_ATTACH_REUSEPORT_CBPF on a scratch socket), the kernel hash with a
// writable net.ipv4.tcp_migrate_req, and plain SO_REUSEPORT, which always
// works. The Kind is always usable. When it is not KindEBPF, the error joins
// the reasons the better mechanisms were refused, for the log: each wraps
// ErrNotSupported when the kernel or process lacks the feature and is
// inconclusive otherwise. Probe creates no lasting state and is safe for
// concurrent use.
func Probe() (Kind, error) {
	s, errE := NewSelector(ModeHash, 1, nil)
	if errE == nil {
		return KindEBPF, s.Close()
	}
	errC := probeCBPF()
	if errC == nil {
		return KindCBPF, errE
	}
	errM := probeMigrateSysctl()
	if errM == nil {
		return KindKernelHash, errors.Join(errE, errC)
	}
	return KindPlain, errors.Join(errE, errC, errM)
}

// probeEBPFFeatures checks the program type, map type and map flag the
// Selector needs, using cilium's cached feature probes.
func probeEBPFFeatures() error {
	if err := features.HaveProgramType(ebpf.SkReuseport); err != nil {
		return unsupported("sk_reuseport program type (linux 4.19)", err)
	}
	if err := features.HaveMapType(ebpf.ReusePortSockArray); err != nil {
		return unsupported("reuseport sockarray map (linux 4.19)", err)
	}
	if err := features.HaveMapFlag(features.BPF_F_MMAPABLE); err != nil {
		return unsupported("mmapable array (linux 5.5)", err)
	}
	return nil
}

// probeCBPF attaches a classic filter to an unbound SO_REUSEPORT socket.
func probeCBPF() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("bpf: cbpf probe socket: %w", err)
	}
	defer unix.Close(fd)
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEPORT, 1); err != nil {
		return unsupported("SO_REUSEPORT (linux 3.9)", err)
	}
	if err := attachFilter(fd, []unix.SockFilter{retK(0)}); err != nil {
		if errors.Is(err, unix.ENOPROTOOPT) || errors.Is(err, unix.EINVAL) {
			return fmt.Errorf("%w: SO_ATTACH_REUSEPORT_CBPF (linux 4.5): %w", ErrNotSupported, err)
		}
		return unsupported("SO_ATTACH_REUSEPORT_CBPF (linux 4.5)", err)
	}
	return nil
}

// probeMigrateSysctl checks that net.ipv4.tcp_migrate_req exists and is
// writable by this process, without changing it.
func probeMigrateSysctl() error {
	if err := unix.Access(migrateSysctl, unix.W_OK); err != nil {
		return migrateErr(err)
	}
	return nil
}

func migrateErr(err error) error {
	if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.EACCES) ||
		errors.Is(err, unix.EROFS) || errors.Is(err, unix.EPERM) {
		return fmt.Errorf("%w: net.ipv4.tcp_migrate_req (linux 5.14): %w", ErrNotSupported, err)
	}
	return fmt.Errorf("bpf: net.ipv4.tcp_migrate_req: %w", err)
}

// EnableMigrateSysctl sets net.ipv4.tcp_migrate_req=1 in the caller's network
// namespace, so that without a SELECT_OR_MIGRATE program (KindCBPF,
// KindKernelHash) a closing listener's queued connections move to another
// listener of the group, chosen by hash, instead of being reset. It reports
// whether the setting is now 1; the error wraps ErrNotSupported when the
// sysctl is missing (before 5.14) or not writable. The setting is global to
// the network namespace and outlives the process.
func EnableMigrateSysctl() (bool, error) {
	cur, err := os.ReadFile(migrateSysctl)
	if err != nil {
		return false, migrateErr(err)
	}
	if strings.TrimSpace(string(cur)) == "1" {
		return true, nil
	}
	if err := os.WriteFile(migrateSysctl, []byte("1\n"), 0o644); err != nil {
		return false, migrateErr(err)
	}
	return true, nil
}

// AttachCBPF attaches a classic BPF program to the reuseport group of
// listenFD (kernel 4.5; no privilege needed). In ModeCPU it returns the CPU
// that processed the SYN (SKF_AD_CPU). In ModeHash and ModeLeastConn it
// returns an out-of-range index, which makes the kernel use its own hash over
// the group's live sockets (classic BPF can read neither the group size nor
// the workers' counts), and replaces a CPU program attached before.
//
// Drawback: the value a classic program returns is an index into the group's
// internal socket array, in listen() order, not a worker id. When a socket
// leaves the group the last one moves into its place, so after a worker
// restarts CPU c may map to another worker; an index beyond the group's size
// falls back to the kernel hash. Use it only when eBPF is unavailable.
func AttachCBPF(listenFD int, mode Mode) error {
	var prog []unix.SockFilter
	switch mode {
	case ModeCPU:
		prog = []unix.SockFilter{
			{Code: unix.BPF_LD | unix.BPF_W | unix.BPF_ABS, K: skfAdOff + skfAdCPU},
			{Code: unix.BPF_RET | unix.BPF_A},
		}
	case ModeHash, ModeLeastConn:
		prog = []unix.SockFilter{retK(noSlot)}
	default:
		return fmt.Errorf("%w: %d", ErrBadMode, mode)
	}
	if err := attachFilter(listenFD, prog); err != nil {
		return unsupported("attach reuseport cbpf", err)
	}
	return nil
}

// Ancillary loads of classic BPF (include/uapi/linux/filter.h): SKF_AD_OFF is
// -0x1000 as a 32-bit offset, SKF_AD_CPU is 36.
const (
	skfAdOff = 0xfffff000
	skfAdCPU = 36
)

func retK(k uint32) unix.SockFilter {
	return unix.SockFilter{Code: unix.BPF_RET | unix.BPF_K, K: k}
}

func attachFilter(fd int, prog []unix.SockFilter) error {
	return unix.SetsockoptSockFprog(fd, unix.SOL_SOCKET, unix.SO_ATTACH_REUSEPORT_CBPF,
		&unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]})
}

// AttachDropAll attaches to fd a classic socket filter (SO_ATTACH_FILTER,
// not a reuseport program) that drops every packet. On a listening socket
// the kernel then drops new SYNs and the last ACK of handshakes in
// progress, so that nothing more enters its accept queue (the clients
// retransmit, by when the socket has left its group): a draining worker
// attaches it before it empties the queue. It needs no privilege.
func AttachDropAll(fd int) error {
	prog := [1]unix.SockFilter{retK(0)}
	if err := unix.SetsockoptSockFprog(fd, unix.SOL_SOCKET, unix.SO_ATTACH_FILTER,
		&unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}); err != nil {
		return fmt.Errorf("bpf: attach drop-all filter: %w", err)
	}
	return nil
}
