package adminapi

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"strings"
	"testing"
	"time"

	"coregate/plugins"
)

// References: an upstream, service or plugin config in use cannot be
// deleted, unless force=true.
func TestDeleteInUse(t *testing.T) {
	c := newTestServer(t)
	c.want(c.do("PUT", "/apisix/admin/upstreams/u1", `{"nodes":{"127.0.0.1:1":1}}`), 201, "")
	c.want(c.do("PUT", "/apisix/admin/services/s1", `{"upstream_id":"u1"}`), 201, "")
	c.want(c.do("PUT", "/apisix/admin/plugin_configs/p1", `{"plugins":{"prometheus":{}}}`), 201, "")
	c.want(c.do("PUT", "/apisix/admin/routes/7", `{"uri":"/a","service_id":"s1","plugin_config_id":"p1"}`), 201, "")
	c.want(c.do("PUT", "/apisix/admin/routes/8", `{"uri":"/b","upstream_id":"u1"}`), 201, "")

	c.want(c.do("DELETE", "/apisix/admin/services/s1", ""), 400, `{"error_msg":"can not delete this service directly, route [7] is still using it now"}`)
	c.want(c.do("DELETE", "/apisix/admin/plugin_configs/p1", ""), 400, `{"error_msg":"can not delete this plugin config, route [7] is still using it now"}`)
	c.want(c.do("DELETE", "/apisix/admin/upstreams/u1", ""), 400, `{"error_msg":"can not delete this upstream, route [8] is still using it now"}`)
	c.want(c.do("DELETE", "/apisix/admin/routes/8", ""), 200, "")
	c.want(c.do("DELETE", "/apisix/admin/upstreams/u1", ""), 400, `{"error_msg":"can not delete this upstream, service [s1] is still using it now"}`)
	c.want(c.do("DELETE", "/apisix/admin/upstreams/u1?force=true", ""), 200, "")
	c.want(c.do("DELETE", "/apisix/admin/plugin_configs/p1?force=true", ""), 200, "")
	if c.stored("/upstreams/u1") != nil || c.stored("/plugin_configs/p1") != nil || c.stored("/services/s1") == nil {
		t.Fatal("wrong objects deleted")
	}
	c.want(c.do("PUT", "/apisix/admin/services/s2", `{"upstream_id":"nope"}`), 400,
		`{"error_msg":"failed to fetch upstream info by upstream id [nope], response code: 404","field":"upstream_id"}`)
}

