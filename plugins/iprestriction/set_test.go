package iprestriction

import (
	"math/rand/v2"
	"net/netip"
	"testing"

	"coregate/admin/spec"
)

func mustPrefixes(t testing.TB, ss ...string) []netip.Prefix {
	t.Helper()
	var ps []netip.Prefix
	for _, s := range ss {
		p, ok := spec.ParseIPOrCIDR(s)
		if !ok {
			t.Fatalf("%q does not parse", s)
		}
		ps = append(ps, p)
	}
	return ps
}

// TestSetMerges: overlapping, nested and adjacent prefixes become one
// range; the edges of each range are in, the addresses beside them out.
func TestSetMerges(t *testing.T) {
	s := NewSet(mustPrefixes(t, "10.0.0.0/24", "10.0.1.0/24", "10.0.0.128/25", "10.0.3.0/24",
		"255.255.255.255", "::/1", "8000::/1", "2001:db8::1"))
	if len(s.v4) != 3 || len(s.v6) != 1 {
		t.Fatalf("ranges: v4 %v, v6 %v", s.v4, s.v6)
	}
	for addr, want := range map[string]bool{
		"10.0.0.0": true, "10.0.1.255": true, "10.0.2.0": false, "9.255.255.255": false,
		"10.0.3.0": true, "10.0.3.255": true, "10.0.4.0": false,
		"255.255.255.255": true, "255.255.255.254": false, "0.0.0.0": false,
		"::": true, "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff": true, "::ffff:10.0.0.1": true,
	} {
		if got := s.Contains(netip.MustParseAddr(addr)); got != want {
			t.Errorf("%s: %v, want %v", addr, got, want)
		}
	}
	if (&Set{}).Contains(netip.MustParseAddr("1.2.3.4")) || NewSet(nil).Contains(netip.Addr{}) {
		t.Error("the empty set holds an address")
	}
}

// TestSetAgainstPrefixes: for random prefixes of both families and random
// addresses near and far from them, Contains answers as a scan of
// netip.Prefix.Contains does.
func TestSetAgainstPrefixes(t *testing.T) {
	rnd := rand.New(rand.NewPCG(1, 2))
	randAddr := func(v6 bool) netip.Addr {
		if v6 {
			var b [16]byte
			// A narrow top so that prefixes and addresses meet.
			b[0] = 0x20
			for i := 1; i < 16; i++ {
				b[i] = byte(rnd.IntN(4))
			}
			return netip.AddrFrom16(b)
		}
		return netip.AddrFrom4([4]byte{10, byte(rnd.IntN(4)), byte(rnd.IntN(256)), byte(rnd.IntN(256))})
	}
	for round := range 200 {
		var ps []netip.Prefix
		for range 1 + rnd.IntN(40) {
			v6 := rnd.IntN(2) == 0
			a := randAddr(v6)
			ps = append(ps, netip.PrefixFrom(a, rnd.IntN(a.BitLen()+1)).Masked())
		}
		s := NewSet(append([]netip.Prefix(nil), ps...))
		for range 500 {
			a := randAddr(rnd.IntN(2) == 0)
			want := false
			for _, p := range ps {
				want = want || p.Contains(a)
			}
			if got := s.Contains(a); got != want {
				t.Fatalf("round %d: %s in %v: %v, want %v", round, a, ps, got, want)
			}
		}
	}
}
