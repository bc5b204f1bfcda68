//go:build !race

package worker

import (
	"bytes"
	"testing"
)

// TestAllocTrafficSplit: a request through a route whose traffic-split
// chooses, in turn, the route's own upstream and an inline one (the same
// node, its own pass_host: the Host sent tells which went) allocates
// nothing: the rules, the round robin, Ctx.SetUpstream and the route's
// variant included.
func TestAllocTrafficSplit(t *testing.T) {
	h := realHarness(t, []string{
		`{"id":"r1","uri":"/a","plugins":{"traffic-split":{"rules":[{"match":[{"vars":[["http_x-user","~~","^[a-z]+$"]]}],"weighted_upstreams":[` +
			`{"weight":1},{"upstream":{"nodes":{"127.0.0.1:1980":1},"pass_host":"rewrite","upstream_host":"split.example"},"weight":1}]}]}},` +
			`"upstream":{"nodes":{"127.0.0.1:1980":1}}}`,
	}, nil, nil)
	req := []byte("GET /a HTTP/1.1\r\nHost: h\r\nX-User: ann\r\n\r\n")
	hosts := map[string]int{}
	for range 10 {
		up, got := h.roundTrip(req, []byte(upOK))
		if !bytes.HasSuffix(got, []byte("\r\n\r\nok")) {
			t.Fatalf("answer\n%s", got)
		}
		switch {
		case bytes.Contains(up, []byte("\r\nHost: split.example\r\n")):
			hosts["split"]++
		case bytes.Contains(up, []byte("\r\nHost: h\r\n")):
			hosts["route"]++
		default:
			t.Fatalf("upstream head:\n%s", upHead(up))
		}
	}
	if hosts["split"] != 5 || hosts["route"] != 5 {
		t.Fatalf("weights 1:1 over 10 requests: %v", hosts)
	}
	if allocs := testing.AllocsPerRun(200, func() { h.roundTrip(req, []byte(upOK)) }); allocs != 0 {
		t.Errorf("%.1f allocations per request, want 0", allocs)
	}
}