func TestConsumersAndCredentials(t *testing.T) {
	c := newTestServer(t)
	// Keyed by username, with no id member.
	wantValue(t, c, c.do("PUT", "/apisix/admin/consumers", `{"username":"jack","plugins":{"key-auth":{"key":"k1"}}}`), 201,
		"/consumers/jack", `{"username":"jack","plugins":{"key-auth":{"key":"k1"}}}`)
	wantValue(t, c, c.do("PUT", "/apisix/admin/consumers/jack", `{"username":"jack","desc":"d"}`), 200,
		"/consumers/jack", `{"username":"jack","desc":"d"}`)
	c.want(c.do("PUT", "/apisix/admin/consumers/jill", `{"username":"jack"}`), 400, `{"error_msg":"wrong username","field":"username"}`)
	c.want(c.do("PUT", "/apisix/admin/consumers", `{"username":"a b"}`), 400, "")
	// A consumer's group must exist (admin/consumers.lua); nothing is
	// stored otherwise.
	c.want(c.do("PUT", "/apisix/admin/consumers", `{"username":"bob","group_id":"g1"}`), 400,
		`{"error_msg":"failed to fetch consumer group info by consumer group id [g1], response code: 404","field":"group_id"}`)
	c.want(c.do("PUT", "/apisix/admin/consumers/jack", `{"username":"jack","group_id":7,"plugins":{"key-auth":{"key":"k1"}}}`), 400,
		`{"error_msg":"failed to fetch consumer group info by consumer group id [7], response code: 404","field":"group_id"}`)
	c.want(c.do("PUT", "/apisix/admin/consumers", `{"username":"bob","group_id":"a/b"}`), 400, "") // the schema's refusal
	if c.stored("/consumers/bob") != nil || c.stored("/consumers/jack")["group_id"] != nil {
		t.Fatal("group_id stored")
	}
	r := c.do("PUT", "/apisix/admin/consumers", `{"username":"bob","plugins":{"limit-count":{"count":-1,"time_window":1}}}`)
	c.want(r, 400, "")
	if m := r.json(t); !strings.HasPrefix(m["error_msg"].(string), "invalid plugins configuration: failed to check the configuration of plugin limit-count err: ") {
		t.Fatalf("consumer plugin: %s", r.body)
	}

	// Credentials live under their consumer.
	c.want(c.do("PUT", "/apisix/admin/consumers/nobody/credentials/c1", `{"plugins":{"key-auth":{"key":"x"}}}`), 404, `{"error_msg":"consumer not found"}`)
	wantValue(t, c, c.do("PUT", "/apisix/admin/consumers/jack/credentials/c1", `{"plugins":{"key-auth":{"key":"x"}}}`), 201,
		"/consumers/jack/credentials/c1", `{"id":"c1","plugins":{"key-auth":{"key":"x"}}}`)
	c.want(c.do("PUT", "/apisix/admin/consumers/jack/credentials/c2", `{"plugins":{"key-auth":{},"prometheus":{}}}`), 400, "")
	c.want(c.do("PUT", "/apisix/admin/consumers/jack/credentials/c2", `{"username":"x"}`), 400, "")
	// A credential holds an authentication plugin; its configuration is
	// checked first.
	for _, tc := range []struct{ name, conf string }{{"prometheus", `{}`}, {"limit-count", `{"count":1,"time_window":60}`}} {
		c.want(c.do("PUT", "/apisix/admin/consumers/jack/credentials/c2", `{"plugins":{"`+tc.name+`":`+tc.conf+`}}`), 400,
			`{"error_msg":"only supports auth type plugins in consumer credential","field":"plugins.`+tc.name+`"}`)
	}
	r = c.do("PUT", "/apisix/admin/consumers/jack/credentials/c2", `{"plugins":{"limit-count":{"count":0,"time_window":60}}}`)
	if m := r.json(t); r.status != 400 || !strings.HasPrefix(m["error_msg"].(string), "invalid plugins configuration: ") {
		t.Fatalf("credential plugin: %s", r.body)
	}
	c.want(c.do("PUT", "/apisix/admin/consumers/jack/credentials/c2", `{"plugins":{"no-such":{}}}`), 400, "")
	c.want(c.do("PUT", "/apisix/admin/consumers/jack/credentials/c2", `{"plugins":{}}`), 201, "")
	c.want(c.do("DELETE", "/apisix/admin/consumers/jack/credentials/c2", ""), 200, "")
	r = c.do("GET", "/apisix/admin/consumers/jack/credentials", "")
	c.want(r, 200, "")
	if m := r.json(t); m["total"] != json.Number("1") {
		t.Fatalf("credentials: %s", r.body)
	}
	c.want(c.do("GET", "/apisix/admin/consumers/jack/credentials/c1", ""), 200, "")
	// The consumers' list leaves credentials out.
	r = c.do("GET", "/apisix/admin/consumers", "")
	if m := r.json(t); m["total"] != json.Number("1") {
		t.Fatalf("consumers: %s", r.body)
	}
	// A consumer goes with its credentials.
	c.want(c.do("DELETE", "/apisix/admin/consumers/jack", ""), 200, `{"deleted":"1","key":"`+c.st.Prefix()+`/consumers/jack"}`)
	if c.stored("/consumers/jack/credentials/c1") != nil {
		t.Fatal("credential left behind")
	}
	c.want(c.do("DELETE", "/apisix/admin/consumers/jack/credentials", ""), 400, `{"error_msg":"missing credential id"}`)
}

