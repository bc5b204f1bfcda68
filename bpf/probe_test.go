//go:build linux

package bpf

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/cilium/ebpf/btf"
	"github.com/google/go-cmp/cmp"
)

func TestProbe(t *testing.T) {
	requireEBPF(t)
	k, err := Probe()
	if k != KindEBPF || err != nil {
		t.Fatalf("Probe() = %v, %v; want ebpf, nil", k, err)
	}
	if err := probeCBPF(); err != nil {
		t.Errorf("classic BPF probe: %v", err)
	}
	if err := probeMigrateSysctl(); err != nil {
		t.Errorf("tcp_migrate_req probe: %v", err)
	}
	s, err := NewSelector(ModeHash, 2, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if !s.Migrates() {
		t.Errorf("Migrates() = false on a kernel with SELECT_OR_MIGRATE")
	}
}

// TestContextLayout checks the sk_reuseport_md offsets the program reads
// against the running kernel's BTF.
func TestContextLayout(t *testing.T) {
	spec, err := btf.LoadKernelSpec()
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("kernel BTF: %v", err)
		}
		t.Skipf("kernel BTF unavailable: %v", err)
	}
	var md *btf.Struct
	if err := spec.TypeByName("sk_reuseport_md", &md); err != nil {
		t.Fatalf("sk_reuseport_md: %v", err)
	}
	got := map[string]uint32{}
	var walk func(members []btf.Member, base btf.Bits)
	walk = func(members []btf.Member, base btf.Bits) {
		for _, m := range members {
			off := base + m.Offset
			if m.Name != "" {
				got[m.Name] = uint32(off / 8)
				continue
			}
			if u, ok := btf.UnderlyingType(m.Type).(*btf.Union); ok {
				walk(u.Members, off)
			}
		}
	}
	walk(md.Members, 0)
	want := map[string]uint32{"hash": offMDHash, "migrating_sk": offMDMigratingSK}
	for name := range got {
		if _, ok := want[name]; !ok {
			delete(got, name)
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("sk_reuseport_md offsets (-program +kernel):\n%s", diff)
	}
}

func TestEnableMigrateSysctl(t *testing.T) {
	if err := probeMigrateSysctl(); err != nil {
		skipUnsupported(t, "tcp_migrate_req", err)
	}
	setMigrateSysctl(t, "0")
	ok, err := EnableMigrateSysctl()
	if !ok || err != nil {
		t.Fatalf("EnableMigrateSysctl() = %v, %v; want true, nil", ok, err)
	}
	b, err := os.ReadFile(migrateSysctl)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(string(b)); got != "1" {
		t.Errorf("tcp_migrate_req = %q after enabling, want 1", got)
	}
	// Already 1: nothing to write, still true.
	if ok, err := EnableMigrateSysctl(); !ok || err != nil {
		t.Errorf("second EnableMigrateSysctl() = %v, %v", ok, err)
	}
}

func TestMigrateErrWraps(t *testing.T) {
	_, err := os.ReadFile("/proc/sys/net/ipv4/no_such_sysctl")
	if got := migrateErr(err); !errors.Is(got, ErrNotSupported) || got == ErrNotSupported {
		t.Errorf("migrateErr(%v) = %v, want a wrapped ErrNotSupported", err, got)
	}
}
