package worker

import (
	"bytes"
	"testing"

	"coregate/admin/spec"
	"coregate/worker/router"
)

// groupSpec is a route with an authentication plugin, the consumer group
// g1 and its consumers: jack (in g1, with a plugin of his own), rose (in
// g1, none of her own) and ann (in no group).
func groupSpec(t *testing.T, group string) *spec.Spec {
	t.Helper()
	s := pluginSpec(t,
		[]string{`{"id":"r1","uri":"/a","plugins":{"p-auth":{},"p-lo":{"resp_header":{"X-Who":"route"}}},"upstream":{"nodes":{"127.0.0.1:1980":1}}}`},
		nil, nil, nil)
	s.ConsumerGroups = []*spec.ConsumerGroup{mustDecode(t, spec.DecodeConsumerGroup, group)}
	for _, c := range []string{
		`{"username":"jack","group_id":"g1","plugins":{"p-auth":{"key":"k1"},"p-lo":{"resp_header":{"X-Who":"jack"}}}}`,
		`{"username":"rose","group_id":"g1","plugins":{"p-auth":{"key":"k2"}}}`,
		`{"username":"ann","plugins":{"p-auth":{"key":"k3"}}}`,
	} {
		s.Consumers = append(s.Consumers, mustDecode(t, spec.DecodeConsumer, c))
	}
	if err := s.Check(); err != nil {
		t.Fatal(err)
	}
	return s
}

// TestConsumerGroupMerge: a consumer's group's plugins are merged under
// the consumer's own and over the route's (APISIX's
// merge_consumer_route), and a new configuration that changes only the
// group changes what its consumers run, the consumers untouched.
func TestConsumerGroupMerge(t *testing.T) {
	s1 := groupSpec(t, `{"id":"g1","plugins":{"p-lo":{"resp_header":{"X-Who":"group"}},"p-mid":{}}}`)
	rec := &recorder{events: make([]string, 0, 256), seen: make([]byte, 0, 4096)}
	w := New(Config{Listen: []string{"127.0.0.1:0"}})
	ps := pluginSet{reg: probeRegistry(rec), env: w.cfg.Plugins}
	snap1, err := compile(s1, router.HostURI, upstreamEnv{}, ps, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	h := newHarnessSnap(t, w, snap1)
	check := func(key, who string, mid bool) {
		t.Helper()
		rec.reset()
		_, got := h.roundTrip([]byte("GET /a HTTP/1.1\r\nHost: x\r\nk: "+key+"\r\n\r\n"), []byte(upOK))
		if !bytes.Contains(got, []byte("\r\nX-Who: "+who+"\r\n")) {
			t.Fatalf("key %s: want X-Who %s, answer\n%s", key, who, got)
		}
		ran := false
		for _, e := range rec.events {
			ran = ran || e == "p-mid:access"
		}
		if ran != mid {
			t.Fatalf("key %s: p-mid ran %v, want %v (%v)", key, ran, mid, rec.events)
		}
	}
	check("k1", "jack", true)  // his own p-lo wins over the group's
	check("k2", "group", true) // the group's over the route's
	check("k3", "route", false)

	// The group changes; the consumers and the route are the same objects.
	s2 := *s1
	s2.ConsumerGroups = []*spec.ConsumerGroup{mustDecode(t, spec.DecodeConsumerGroup,
		`{"id":"g1","plugins":{"p-lo":{"resp_header":{"X-Who":"group2"}}}}`)}
	snap2, err := compile(&s2, router.HostURI, upstreamEnv{}, ps, snap1, nil)
	if err != nil {
		t.Fatal(err)
	}
	w.SetSnapshot(snap2)
	check("k1", "jack", false)
	check("k2", "group2", false)
	check("k3", "route", false)
}