// TestUniqueKeys: no two consumers or credentials share an
// authentication key.
func TestUniqueKeys(t *testing.T) {
	c := newTestServer(t)
	c.want(c.do("PUT", "/apisix/admin/consumers", `{"username":"jack","plugins":{"key-auth":{"key":"k1"}}}`), 201, "")
	c.want(c.do("PUT", "/apisix/admin/consumers", `{"username":"jack","plugins":{"key-auth":{"key":"k1"}}}`), 200, "")
	c.want(c.do("PUT", "/apisix/admin/consumers", `{"username":"bob","plugins":{"key-auth":{"key":"k1"}}}`), 400,
		`{"error_msg":"duplicate key of plugin key-auth found with consumer: jack","field":"plugins.key-auth.key"}`)
	c.want(c.do("PUT", "/apisix/admin/consumers", `{"username":"bob"}`), 201, "")
	c.want(c.do("PUT", "/apisix/admin/consumers/bob/credentials/c1", `{"plugins":{"key-auth":{"key":"k1"}}}`), 400,
		`{"error_msg":"duplicate key of plugin key-auth found with consumer: jack","field":"plugins.key-auth.key"}`)
	c.want(c.do("PUT", "/apisix/admin/consumers/bob/credentials/c1", `{"plugins":{"key-auth":{"key":"k2"}}}`), 201, "")
	c.want(c.do("PUT", "/apisix/admin/consumers/bob/credentials/c1", `{"plugins":{"key-auth":{"key":"k2"}}}`), 200, "")
	c.want(c.do("PUT", "/apisix/admin/consumers/bob/credentials/c2", `{"plugins":{"key-auth":{"key":"k2"}}}`), 400,
		`{"error_msg":"duplicate key of plugin key-auth found with credential: c1 of consumer: bob","field":"plugins.key-auth.key"}`)
	// A consumer does not conflict with its own credentials.
	c.want(c.do("PUT", "/apisix/admin/consumers/bob", `{"username":"bob","plugins":{"key-auth":{"key":"k2"}}}`), 200, "")
	c.want(c.do("PUT", "/apisix/admin/consumers/jack", `{"username":"jack","plugins":{"key-auth":{"key":"k2"}}}`), 400,
		`{"error_msg":"duplicate key of plugin key-auth found with consumer: bob","field":"plugins.key-auth.key"}`)
}

func TestPluginConfigsAndGlobalRules(t *testing.T) {
	c := newTestServer(t)
	wantValue(t, c, c.do("PUT", "/apisix/admin/plugin_configs/1", `{"plugins":{"limit-count":{"count":1,"time_window":60}}}`), 201,
		"/plugin_configs/1", `{"id":"1","plugins":{"limit-count":{"count":1,"time_window":60}}}`)
	c.want(c.do("PUT", "/apisix/admin/plugin_configs/2", `{"desc":"no plugins"}`), 400, "")
	c.want(c.do("PUT", "/apisix/admin/plugin_configs/2", `{"plugins":{"limit-count":{}}}`), 400, "")

	wantValue(t, c, c.do("PUT", "/apisix/admin/global_rules/g1", `{"plugins":{"prometheus":{}}}`), 201,
		"/global_rules/g1", `{"id":"g1","plugins":{"prometheus":{}}}`)
	// A plugin runs from one global rule only.
	c.want(c.do("PUT", "/apisix/admin/global_rules/g2", `{"plugins":{"prometheus":{}}}`), 400,
		`{"error_msg":"plugin 'prometheus' already exists in global rule with id 'g1'","field":"plugins.prometheus"}`)
	c.want(c.do("PUT", "/apisix/admin/global_rules/g1", `{"plugins":{"prometheus":{"prefer_name":true}}}`), 200, "")
	c.want(c.do("PATCH", "/apisix/admin/global_rules/g1", `{"plugins":{"key-auth":{}}}`), 200, "")
}

// testCert makes a self-signed certificate and its key, PEM.
func testCert(t *testing.T) (cert, key string) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test.com"},
		DNSNames: []string{"test.com"}, NotBefore: time.Now(), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tpl, tpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	kd, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})),
		string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kd}))
}

