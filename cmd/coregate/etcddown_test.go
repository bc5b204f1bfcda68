package main

import (
	"fmt"
	"testing"
	"time"
)

// TestEtcdDownAtStartAnswers503: a node started while its etcd is down
// serves its local copy, and its Admin API answers 503 at once, reads
// and writes alike, from its first failed read of etcd on, where each
// call waited deployment.etcd.timeout (10 s here; a write the 5 s of the
// first read) because the node had never seen etcd answer.
func TestEtcdDownAtStartAnswers503(t *testing.T) {
	t.Parallel()
	n := startExternalNode(t, 10)
	g, c, admin := n.g, n.c, n.admin
	eventually(t, 10*time.Second, func() error {
		if r := do(t, c, "GET", g.url("/one"), "", nil, nil); r.status != 200 {
			return fmt.Errorf("GET /one = %d", r.status)
		}
		return nil
	})

	g.stopped.Store(true)
	g.stop() // the local copy is written as the node stops
	n.etcd.Kill()
	g2 := g.restart(t, 1)
	if r := do(t, c, "GET", g2.url("/one"), "", nil, nil); r.status != 200 || r.body != "up" {
		t.Fatalf("from the local copy: GET /one = %d %q", r.status, r.body)
	}
	for _, call := range []struct{ method, path, body string }{
		{"GET", "routes/1", ""},
		{"GET", "routes", ""},
		{"PUT", "routes/2", n.route("/two")},
		{"DELETE", "routes/1", ""},
	} {
		start := time.Now()
		r := admin.do(t, c, call.method, call.path, call.body)
		if took := time.Since(start); r.status != 503 || took > 2*time.Second {
			t.Errorf("%s %s with etcd never reached: %d %s after %v, want 503 at once", call.method, call.path, r.status, r.body, took)
		}
	}
}
