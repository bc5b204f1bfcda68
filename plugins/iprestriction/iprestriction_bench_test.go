package iprestriction

import (
	"math/rand/v2"
	"net/netip"
	"strconv"
	"testing"

	"coregate/plugins/plugintest"
)

// randomPrefixes makes n random prefixes of one family, /8 to /32 (IPv4)
// or /16 to /128 (IPv6).
func randomPrefixes(rnd *rand.Rand, n int, v6 bool) []netip.Prefix {
	ps := make([]netip.Prefix, 0, n)
	for range n {
		if v6 {
			var b [16]byte
			for i := range b {
				b[i] = byte(rnd.Uint32())
			}
			ps = append(ps, netip.PrefixFrom(netip.AddrFrom16(b), 16+rnd.IntN(113)).Masked())
			continue
		}
		a := netip.AddrFrom4([4]byte{byte(rnd.Uint32()), byte(rnd.Uint32()), byte(rnd.Uint32()), byte(rnd.Uint32())})
		ps = append(ps, netip.PrefixFrom(a, 8+rnd.IntN(25)).Masked())
	}
	return ps
}

// BenchmarkLookup: one Set.Contains, by the number of CIDRs of the list
// and the client's family; the addresses looked up are random, inside
// and outside the set.
func BenchmarkLookup(b *testing.B) {
	for _, v6 := range []bool{false, true} {
		family := "v4"
		if v6 {
			family = "v6"
		}
		for _, n := range []int{1, 100, 10000} {
			b.Run(family+"/cidrs="+strconv.Itoa(n), func(b *testing.B) {
				rnd := rand.New(rand.NewPCG(uint64(n), 7))
				ps := randomPrefixes(rnd, n, v6)
				s := NewSet(append([]netip.Prefix(nil), ps...))
				// Half the addresses in a listed prefix, half random.
				addrs := make([]netip.Addr, 1024)
				for i := range addrs {
					p := ps[rnd.IntN(len(ps))]
					addrs[i] = p.Addr()
					if i%2 == 1 {
						addrs[i] = randomPrefixes(rnd, 1, v6)[0].Addr()
					}
				}
				b.ReportAllocs()
				hits, i := 0, 0
				for b.Loop() {
					if s.Contains(addrs[i&1023]) {
						hits++
					}
					i++
				}
				if hits == 0 {
					b.Fatal("no address was found")
				}
			})
		}
	}
}

// BenchmarkAccess: one request through the plugin's access phase,
// $remote_addr's text parsed and looked up in a whitelist of 10 000
// CIDRs.
func BenchmarkAccess(b *testing.B) {
	rnd := rand.New(rand.NewPCG(3, 4))
	list := `"127.0.0.1"`
	for _, p := range randomPrefixes(rnd, 9999, false) {
		list += `,"` + p.String() + `"`
	}
	p := build(b, `{"whitelist":[`+list+`]}`)
	c := plugintest.NewCtx("GET", "/hello").WithVar("remote_addr", "127.0.0.1")
	b.ReportAllocs()
	for b.Loop() {
		c.Reset()
		plugintest.Run(p, c)
	}
	if c.Exited() {
		b.Fatal("refused")
	}
}
