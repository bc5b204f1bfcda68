//go:build !race

package tlsrec

import (
	"bytes"
	"testing"
)

// TestAllocSealOpen guards the steady state of a Conn: SealV, Seal, Open,
// AppendPending and CloseNotify allocate nothing once the buffers have
// room, in every version and suite family.
func TestAllocSealOpen(t *testing.T) {
	for _, k := range []kase{cases[0], cases[1], cases[3]} {
		t.Run(k.name, func(t *testing.T) {
			cli, srv := connPairOf(t, k)
			req := pattern(200, 1)
			resp := pattern(1024, 2)
			head := resp[:100]
			wire := make([]byte, 0, 64<<10)
			plain := make([]byte, 0, 64<<10)
			parts := [][]byte{head, resp[100:]}
			round := func() {
				w := cli.Seal(wire[:0], req)
				out, used, err := srv.Open(plain[:0], w, cap(plain))
				if err != nil || used != len(w) || !bytes.Equal(out, req) {
					t.Fatalf("server Open: %v", err)
				}
				w = srv.SealV(wire[:0], parts)
				w = srv.AppendPending(w)
				out, used, err = cli.Open(plain[:0], w, cap(plain))
				if err != nil || used != len(w) || len(out) != len(resp) {
					t.Fatalf("client Open: %v", err)
				}
			}
			round()
			if a := testing.AllocsPerRun(200, round); a != 0 {
				t.Fatalf("a request and its response allocate %.1f times, want 0", a)
			}
			big := pattern(40000, 3)
			bigRound := func() {
				w := srv.Seal(wire[:0], big)
				out, _, err := cli.Open(plain[:0], w, cap(plain))
				if err != nil || len(out) != len(big) {
					t.Fatalf("big: %v", err)
				}
			}
			if a := testing.AllocsPerRun(50, bigRound); a != 0 {
				t.Fatalf("a 40000-byte message allocates %.1f times, want 0", a)
			}
			if a := testing.AllocsPerRun(1, func() { cli.CloseNotify(wire[:0]) }); a != 0 {
				t.Fatalf("CloseNotify allocates %.1f times", a)
			}
		})
	}
}
