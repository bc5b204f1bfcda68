package storesync

import (
	"fmt"
	"testing"

	"coregate/admin/store"
	"coregate/admin/store/etcdstore"
)

// BenchmarkBuild5000 is the cost of one change on a node with 5 000
// routes: the Spec built again from the decoded objects (order, references,
// hash), which every coalesced burst of events pays. The store is never
// called (it does not connect until used).
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
