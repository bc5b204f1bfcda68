package main

import (
	"fmt"
	"testing"
	"time"

	"coregate/admin/adminapi"
)

// TestAdminAPIRouteChanges changes routes of a running node through the
// Admin API in rounds (routes replaced, deleted, created on the paths of
// deleted ones, a route's priority raised over another on its path),
// each built by the worker from the snapshot it serves, its router
// updated for the changed routes only and the new routes put in the
// slots of the deleted ones; after each round every path answers from
// the upstream its route has now, and a deleted route's path 404.
func TestAdminAPIRouteChanges(t *testing.T) {
	var ups [3]interface{ Addr() string }
	for i := range ups {
		ups[i] = textUpstream(t, fmt.Sprint("upstream ", i))
	}
	adminPort := freePort(t)
	g := startSupervisor(t, "", etcdConfig(adminPort, adminapi.LegacyAdminKey), 1)
	c := newClient(t)
	admin := legacyAdmin(adminPort)
	want := map[string]int{} // path → upstream, -1: none
	put := func(id, uri string, up, priority int) {
		t.Helper()
		body := fmt.Sprintf(`{"uri":%q,"priority":%d,"upstream":{"type":"roundrobin","nodes":{%q:1}}}`, uri, priority, ups[up].Addr())
		if r := admin.do(t, c, "PUT", "routes/"+id, body); r.status != 200 && r.status != 201 {
			t.Fatalf("PUT routes/%s: %d %s", id, r.status, r.body)
		}
	}
	del := func(id string) {
		t.Helper()
		if r := admin.do(t, c, "DELETE", "routes/"+id, ""); r.status != 200 {
			t.Fatalf("DELETE routes/%s: %d %s", id, r.status, r.body)
		}
	}
	check := func(round string) {
		t.Helper()
		eventually(t, 10*time.Second, func() error {
			for path, up := range want {
				r := do(t, c, "GET", g.url(path), "", nil, nil)
				switch {
				case up < 0 && r.status != 404:
					return fmt.Errorf("%s: GET %s = %d %q, want 404", round, path, r.status, r.body)
				case up >= 0 && (r.status != 200 || r.body != fmt.Sprint("upstream ", up)):
					return fmt.Errorf("%s: GET %s = %d %q, want upstream %d", round, path, r.status, r.body, up)
				}
			}
			return nil
		})
	}
	for i := range 30 {
		path := fmt.Sprint("/r", i)
		put(fmt.Sprint(i), path, i%3, 0)
		want[path] = i % 3
	}
	check("created")
	for _, i := range []int{3, 10, 17} {
		del(fmt.Sprint(i))
		want[fmt.Sprint("/r", i)] = -1
	}
	for _, i := range []int{4, 11} {
		put(fmt.Sprint(i), fmt.Sprint("/r", i), (i+1)%3, 0)
		want[fmt.Sprint("/r", i)] = (i + 1) % 3
	}
	check("replaced and deleted")
	// New routes, which take the deleted ones' slots: one on a deleted
	// path, one beside route 5 on its path with a higher priority, one
	// on a path of its own.
	put("new-a", "/r3", 2, 0)
	want["/r3"] = 2
	put("new-b", "/r5", (5+1)%3, 10)
	want["/r5"] = (5 + 1) % 3
	put("new-c", "/fresh", 1, 0)
	want["/fresh"] = 1
	check("created again")
	// Route new-b deleted: route 5 answers its path again.
	del("new-b")
	want["/r5"] = 5 % 3
	check("the higher priority gone")
}
