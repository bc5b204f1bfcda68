//go:build !race

package spec

import "testing"

// The Effective* helpers and accessors are read when snapshots are
// compiled, once per object; they must not allocate.
func TestHelpersDoNotAllocate(t *testing.T) {
	r, err := DecodeRoute([]byte(`{"id":1,"uris":["/a","/b"],"hosts":["h"],"remote_addrs":["::1"],"priority":3,"status":1,
		"upstream":{"nodes":{"a:1":1,"b:2":1},"keepalive_pool":{"size":8}}}`))
	if err != nil {
		t.Fatal(err)
	}
	// One uri: AllURIs is a view of it, where it was a list made anew.
	one, err := DecodeRoute([]byte(`{"id":2,"uri":"/c","upstream":{"nodes":{"a:1":1}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if got := one.AllURIs(); len(got) != 1 || got[0] != "/c" {
		t.Fatalf("AllURIs of uri /c = %q", got)
	}
	u := r.Upstream
	var sink int
	allocs := testing.AllocsPerRun(100, func() {
		if r.Enabled() {
			sink++
		}
		sink += r.EffectivePriority() + len(r.AllURIs()) + len(one.AllURIs()) + len(r.AllHosts()) + len(r.AllRemoteAddrs())
		sink += u.EffectiveRetries() + len(u.EffectiveType()) + len(u.EffectiveScheme()) + len(u.EffectivePassHost())
		size, idle, req := u.EffectiveKeepalive()
		sink += size + int(idle) + req + len(r.ID.String())
		if r.ID.IsZero() {
			sink++
		}
	})
	if allocs != 0 {
		t.Fatalf("helpers allocate %v times per run, want 0", allocs)
	}
	_ = sink
}