func TestSSL(t *testing.T) {
	c := newTestServer(t)
	cert, key := testCert(t)
	obj := func(m map[string]any) string { return string(encodeJSON(m)) }
	r := c.do("PUT", "/apisix/admin/ssls/1", obj(map[string]any{"cert": cert, "key": key, "snis": []string{"test.com"}}))
	c.want(r, 201, "")
	if c.stored("/ssls/1")["key"] != key {
		t.Fatal("key not stored")
	}
	// GET never shows the private key.
	for _, p := range []string{"/apisix/admin/ssls/1", "/apisix/admin/ssls"} {
		r = c.do("GET", p, "")
		c.want(r, 200, "")
		if strings.Contains(string(r.body), "PRIVATE KEY") || !strings.Contains(string(r.body), "test.com") {
			t.Fatalf("GET %s: %s", p, r.body)
		}
	}
	// A server certificate needs sni or snis; PEM must parse.
	c.want(c.do("PUT", "/apisix/admin/ssls/2", obj(map[string]any{"cert": cert, "key": key})), 400, "")
	bad := strings.Replace(cert, "MII", "AAA", 1)
	r = c.do("PUT", "/apisix/admin/ssls/2", obj(map[string]any{"cert": bad, "key": key, "sni": "test.com"}))
	c.want(r, 400, "")
	if m := r.json(t); !strings.HasPrefix(m["error_msg"].(string), "failed to parse cert: ") || m["field"] != "cert" {
		t.Fatalf("bad cert: %s", r.body)
	}
	r = c.do("PUT", "/apisix/admin/ssls/2", obj(map[string]any{"cert": cert, "key": strings.Repeat("k", 80), "sni": "test.com"}))
	if m := r.json(t); !strings.HasPrefix(m["error_msg"].(string), "failed to parse key: ") {
		t.Fatalf("bad key: %s", r.body)
	}
	c.want(c.do("PUT", "/apisix/admin/ssls/2", obj(map[string]any{"cert": cert, "key": key, "sni": "test.com",
		"certs": []string{cert}})), 400, `{"error_msg":"mismatched number of certs and keys","field":"keys"}`)
	if c.stored("/ssls/2") != nil {
		t.Fatal("invalid ssl stored")
	}
}

// TestUpstreamClientCertID: an upstream's tls.client_cert_id names an
// ssl object of type client, as APISIX's check_upstream_conf requires,
// inline in a route too.
func TestUpstreamClientCertID(t *testing.T) {
	c := newTestServer(t)
	cert, key := testCert(t)
	obj := func(m map[string]any) string { return string(encodeJSON(m)) }
	c.want(c.do("PUT", "/apisix/admin/ssls/srv", obj(map[string]any{"cert": cert, "key": key, "snis": []string{"test.com"}})), 201, "")
	c.want(c.do("PUT", "/apisix/admin/ssls/cli", obj(map[string]any{"cert": cert, "key": key, "type": "client"})), 201, "")
	up := func(id string) string {
		return `{"scheme":"https","nodes":{"127.0.0.1:1980":1},"tls":{"client_cert_id":"` + id + `"}}`
	}
	c.want(c.do("PUT", "/apisix/admin/upstreams/1", up("none")), 400,
		`{"error_msg":"failed to fetch ssl info by ssl id [none], response code: 404","field":"tls.client_cert_id"}`)
	c.want(c.do("PUT", "/apisix/admin/upstreams/1", up("srv")), 400,
		`{"error_msg":"failed to fetch ssl info by ssl id [srv], wrong ssl type","field":"tls.client_cert_id"}`)
	c.want(c.do("PUT", "/apisix/admin/routes/1", `{"uri":"/a","upstream":`+up("none")+`}`), 400,
		`{"error_msg":"failed to fetch ssl info by ssl id [none], response code: 404","field":"upstream.tls.client_cert_id"}`)
	c.want(c.do("PUT", "/apisix/admin/upstreams/1", up("cli")), 201, "")
	c.want(c.do("PUT", "/apisix/admin/routes/1", `{"uri":"/a","upstream":`+up("cli")+`}`), 201, "")
	// client_cert and client_key are validated as an ssl object's are.
	pair := func(cert, key string) string {
		return obj(map[string]any{"scheme": "https", "nodes": map[string]int{"127.0.0.1:1980": 1},
			"tls": map[string]string{"client_cert": cert, "client_key": key}})
	}
	r := c.do("PUT", "/apisix/admin/upstreams/2", pair(cert, strings.Repeat("k", 80)))
	if m := r.json(t); r.status != 400 || !strings.HasPrefix(m["error_msg"].(string), "failed to parse key: ") || m["field"] != "tls.client_key" {
		t.Fatalf("bad client_key: %d %s", r.status, r.body)
	}
	c.want(c.do("PUT", "/apisix/admin/upstreams/2", pair(cert, key)), 201, "")
}

