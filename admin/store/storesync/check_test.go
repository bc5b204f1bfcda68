package storesync

import (
	"context"
	"strings"
	"testing"

	"coregate/plugins"
)

// TestCheck: Check names every object the sync would leave out (a plugin
// configuration refused, a reference that dangles) by its key, counts the
// others, and finds nothing once they are gone.
func TestCheck(t *testing.T) {
	e := newEnv(t)
	e.put("routes/1", route("/one"))
	e.put("routes/bad-conf", `{"uri":"/b","plugins":{"limit-count":{"count":-5,"time_window":60}},"upstream":{"nodes":{"127.0.0.1:1980":1}}}`)
	e.put("routes/dangling", `{"uri":"/d","service_id":"nope"}`)
	s := New(Options{Store: e.store, Plugins: plugins.Default, Log: testLog(t)})
	n, sp, err := s.Check(context.Background())
	if err == nil || !strings.Contains(err.Error(), "/apisix/routes/bad-conf") || !strings.Contains(err.Error(), "limit-count") ||
		!strings.Contains(err.Error(), "dangling") || strings.Contains(err.Error(), "routes/1 ") {
		t.Errorf("Check: %v", err)
	}
	if n != 2 { // routes/1 and routes/dangling pass their own checks
		t.Errorf("Check counted %d objects, want 2", n)
	}
	if got := routeIDs(sp); got != "[1]" {
		t.Errorf("Check's Spec has routes %s, want [1]", got)
	}
	e.del("routes/bad-conf")
	e.del("routes/dangling")
	if n, _, err := New(Options{Store: e.store, Plugins: plugins.Default, Log: testLog(t)}).Check(context.Background()); err != nil || n != 1 {
		t.Errorf("Check of a sound store: %d, %v", n, err)
	}
}
