package router

import (
	"fmt"
	"testing"
)

// benchRoutes returns n routes; kind "exact" gives /hello{i}, "prefix" gives
// /hello{i}/*, "mixed" gives both paths to each route.
func benchRoutes(n int, kind string) []Route {
	rs := make([]Route, n)
	for i := range rs {
		var uris []string
		switch kind {
		case "exact":
			uris = []string{fmt.Sprintf("/hello%d", i)}
		case "prefix":
			uris = []string{fmt.Sprintf("/hello%d/*", i)}
		default:
			uris = []string{fmt.Sprintf("/hello%d", i), fmt.Sprintf("/hello%d/*", i)}
		}
		rs[i] = Route{Index: i, URIs: uris, Methods: MethodGET}
	}
	return rs
}

func benchMatch(b *testing.B, n int) {
	for _, kind := range []string{"exact", "prefix"} {
		b.Run(kind, func(b *testing.B) {
			r, err := Build(benchRoutes(n, kind), HostURI)
			if err != nil {
				b.Fatal(err)
			}
			// The last route added: worst case for any scan.
			path := fmt.Sprintf("/hello%d", n-1)
			if kind == "prefix" {
				path += "/world"
			}
			req := &Request{Method: MethodGET, Path: []byte(path), Host: []byte("example.com")}
			if i, ok := r.Match(req); !ok || i != n-1 {
				b.Fatalf("Match = %d, %v", i, ok)
			}
			b.ReportAllocs()
			for b.Loop() {
				r.Match(req)
			}
		})
	}
}

func BenchmarkMatch1Routes(b *testing.B)    { benchMatch(b, 1) }
func BenchmarkMatch100Routes(b *testing.B)  { benchMatch(b, 100) }
func BenchmarkMatch5000Routes(b *testing.B) { benchMatch(b, 5000) }

func BenchmarkMatchHosts5000(b *testing.B) {
	rs := benchRoutes(5000, "exact")
	for i := range rs {
		rs[i].Hosts = []string{fmt.Sprintf("h%d.example.com", i), fmt.Sprintf("*.w%d.example.com", i)}
	}
	r, err := Build(rs, HostURI)
	if err != nil {
		b.Fatal(err)
	}
	req := &Request{Method: MethodGET, Path: []byte("/hello4999"), Host: []byte("x.W4999.example.com:8080")}
	if i, ok := r.Match(req); !ok || i != 4999 {
		b.Fatalf("Match = %d, %v", i, ok)
	}
	b.ReportAllocs()
	for b.Loop() {
		r.Match(req)
	}
}

func BenchmarkBuild5000Routes(b *testing.B) {
	rs := benchRoutes(5000, "mixed")
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Build(rs, HostURI); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkUpdate changes routes of a Router of n (routes "mixed": an
// exact path and a prefix each, as BenchmarkBuild5000Routes), one at a
// time and 400 at once, each change made from the Router the one before
// made, against a Build of the same routes from scratch.
func BenchmarkUpdate(b *testing.B) {
	for _, n := range []int{5000, 20000, 50000} {
		rs := benchRoutes(n, "mixed")
		for i := range rs {
			rs[i].Order = uint64(i + 1)
		}
		base, err := Build(rs, HostURI)
		if err != nil {
			b.Fatal(err)
		}
		// Route i's two versions: its paths, and others of its own.
		other := func(i int) Route {
			r := rs[i]
			r.URIs = []string{fmt.Sprintf("/changed%d", i), fmt.Sprintf("/changed%d/*", i)}
			return r
		}
		change := func(b *testing.B, k int) {
			old, neu := make([]Route, k), make([]Route, k)
			for j := range k {
				i := j * (n / k)
				old[j], neu[j] = rs[i], other(i)
			}
			cur := base
			b.ReportAllocs()
			for b.Loop() {
				next, err := cur.Update(old, neu)
				if err != nil {
					b.Fatal(err)
				}
				cur, old, neu = next, neu, old
			}
		}
		b.Run(fmt.Sprintf("one-of-%d", n), func(b *testing.B) { change(b, 1) })
		b.Run(fmt.Sprintf("400-of-%d", n), func(b *testing.B) { change(b, 400) })
		b.Run(fmt.Sprintf("build-%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Build(rs, HostURI); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