// TestLimitCountGroups: the members of a limit-count group are
// configured alike, whatever object carries them; an object may change
// its own configuration when it is the group's only member.
func TestLimitCountGroups(t *testing.T) {
	c := newTestServer(t)
	up := `"upstream":{"nodes":{"127.0.0.1:1980":1}}`
	lc := func(count int) string {
		return fmt.Sprintf(`"plugins":{"limit-count":{"count":%d,"time_window":60,"group":"g"}}`, count)
	}
	c.want(c.do("PUT", "/apisix/admin/routes/1", `{"uri":"/a",`+up+`,`+lc(2)+`}`), 201, "")
	// members in another order: alike
	c.want(c.do("PUT", "/apisix/admin/routes/2", `{"uri":"/b",`+up+`,"plugins":{"limit-count":{"group":"g","time_window":60,"count":2}}}`), 201, "")
	// defaults written out: alike, as APISIX compares after the schema
	// fills them in
	c.want(c.do("PUT", "/apisix/admin/routes/4", `{"uri":"/d",`+up+`,"plugins":{"limit-count":{"group":"g","time_window":60,"count":2,"rejected_code":503,"key":"remote_addr","policy":"local"}}}`), 201, "")
	c.want(c.do("DELETE", "/apisix/admin/routes/4", ""), 200, "")
	mismatch := `{"error_msg":"failed to check the configuration of plugin limit-count err: group conf mismatched","field":"plugins.limit-count.group"}`
	c.want(c.do("PUT", "/apisix/admin/routes/3", `{"uri":"/c",`+up+`,`+lc(3)+`}`), 400, mismatch)
	c.want(c.do("PUT", "/apisix/admin/services/s1", `{`+up+`,`+lc(3)+`}`), 400, mismatch)
	c.want(c.do("PUT", "/apisix/admin/plugin_configs/p1", `{`+lc(3)+`}`), 400, mismatch)
	c.want(c.do("PUT", "/apisix/admin/consumers", `{"username":"jack",`+lc(3)+`}`), 400, mismatch)
	c.want(c.do("PATCH", "/apisix/admin/routes/1/plugins", `{"limit-count":{"count":3,"time_window":60,"group":"g"}}`), 400, mismatch)
	// route 2 leaves the group: route 1, alone in it, may change
	c.want(c.do("PUT", "/apisix/admin/routes/2", `{"uri":"/b",`+up+`}`), 200, "")
	c.want(c.do("PUT", "/apisix/admin/routes/1", `{"uri":"/a",`+up+`,`+lc(3)+`}`), 200, "")
}

// TestDeleteUpstreamInPlugins: an upstream a traffic-split names (by an id
// of either type) cannot be deleted, as in APISIX, whichever object's
// plugins name it (a route, a service, a plugin config, a global rule);
// unless force=true.
func TestDeleteUpstreamInPlugins(t *testing.T) {
	r := plugins.NewRegistry([]plugins.Entry{{Name: "traffic-split", Priority: 966}})
	r.Register("traffic-split", testPlugin(`{"type":"object"}`))
	st := newStore(t)
	h, err := New(Options{Store: st, Admin: testAdmin(), Plugins: r})
	if err != nil {
		t.Fatal(err)
	}
	c := serve(t, h, st)
	c.want(c.do("PUT", "/apisix/admin/upstreams/u1", `{"nodes":{"127.0.0.1:1":1}}`), 201, "")
	c.want(c.do("PUT", "/apisix/admin/upstreams/2", `{"nodes":{"127.0.0.1:1":1}}`), 201, "")
	split := func(id string) string {
		return `{"traffic-split":{"rules":[{"weighted_upstreams":[{"weight":1},{"upstream_id":` + id + `,"weight":1}]}]}}`
	}
	c.want(c.do("PUT", "/apisix/admin/routes/7", `{"uri":"/a","plugins":`+split(`"u1"`)+`,"upstream":{"nodes":{"127.0.0.1:1":1}}}`), 201, "")
	c.want(c.do("PUT", "/apisix/admin/global_rules/g", `{"plugins":`+split(`2`)+`}`), 201, "")
	c.want(c.do("DELETE", "/apisix/admin/upstreams/u1", ""), 400, `{"error_msg":"can not delete this upstream, plugin in route [7] is still using it now"}`)
	c.want(c.do("DELETE", "/apisix/admin/upstreams/2", ""), 400, `{"error_msg":"can not delete this upstream, plugin in global_rules [g] is still using it now"}`)
	c.want(c.do("DELETE", "/apisix/admin/routes/7", ""), 200, "")
	c.want(c.do("DELETE", "/apisix/admin/upstreams/u1", ""), 200, "")
	c.want(c.do("DELETE", "/apisix/admin/upstreams/2?force=true", ""), 200, "")
	if c.stored("/upstreams/u1") != nil || c.stored("/upstreams/2") != nil {
		t.Fatal("upstreams not deleted")
	}
}
