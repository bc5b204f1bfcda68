package bpf

import "fmt"

// Mode is how the selector picks a worker slot for a new connection.
type Mode uint8

// Selection modes.
const (
	// ModeHash picks slot hash % live, where hash is the kernel's hash of the
	// connection's 4-tuple. It is the default.
	ModeHash Mode = iota
	// ModeCPU picks the slot mapped to the CPU that processed the SYN (the CPU
	// chosen by RSS/RPS on a real NIC; the connecting thread's CPU on loopback),
	// and falls back to ModeHash when that CPU maps to no live slot.
	ModeCPU
	// ModeLeastConn takes two distinct candidate slots, hash % live and a
	// random other one, and picks the one whose worker publishes fewer active
	// connections; a tie goes to the first (power of two choices).
	ModeLeastConn
)

var modeNames = [...]string{ModeHash: "hash", ModeCPU: "cpu", ModeLeastConn: "least_conn"}

// ParseMode returns the Mode named s: "hash", "cpu" or "least_conn". The empty
// string is ModeHash.
func ParseMode(s string) (Mode, error) {
	if s == "" {
		return ModeHash, nil
	}
	for m, name := range modeNames {
		if s == name {
			return Mode(m), nil
		}
	}
	return ModeHash, fmt.Errorf("%w: %q (want hash, cpu or least_conn)", ErrBadMode, s)
}

// String returns the configuration name of m.
func (m Mode) String() string {
	if int(m) < len(modeNames) {
		return modeNames[m]
	}
	return fmt.Sprintf("mode(%d)", uint8(m))
}

func (m Mode) valid() bool { return int(m) < len(modeNames) }

// Kind is the socket selection mechanism in use, from best to worst. Its numeric
// value is stable and suits a gauge metric.
type Kind uint8

// Selection mechanisms.
const (
	// KindEBPF is the sk_reuseport eBPF program over a REUSEPORT_SOCKARRAY
	// (Selector and Member); with SELECT_OR_MIGRATE it also migrates the
	// accept queue of a closing listener.
	KindEBPF Kind = iota
	// KindCBPF is a classic BPF program (AttachCBPF) returning an index into
	// the reuseport group.
	KindCBPF
	// KindKernelHash is the kernel's own reuseport hash with
	// net.ipv4.tcp_migrate_req settable, so queued connections of a closing
	// listener migrate (EnableMigrateSysctl).
	KindKernelHash
	// KindPlain is plain SO_REUSEPORT: kernel hash, no migration.
	KindPlain
)

var kindNames = [...]string{KindEBPF: "ebpf", KindCBPF: "cbpf", KindKernelHash: "kernel_hash", KindPlain: "plain"}

// String returns the name used in logs and metric labels.
func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}
