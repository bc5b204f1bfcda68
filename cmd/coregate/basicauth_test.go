package main

import (
	"context"
	"encoding/base64"
	"fmt"
	"strings"
	"testing"
	"time"

	"coregate/admin/adminapi"
)

// TestAdminAPIBasicAuth: basic-auth configured through the Admin API, a
// consumer's and a credential's username and password: a real client gets
// APISIX's answers, the upstream the consumer's name and, with
// hide_credentials, no Authorization; the password is stored encrypted;
// the plugin is listed with its schema.
func TestAdminAPIBasicAuth(t *testing.T) {
	t.Parallel()
	up := headEchoUpstream(t)
	adminPort := freePort(t)
	g := startSupervisor(t, "", etcdConfig(adminPort, adminapi.LegacyAdminKey), 1)
	c := newClient(t)
	admin := legacyAdmin(adminPort)
	put := func(path, body string, want int) result {
		t.Helper()
		r := admin.do(t, c, "PUT", path, body)
		if r.status != want {
			t.Fatalf("PUT %s: %d %s, want %d", path, r.status, r.body, want)
		}
		return r
	}
	basic := func(user, pass string) map[string]string {
		return map[string]string{"Authorization": "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+pass))}
	}

	if r := admin.do(t, c, "GET", "plugins/list", ""); r.status != 200 || !strings.Contains(r.body, `"basic-auth"`) {
		t.Fatalf("plugins/list: %d %s", r.status, r.body)
	}
	if r := admin.do(t, c, "GET", "plugins/basic-auth?schema_type=consumer", ""); r.status != 200 || !strings.Contains(r.body, `"password"`) {
		t.Fatalf("consumer schema: %d %s", r.status, r.body)
	}
	r := do(t, c, "GET", fmt.Sprintf("http://127.0.0.1:%d/apisix/admin/schema/plugins/basic-auth", adminPort), "",
		map[string]string{"X-API-KEY": adminapi.LegacyAdminKey}, nil)
	if r.status != 200 || !strings.Contains(r.body, `"hide_credentials"`) {
		t.Fatalf("schema: %d %s", r.status, r.body)
	}

	put("routes/1", fmt.Sprintf(`{"uri":"/ba","plugins":{"basic-auth":{"hide_credentials":true}},"upstream":{"nodes":{%q:1}}}`, up.Addr()), 201)
	put("consumers", `{"username":"foo","plugins":{"basic-auth":{"username":"foo","password":"bar"}}}`, 201)
	put("consumers/foo/credentials/c1", `{"plugins":{"basic-auth":{"username":"foo-2","password":"bar-2"}}}`, 201)
	eventually(t, 10*time.Second, func() error {
		if r := do(t, c, "GET", g.url("/ba"), "", basic("foo-2", "bar-2"), nil); r.status != 200 {
			return fmt.Errorf("credential c1: %d %q", r.status, r.body)
		}
		return nil
	})
	for _, tc := range []struct {
		name string
		hdr  map[string]string
		body string
	}{
		{"missing", nil, `{"message":"Missing authorization in request"}` + "\n"},
		{"bad header", map[string]string{"Authorization": "Bad_header YmFyOmJhcgo="}, `{"message":"Invalid authorization in request"}` + "\n"},
		{"no password", map[string]string{"Authorization": "Basic YmFy"}, `{"message":"Invalid authorization in request"}` + "\n"},
		{"unknown user", basic("bar", "bar"), `{"message":"Invalid user authorization"}` + "\n"},
		{"wrong password", basic("foo", "foo"), `{"message":"Invalid user authorization"}` + "\n"},
	} {
		r := do(t, c, "GET", g.url("/ba"), "", tc.hdr, nil)
		if r.status != 401 || r.body != tc.body || r.header.Get("WWW-Authenticate") != `Basic realm="basic"` {
			t.Errorf("%s: %d %q %q", tc.name, r.status, r.body, r.header.Get("WWW-Authenticate"))
		}
	}
	for _, who := range [][2]string{{"foo", "bar"}, {"foo-2", "bar-2"}} {
		e := upstreamSaw(t, do(t, c, "GET", g.url("/ba"), "", basic(who[0], who[1]), nil))
		if e.get("X-Consumer-Username") != "foo" || e.has("Authorization") {
			t.Fatalf("%s: upstream saw %+v", who[0], e)
		}
	}

	// Stored encrypted, never in clear.
	s := embeddedStore(t, g.dir)
	for _, key := range []string{"/apisix/consumers/foo", "/apisix/consumers/foo/credentials/c1"} {
		kv, err := s.Get(context.Background(), key)
		if err != nil {
			t.Fatal(err)
		}
		if v := string(kv.Value); !strings.Contains(v, `"password":"`) || strings.Contains(v, `"bar`) {
			t.Fatalf("%s: etcd holds %s", key, v)
		}
	}

	r = put("consumers", `{"username":"rose","plugins":{"basic-auth":{"username":"foo","password":"x"}}}`, 400)
	if !strings.Contains(r.body, `duplicate username of plugin basic-auth found with consumer: foo`) {
		t.Fatalf("duplicate username: %s", r.body)
	}
	r = put("consumers", `{"username":"rose","plugins":{"basic-auth":{"username":"rose"}}}`, 400)
	if !strings.Contains(r.body, `failed to check the configuration of plugin basic-auth err: property \"password\" is required`) {
		t.Fatalf("no password: %s", r.body)
	}
}
