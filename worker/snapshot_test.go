package worker

import (
	"testing"
	"time"

	"coregate/admin/spec"
	"coregate/worker/router"
)

func TestCompileKeepaliveDefaults(t *testing.T) {
	plain, err := spec.DecodeRoute([]byte(`{"id":"1","uri":"/a","upstream":{"nodes":{"127.0.0.1:1980":1}}}`))
	if err != nil {
		t.Fatal(err)
	}
	own, err := spec.DecodeRoute([]byte(`{"id":"2","uri":"/b","upstream":{"nodes":{"127.0.0.1:1980":1},"keepalive_pool":{"size":7,"idle_timeout":3,"requests":9}}}`))
	if err != nil {
		t.Fatal(err)
	}
	s := &spec.Spec{Routes: []*spec.Route{plain, own}}
	snap, err := compile(s, router.HostURI, Keepalive{Size: 16, Idle: 5 * time.Second, Requests: 100}, pluginSet{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	a, b := snap.routes[0].up, snap.routes[1].up
	if a.kaSize != 16 || a.kaIdle != 5*time.Second || a.kaRequests != 100 {
		t.Errorf("config.yaml defaults not applied: %d %v %d", a.kaSize, a.kaIdle, a.kaRequests)
	}
	if b.kaSize != 7 || b.kaIdle != 3*time.Second || b.kaRequests != 9 {
		t.Errorf("keepalive_pool not honoured: %d %v %d", b.kaSize, b.kaIdle, b.kaRequests)
	}
	snap, err = Compile(s, router.HostURI)
	if err != nil {
		t.Fatal(err)
	}
	if a := snap.routes[0].up; a.kaSize != 320 || a.kaIdle != 60*time.Second || a.kaRequests != 1000 {
		t.Errorf("APISIX defaults: %d %v %d", a.kaSize, a.kaIdle, a.kaRequests)
	}
}

func TestCompileRefusesUnknownPlugins(t *testing.T) {
	r, err := spec.DecodeRoute([]byte(`{"id":"7","uri":"/a","plugins":{"no-such-plugin":{}},"upstream":{"nodes":{"127.0.0.1:1980":1}}}`))
	if err != nil {
		t.Fatal(err)
	}
	_, err = Compile(&spec.Spec{Routes: []*spec.Route{r}}, router.HostURI)
	if err == nil || err.Error() != "route 7: unknown plugin [no-such-plugin]" {
		t.Fatalf("err = %v", err)
	}
	svc, err := spec.DecodeService([]byte(`{"id":"s","plugins":{"from-service":{}}}`))
	if err != nil {
		t.Fatal(err)
	}
	r2, err := spec.DecodeRoute([]byte(`{"id":"8","uri":"/b","service_id":"s","upstream":{"nodes":{"127.0.0.1:1980":1}}}`))
	if err != nil {
		t.Fatal(err)
	}
	_, err = Compile(&spec.Spec{Routes: []*spec.Route{r2}, Services: []*spec.Service{svc}}, router.HostURI)
	if err == nil || err.Error() != "route 8: unknown plugin [from-service]" {
		t.Fatalf("service plugin: err = %v", err)
	}
	// An empty plugins object, as APISIX's benchmark routes have, is fine.
	r3, err := spec.DecodeRoute([]byte(`{"id":"9","uri":"/c","plugins":{},"upstream":{"nodes":{"127.0.0.1:1980":1}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Compile(&spec.Spec{Routes: []*spec.Route{r3}}, router.HostURI); err != nil {
		t.Fatal(err)
	}
}
