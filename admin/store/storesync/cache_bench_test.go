package storesync

import (
	"fmt"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"

	"coregate/admin/spec"
	"coregate/admin/store"
)

// adminSyncer is a Syncer (no store called, no plugin registry) holding
// bench admin's configuration of issue 41 at n routes: 20 000 upstreams
// of one node, then n routes each with two plugins (proxy-rewrite,
// response-rewrite) and an upstream_id, stamped as the Admin API stamps
// them. change(i) rewrites route i at a new revision (its proxy-rewrite
// uri), as bench admin's changes do, in its place.
func adminSyncer(b *testing.B, n int) (s *Syncer, change func(i int)) {
	s = New(Options{Store: unconnectedStore(b), CachePath: filepath.Join(b.TempDir(), CacheFile)})
	rev := int64(0)
	for i := range 20000 {
		rev++
		s.put(store.KV{
			Key:            fmt.Sprintf("/apisix/upstreams/u%d", i),
			Value:          fmt.Appendf(nil, `{"id":"u%d","type":"roundrobin","nodes":{"127.0.0.1:%d":1},"create_time":1765000000,"update_time":1765000000}`, i, 2000+i),
			CreateRevision: rev, ModRevision: rev,
		})
	}
	route := func(i int, v int64) []byte {
		return fmt.Appendf(nil, `{"id":"r%d","uri":"/bulk/%d","plugins":{"proxy-rewrite":{"uri":"/v%d/%d"},`+
			`"response-rewrite":{"headers":{"set":{"X-Route":"r%d"}}}},"upstream_id":"u%d",`+
			`"create_time":1765000000,"update_time":%d}`, i, i, v, i, i, i%20000, 1765000000+v)
	}
	first := rev + 1
	for i := range n {
		rev++
		s.put(store.KV{Key: fmt.Sprintf("/apisix/routes/r%d", i), Value: route(i, rev), CreateRevision: rev, ModRevision: rev})
	}
	s.rev = rev
	return s, func(i int) {
		rev++
		s.put(store.KV{Key: fmt.Sprintf("/apisix/routes/r%d", i), Value: route(i, rev), CreateRevision: first + int64(i), ModRevision: rev})
		s.rev = rev
	}
}

// BenchmarkWriteCache is the supervisor's cost of one write of the local
// copy (writeCacheAt: encoding, file, fsync, rename) of bench admin's
// configuration at 5 000 and 50 000 routes (adminSyncer): "first", of a
// Spec none of whose objects was written before (every object encoded);
// "change", of a Spec one route of which changed since the last write,
// as during a bulk load (the copy written once a second); "load", a first
// write as Load makes it (whole, its JSON form kept for the workers'
// Config frame: writeCache). cpu-ns/op is the process's CPU (getrusage:
// the collector's included, not the disk's wait); B/op and allocs/op the
// garbage (each write starts after a collection); kept-B/route, at the
// end of "change", the heap held beyond the Syncer's objects and what it
// held before its first write, per route, after a collection: what the
// writes keep.
func BenchmarkWriteCache(b *testing.B) {
	for _, n := range []int{5000, 50000} {
		s, change := adminSyncer(b, n)
		heap := func() uint64 {
			var m runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&m)
			return m.HeapAlloc
		}
		if _, err := s.build(); err != nil {
			b.Fatal(err)
		}
		h0 := heap() // before any write
		writeFirst(b, "first", n, s, change, false)
		b.Run(fmt.Sprintf("change-%d", n), func(b *testing.B) {
			if sp, err := s.build(); err != nil {
				b.Fatal(err)
			} else {
				s.writeCacheAt(sp, origin{s.rev, 0}, false)
			}
			i := 0
			b.ReportAllocs()
			var cpu int64
			for b.Loop() {
				b.StopTimer()
				change(i * 7919 % n)
				i++
				sp, err := s.build()
				if err != nil {
					b.Fatal(err)
				}
				runtime.GC()
				b.StartTimer()
				c0 := rusageCPU()
				s.writeCacheAt(sp, origin{s.rev, 0}, false)
				cpu += rusageCPU() - c0
			}
			b.ReportMetric(float64(cpu)/float64(i), "cpu-ns/op")
			b.StopTimer()
			b.ReportMetric((float64(heap())-float64(h0))/float64(n), "kept-B/route")
		})
		// After change: the forms kept for the workers (whole) are held by
		// hash, beyond what change measures.
		writeFirst(b, "load", n, s, change, true)
	}
}

// rusageCPU is the process's CPU time so far, user and system, in ns.
func rusageCPU() int64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// writeFirst is BenchmarkWriteCache's name-n: writes of s's Spec after a
// change each, none of its objects written before (every object
// encoded), whole (as Load writes it) or streamed.
func writeFirst(b *testing.B, name string, n int, s *Syncer, change func(int), whole bool) {
	b.Run(fmt.Sprintf("%s-%d", name, n), func(b *testing.B) {
		i := 0
		b.ReportAllocs()
		var cpu int64
		for b.Loop() {
			b.StopTimer()
			change(i * 7919 % n) // a Spec of its own hash
			i++
			sp, err := s.build()
			if err != nil {
				b.Fatal(err)
			}
			s.enc = spec.Encoder{} // none of its objects written before
			runtime.GC()
			b.StartTimer()
			c0 := rusageCPU()
			s.writeCacheAt(sp, origin{s.rev, 0}, whole)
			cpu += rusageCPU() - c0
		}
		b.ReportMetric(float64(cpu)/float64(i), "cpu-ns/op")
	})
}
