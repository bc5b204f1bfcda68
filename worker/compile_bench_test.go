package worker

import (
	"fmt"
	"testing"

	"coregate/admin/spec"
	"coregate/worker/router"
)

// BenchmarkCompile5000 compiles a configuration of 5 000 routes, each
// with its own upstream, as a worker does for every configuration of a
// node that size (the decode aside: control.BenchmarkDecodeSpec5000).
func BenchmarkCompile5000(b *testing.B) {
	s := &spec.Spec{}
	for i := range 5000 {
		r, err := spec.DecodeRoute(fmt.Appendf(nil, `{"id":"r%d","uri":"/bulk/%d","upstream":{"type":"roundrobin","nodes":{"127.0.0.1:1980":1}}}`, i, i))
		if err != nil {
			b.Fatal(err)
		}
		s.Routes = append(s.Routes, r)
	}
	w := New(Config{Listen: []string{"127.0.0.1:0"}})
	b.ReportAllocs()
	for b.Loop() {
		if _, err := compile(s, router.HostURI, Keepalive{}, pluginSet{env: w.cfg.Plugins}, nil); err != nil {
			b.Fatal(err)
		}
	}
}
