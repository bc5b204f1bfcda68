package main

import (
	"fmt"
	"testing"
	"time"

	"coregate/admin/adminapi"
)

// TestAdminAPIAttachConsumer: as APISIX's attach_consumer, an
// authenticated request goes upstream with X-Consumer-Username, with
// X-Credential-Identifier when a credential object matched, and with
// X-Consumer-Custom-ID when the consumer has labels.custom_id; what a
// client sent of them is replaced or removed. Consumers, credentials and
// routes are written through the Admin API.
func TestAdminAPIAttachConsumer(t *testing.T) {
	t.Parallel()
	up := headEchoUpstream(t)
	adminPort := freePort(t)
	g := startSupervisor(t, "", etcdConfig(adminPort, adminapi.LegacyAdminKey), 1)
	c := newClient(t)
	admin := legacyAdmin(adminPort)
	put := func(path, body string, want int) {
		t.Helper()
		if r := admin.do(t, c, "PUT", path, body); r.status != want {
			t.Fatalf("PUT %s: %d %s, want %d", path, r.status, r.body, want)
		}
	}
	put("routes/1", fmt.Sprintf(`{"uri":"/ka","plugins":{"key-auth":{"hide_credentials":true}},"upstream":{"nodes":{%q:1}}}`, up.Addr()), 201)
	put("consumers", `{"username":"jack","labels":{"custom_id":"c-42"},"plugins":{"key-auth":{"key":"k-own"}}}`, 201)
	put("consumers", `{"username":"rose","plugins":{"key-auth":{"key":"k-rose"}}}`, 201)
	put("consumers/jack/credentials/cred-7", `{"plugins":{"key-auth":{"key":"k-cred"}}}`, 201)
	eventually(t, 10*time.Second, func() error {
		if r := do(t, c, "GET", g.url("/ka"), "", map[string]string{"apikey": "k-cred"}, nil); r.status != 200 {
			return fmt.Errorf("credential cred-7: %d %q", r.status, r.body)
		}
		return nil
	})
	for _, tc := range []struct {
		key                        string
		username, credID, customID string
	}{
		{"k-own", "jack", "", "c-42"},
		{"k-cred", "jack", "cred-7", "c-42"},
		{"k-rose", "rose", "", ""},
	} {
		e := upstreamSaw(t, do(t, c, "GET", g.url("/ka"), "", map[string]string{"apikey": tc.key,
			"X-Consumer-Username": "admin", "X-Credential-Identifier": "spoofed", "X-Consumer-Custom-ID": "spoofed"}, nil))
		if e.get("X-Consumer-Username") != tc.username || e.get("X-Credential-Identifier") != tc.credID ||
			e.get("X-Consumer-Custom-ID") != tc.customID || e.has("apikey") {
			t.Errorf("%s: upstream saw %+v", tc.key, e)
		}
		if tc.credID == "" && e.has("X-Credential-Identifier") || tc.customID == "" && e.has("X-Consumer-Custom-ID") {
			t.Errorf("%s: upstream saw %+v", tc.key, e)
		}
	}
}
