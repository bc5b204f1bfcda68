//go:build !linux

package bpf

import (
	"fmt"
	"os"
)

// Selector is the eBPF socket selector; it exists only on Linux.
type Selector struct{}

// NewSelector returns an error wrapping ErrNotSupported outside Linux.
func NewSelector(mode Mode, slots int, cpus []int) (*Selector, error) {
	return nil, fmt.Errorf("%w: sk_reuseport needs linux", ErrNotSupported)
}

// AdoptSelector returns an error wrapping ErrNotSupported outside Linux.
func AdoptSelector(files []*os.File, mode Mode) (*Selector, error) {
	return nil, fmt.Errorf("%w: sk_reuseport needs linux", ErrNotSupported)
}

// Mode returns ModeHash.
func (s *Selector) Mode() Mode { return ModeHash }

// Slots returns 0.
func (s *Selector) Slots() int { return 0 }

// Migrates returns false.
func (s *Selector) Migrates() bool { return false }

// Files returns nil.
func (s *Selector) Files() []*os.File { return nil }

// SetLive returns ErrNotSupported.
func (s *Selector) SetLive(n int) error { return ErrNotSupported }

// SetCPUs returns ErrNotSupported.
func (s *Selector) SetCPUs(cpus []int) error { return ErrNotSupported }

// Conns returns 0.
func (s *Selector) Conns(slot int) int64 { return 0 }

// ResetConns returns ErrNotSupported.
func (s *Selector) ResetConns(slot int) error { return ErrNotSupported }

// Remove returns ErrNotSupported.
func (s *Selector) Remove(slot int) error { return ErrNotSupported }

// Close does nothing.
func (s *Selector) Close() error { return nil }

// Member is a worker's handle on the selector; it exists only on Linux.
type Member struct{}

// OpenMember returns an error wrapping ErrNotSupported outside Linux.
func OpenMember(files []*os.File, slot int) (*Member, error) {
	return nil, fmt.Errorf("%w: sk_reuseport needs linux", ErrNotSupported)
}

// Slot returns 0.
func (m *Member) Slot() int { return 0 }

// Join returns ErrNotSupported.
func (m *Member) Join(listenFD int) error { return ErrNotSupported }

// Rejoin returns ErrNotSupported.
func (m *Member) Rejoin(listenFD int) (bool, error) { return false, ErrNotSupported }

// Leave returns ErrNotSupported.
func (m *Member) Leave() error { return ErrNotSupported }

// AddConns does nothing.
func (m *Member) AddConns(delta int64) {}

// Conns returns 0.
func (m *Member) Conns() int64 { return 0 }

// Close does nothing.
func (m *Member) Close() error { return nil }

// Probe reports KindPlain outside Linux.
func Probe() (Kind, error) {
	return KindPlain, fmt.Errorf("%w: reuseport selection needs linux", ErrNotSupported)
}

// AttachDropAll returns an error wrapping ErrNotSupported outside Linux.
func AttachDropAll(fd int) error {
	return fmt.Errorf("%w: socket filters need linux", ErrNotSupported)
}

// AttachCBPF returns an error wrapping ErrNotSupported outside Linux.
func AttachCBPF(listenFD int, mode Mode) error {
	return fmt.Errorf("%w: SO_ATTACH_REUSEPORT_CBPF needs linux", ErrNotSupported)
}

// EnableMigrateSysctl returns false and an error wrapping ErrNotSupported
// outside Linux.
func EnableMigrateSysctl() (bool, error) {
	return false, fmt.Errorf("%w: tcp_migrate_req needs linux", ErrNotSupported)
}
