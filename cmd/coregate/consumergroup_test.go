package main

import (
	"fmt"
	"testing"
	"time"

	"coregate/admin/adminapi"
)

// TestConsumerGroupLimitCount: through the real binary, a consumer takes
// its consumer group's limit-count (APISIX's t/node/consumer-group.t),
// a consumer outside the group does not, and changing the group's plugins
// changes what its consumer gets, the consumer untouched.
func TestConsumerGroupLimitCount(t *testing.T) {
	t.Parallel()
	up := headEchoUpstream(t)
	adminPort := freePort(t)
	g := startSupervisor(t, "", etcdConfig(adminPort, adminapi.LegacyAdminKey), 1)
	c := newClient(t)
	admin := legacyAdmin(adminPort)
	send := func(method, path, body string, want int) {
		t.Helper()
		if r := admin.do(t, c, method, path, body); r.status != want {
			t.Fatalf("%s %s: %d %s, want %d", method, path, r.status, r.body, want)
		}
	}
	get := func(key string) int {
		t.Helper()
		return do(t, c, "GET", g.url("/cg"), "", map[string]string{"apikey": key}, nil).status
	}
	send("PUT", "consumer_groups/company_a",
		`{"plugins":{"limit-count":{"count":2,"time_window":60,"rejected_code":503,"key":"remote_addr"}}}`, 201)
	send("PUT", "consumers", `{"username":"jack","group_id":"company_a","plugins":{"key-auth":{"key":"jack-key"}}}`, 201)
	send("PUT", "consumers", `{"username":"rose","plugins":{"key-auth":{"key":"rose-key"}}}`, 201)
	send("PUT", "routes/1", fmt.Sprintf(`{"uri":"/cg","plugins":{"key-auth":{}},"upstream":{"nodes":{%q:1}}}`, up.Addr()), 201)
	// rose was written after jack: once she is served, so is he.
	eventually(t, 10*time.Second, func() error {
		if s := get("rose-key"); s != 200 {
			return fmt.Errorf("rose: %d", s)
		}
		return nil
	})
	for i, want := range []int{200, 200, 503, 503} {
		if s := get("jack-key"); s != want {
			t.Fatalf("jack's request %d: %d, want %d", i+1, s, want)
		}
	}
	for i := range 5 {
		if s := get("rose-key"); s != 200 {
			t.Fatalf("rose's request %d (in no group): %d", i+1, s)
		}
	}

	// The group's limit changes; jack is not written again. The first
	// request that is not the old limit's 503 is the new one's first.
	send("PATCH", "consumer_groups/company_a/plugins",
		`{"limit-count":{"count":3,"time_window":60,"rejected_code":429,"key":"remote_addr"}}`, 200)
	eventually(t, 10*time.Second, func() error {
		if s := get("jack-key"); s != 200 {
			return fmt.Errorf("jack: %d", s)
		}
		return nil
	})
	for i, want := range []int{200, 200, 429} {
		if s := get("jack-key"); s != want {
			t.Fatalf("jack's request %d under the new limit: %d, want %d", i+2, s, want)
		}
	}

	// Out of the group, no limit; the group, no longer in use, goes.
	send("PUT", "consumers/jack", `{"username":"jack","plugins":{"key-auth":{"key":"jack-key"}}}`, 200)
	eventually(t, 10*time.Second, func() error {
		if s := get("jack-key"); s != 200 {
			return fmt.Errorf("jack out of the group: %d", s)
		}
		return nil
	})
	send("DELETE", "consumer_groups/company_a", "", 200)
}
