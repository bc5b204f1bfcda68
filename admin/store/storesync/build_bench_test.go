package storesync

import (
	"fmt"
	"testing"

	"coregate/admin/store"
	"coregate/admin/store/etcdstore"
)

// BenchmarkBuild5000 is the cost of a whole build on a node with 5 000
// routes: the Spec built again from the decoded objects (order, references,
// hash), which a change pays when its Spec cannot be made from the last
// one's (buildFrom; BenchmarkBuildChange). The store is never called (it
// does not connect until used).
func BenchmarkBuild5000(b *testing.B) {
	s := New(Options{Store: unconnectedStore(b)})
	for i := range 5000 {
		s.put(store.KV{
			Key:            fmt.Sprintf("/apisix/routes/%d", i),
			Value:          fmt.Appendf(nil, `{"uri":"/r%d","upstream":{"type":"roundrobin","nodes":{"127.0.0.1:1980":1}}}`, i),
			CreateRevision: int64(i + 1),
		})
	}
	b.ReportAllocs()
	for b.Loop() {
		s.last = nil // the whole build
		sp, err := s.build()
		if err != nil || len(sp.Routes) != 5000 {
			b.Fatal(err)
		}
	}
}

// unconnectedStore is a store for a Syncer whose objects a test puts
// itself: it points at a port nothing listens on, and is never called.
func unconnectedStore(tb testing.TB) *etcdstore.Store {
	tb.Helper()
	st, err := etcdstore.New(etcdstore.Options{Endpoints: []string{"http://127.0.0.1:1"}})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { st.Close() })
	return st
}

// BenchmarkBuildChange is the supervisor's cost of one changed route on
// a node with n routes and 20 000 upstreams, the routes referring to them
// by upstream_id, each with two plugins: the object put as the watch
// puts it, then the Spec built (build) and the Modified indexes set
// (setIndexes), as publish does before it hands the Spec on. one-of-n
// replaces a route (a PUT of one that exists), add-to-50000 adds one
// after the others (a bulk load's), add-10-to-50000 adds ten after the
// others, coalesced into one build (a bulk load's, several PUTs in
// flight: the watch hands on a batch of them a build; ns/op is a build's,
// for ten routes), delete-one-of-50000 deletes one (a
// DELETE; the route is put back after the others, as a new one, outside
// the time measured, so that the routes stay 50 000), and
// delete-then-put-of-50000 deletes one and puts it back as a new one
// before the build (a DELETE and a PUT coalesced).
func BenchmarkBuildChange(b *testing.B) {
	setup := func(b *testing.B, n int) (s *Syncer, rev int64, route func(i int, v int64) []byte) {
		s = New(Options{Store: unconnectedStore(b)})
		for i := range 20000 {
			rev++
			s.put(store.KV{
				Key:            fmt.Sprintf("/apisix/upstreams/u%d", i),
				Value:          fmt.Appendf(nil, `{"type":"roundrobin","nodes":{"127.0.0.1:%d":1}}`, 2000+i),
				CreateRevision: rev, ModRevision: rev,
			})
		}
		route = func(i int, v int64) []byte {
			return fmt.Appendf(nil, `{"uri":"/r%d","upstream_id":"u%d","plugins":{"proxy-rewrite":{"uri":"/v%d"},`+
				`"response-rewrite":{"headers":{"set":{"X-Route":"r%d"}}}}}`, i, i%20000, v, i)
		}
		for i := range n {
			rev++
			s.put(store.KV{Key: fmt.Sprintf("/apisix/routes/%d", i), Value: route(i, rev), CreateRevision: rev, ModRevision: rev})
		}
		if _, err := s.build(); err != nil {
			b.Fatal(err)
		}
		return s, rev, route
	}
	// build builds the Spec of s as the watch does, and checks it has
	// want routes.
	build := func(b *testing.B, s *Syncer, want int) {
		sp, err := s.build()
		if err != nil || len(sp.Routes) != want {
			b.Fatal(err)
		}
		s.setIndexes()
	}
	// del deletes route k as the watch does, and put puts route k as a
	// new one, after the others.
	del := func(s *Syncer, rev int64, k int) {
		s.apply(store.Event{Type: store.EventDelete, KV: store.KV{Key: fmt.Sprintf("/apisix/routes/%d", k), ModRevision: rev}})
	}
	put := func(s *Syncer, rev int64, k int, route func(i int, v int64) []byte) {
		s.put(store.KV{Key: fmt.Sprintf("/apisix/routes/%d", k), Value: route(k, rev), CreateRevision: rev, ModRevision: rev})
	}
	for _, n := range []int{5000, 20000, 50000} {
		b.Run(fmt.Sprintf("one-of-%d", n), func(b *testing.B) {
			s, rev, route := setup(b, n)
			first := rev - int64(n) + 1
			b.ReportAllocs()
			i := 0
			for ; b.Loop(); i++ {
				rev++
				k := i * 7919 % n
				s.put(store.KV{Key: fmt.Sprintf("/apisix/routes/%d", k), Value: route(k, rev), CreateRevision: first + int64(k), ModRevision: rev})
				build(b, s, n)
			}
		})
	}
	b.Run("add-to-50000", func(b *testing.B) {
		const n = 50000
		s, rev, route := setup(b, n)
		b.ReportAllocs()
		i := n
		for ; b.Loop(); i++ {
			rev++
			put(s, rev, i, route)
			build(b, s, i+1)
		}
	})
	b.Run("add-10-to-50000", func(b *testing.B) {
		const n = 50000
		s, rev, route := setup(b, n)
		b.ReportAllocs()
		i := n
		for b.Loop() {
			for range 10 {
				rev++
				put(s, rev, i, route)
				i++
			}
			build(b, s, i)
		}
	})
	b.Run("delete-one-of-50000", func(b *testing.B) {
		const n = 50000
		s, rev, route := setup(b, n)
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			rev++
			k := i * 7919 % n
			del(s, rev, k)
			build(b, s, n-1)
			b.StopTimer()
			rev++
			put(s, rev, k, route)
			if sp, err := s.build(); err != nil || len(sp.Routes) != n {
				b.Fatal(err)
			}
			b.StartTimer()
		}
	})
	b.Run("delete-then-put-of-50000", func(b *testing.B) {
		const n = 50000
		s, rev, route := setup(b, n)
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			rev++
			k := i * 7919 % n
			del(s, rev, k)
			rev++
			put(s, rev, k, route)
			build(b, s, n)
		}
	})
}
