package shm

import (
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

const ticketsChildEnv = "SHM_TICKETS_CHILD"

// ticketsChild is a worker's side: it maps the region inherited as fd 3
// read-only and prints its generation and keys.
func ticketsChild() error {
	t, err := OpenTicketKeys(os.NewFile(3, "tickets"))
	if err != nil {
		return err
	}
	keys, gen, ok := t.Load(nil)
	if !ok {
		return fmt.Errorf("load failed")
	}
	fmt.Println(formatKeys(keys, gen))
	return nil
}

func formatKeys(keys [][32]byte, gen uint64) string {
	var b strings.Builder
	fmt.Fprintf(&b, "gen %d", gen)
	for _, k := range keys {
		b.WriteString(" " + hex.EncodeToString(k[:]))
	}
	return b.String()
}

func newTickets(t *testing.T) *TicketSegment {
	t.Helper()
	s, err := CreateTicketKeys()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func mustLoad(t *testing.T, k *TicketKeys) ([][32]byte, uint64) {
	t.Helper()
	keys, gen, ok := k.Load(nil)
	if !ok {
		t.Fatal("Load failed")
	}
	return keys, gen
}

// TestTicketKeysRotate: three random keys at creation; a rotation puts a
// new one first and keeps the two newest after it.
func TestTicketKeysRotate(t *testing.T) {
	s := newTickets(t)
	keys, gen := mustLoad(t, s.TicketKeys)
	if gen != 1 || len(keys) != TicketKeyCount {
		t.Fatalf("gen %d, %d keys", gen, len(keys))
	}
	if keys[0] == keys[1] || keys[1] == keys[2] || keys[0] == keys[2] || keys[0] == ([32]byte{}) {
		t.Fatalf("keys not random: %x", keys)
	}
	before := time.Now()
	if err := s.Rotate(); err != nil {
		t.Fatal(err)
	}
	rotated, gen2 := mustLoad(t, s.TicketKeys)
	if gen2 != 2 || s.Gen() != 2 {
		t.Fatalf("gen after a rotation: %d", gen2)
	}
	if rotated[1] != keys[0] || rotated[2] != keys[1] || rotated[0] == keys[0] || rotated[0] == keys[2] {
		t.Fatalf("rotation: %x then %x", keys, rotated)
	}
	if s.Rotated().Before(before) {
		t.Fatalf("rotated at %v, before %v", s.Rotated(), before)
	}
	// Due an hour after the last rotation, not before.
	if due, err := s.RotateDue(s.Rotated().Add(TicketKeyRotation - time.Minute)); due || err != nil {
		t.Fatalf("RotateDue before the hour: %v, %v", due, err)
	}
	if due, err := s.RotateDue(s.Rotated().Add(TicketKeyRotation)); !due || err != nil || s.Gen() != 3 {
		t.Fatalf("RotateDue after the hour: %v, %v, gen %d", due, err, s.Gen())
	}
}

// TestTicketKeysProcesses: two worker processes, mapping the region they
// inherit, see the supervisor's keys, and both see a rotation.
func TestTicketKeysProcesses(t *testing.T) {
	s := newTickets(t)
	views := func() []string {
		t.Helper()
		var out []string
		for range 2 {
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), ticketsChildEnv+"=1")
			cmd.ExtraFiles = []*os.File{s.File()}
			cmd.Stderr = os.Stderr
			b, err := cmd.Output()
			if err != nil {
				t.Fatalf("child: %v", err)
			}
			out = append(out, strings.TrimSpace(string(b)))
		}
		return out
	}
	for round := range 2 {
		keys, gen := mustLoad(t, s.TicketKeys)
		want := formatKeys(keys, gen)
		for i, v := range views() {
			if v != want {
				t.Errorf("round %d, worker %d sees %q, want %q", round, i, v, want)
			}
		}
		if err := s.Rotate(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestTicketKeysTornRead: readers racing a writer that rewrites the keys
// as fast as it can never get keys of two writes: each write's keys are
// a pattern of its generation, which every read checks.
func TestTicketKeysTornRead(t *testing.T) {
	s := newTickets(t)
	pattern := func(gen uint64) [TicketKeyCount][32]byte {
		var keys [TicketKeyCount][32]byte
		for i := range keys {
			for b := range keys[i] {
				keys[i][b] = byte(gen*7 + uint64(i)*3 + uint64(b))
			}
		}
		return keys
	}
	// Start from a patterned write, so that every read can be checked.
	s.store(pattern(s.Gen() + 1))
	deadline := time.Now().Add(300 * time.Millisecond)
	var stop atomic.Bool
	var wg sync.WaitGroup
	var reads, failed atomic.Int64
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			dst := make([][32]byte, 0, TicketKeyCount)
			for !stop.Load() {
				keys, gen, ok := s.Load(dst)
				if !ok {
					failed.Add(1)
					continue
				}
				reads.Add(1)
				if want := pattern(gen); [TicketKeyCount][32]byte(keys) != want {
					t.Errorf("gen %d: torn keys %x", gen, keys)
					return
				}
			}
		}()
	}
	writes := 0
	for time.Now().Before(deadline) && writes < 1_000_000 {
		s.store(pattern(s.Gen() + 1))
		writes++
	}
	stop.Store(true)
	wg.Wait()
	if reads.Load() == 0 {
		t.Fatalf("no read succeeded (%d failed) over %d writes", failed.Load(), writes)
	}
	t.Logf("%d writes, %d reads, %d reads gave up", writes, reads.Load(), failed.Load())
}

// TestTicketKeysAdopt: a supervisor that takes the workers over adopts
// the region with its keys; one that finds the keys half written (its
// predecessor died writing) replaces them, and readers, which gave up
// meanwhile, read again.
func TestTicketKeysAdopt(t *testing.T) {
	s := newTickets(t)
	keys, gen := mustLoad(t, s.TicketKeys)
	dup := func() *os.File { return dupOf(t, s.File()) }
	a, err := AdoptTicketKeys(dup())
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if k2, g2 := mustLoad(t, a.TicketKeys); g2 != gen || formatKeys(k2, g2) != formatKeys(keys, gen) {
		t.Fatalf("adopted %s, want %s", formatKeys(k2, g2), formatKeys(keys, gen))
	}

	w, err := OpenTicketKeys(dup())
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	s.h.seq.Add(1) // a writer dies mid-write
	if _, _, ok := w.Load(nil); ok {
		t.Fatal("Load succeeded while the keys were being written")
	}
	b, err := AdoptTicketKeys(dup())
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	k3, g3 := mustLoad(t, w)
	if g3 <= gen || k3[0] == keys[0] || k3[1] == keys[0] {
		t.Fatalf("after adopting torn keys: %s (before %s)", formatKeys(k3, g3), formatKeys(keys, gen))
	}
}

// TestTicketKeysOpenRefuses: a region that is not one of ticket keys.
func TestTicketKeysOpenRefuses(t *testing.T) {
	f, err := sealedMemfd("not-tickets", ticketsSize)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := OpenTicketKeys(f); err == nil {
		t.Fatal("an empty region opened")
	}
	small, err := sealedMemfd("small", 64)
	if err != nil {
		t.Fatal(err)
	}
	defer small.Close()
	if _, err := OpenTicketKeys(small); err == nil {
		t.Fatal("a short region opened")
	}
}
