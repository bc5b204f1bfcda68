package adminapi

import (
	"testing"

	"coregate/plugins"
)

// consumerSchemaPlugin is a test authentication plugin with a consumer
// schema of its own, as key-auth's: {"key"} required on consumers and
// credentials, not on routes.
type consumerSchemaPlugin struct{ testAuthPlugin }

func (consumerSchemaPlugin) ConsumerSchema() []byte {
	return []byte(`{"type":"object","properties":{"key":{"type":"string"}},"required":["key"]}`)
}

// TestConsumerSchema: consumers' and credentials' plugins are checked
// against a plugin's consumer schema (t/plugin/key-auth.t TEST 9), routes'
// against its schema, and GET ...?schema_type=consumer shows it.
func TestConsumerSchema(t *testing.T) {
	r := plugins.NewRegistry([]plugins.Entry{{Name: "key-auth", Priority: 2500}, {Name: "prometheus", Priority: 500}})
	r.Register("key-auth", consumerSchemaPlugin{testAuthPlugin{`{"type":"object","properties":{"header":{"type":"string"}}}`}})
	r.Register("prometheus", testPlugin(`{"type":"object","properties":{"prefer_name":{"type":"boolean"}}}`))
	st := newStore(t)
	h, err := New(Options{Store: st, Admin: testAdmin(), Plugins: r})
	if err != nil {
		t.Fatal(err)
	}
	c := serve(t, h, st)

	c.want(c.do("PUT", "/apisix/admin/consumers", `{"username":"error","plugins":{"key-auth":{}}}`), 400,
		`{"error_msg":"invalid plugins configuration: failed to check the configuration of plugin key-auth err: property \"key\" is required","field":"plugins.key-auth"}`)
	c.want(c.do("PUT", "/apisix/admin/consumers", `{"username":"jack","plugins":{"key-auth":{"key":"auth-one"}}}`), 201, "")
	c.want(c.do("PUT", "/apisix/admin/consumers/jack/credentials/c1", `{"plugins":{"key-auth":{"key":1}}}`), 400,
		`{"error_msg":"invalid plugins configuration: failed to check the configuration of plugin key-auth err: property \"key\" validation failed: wrong type: expected string, got number","field":"plugins.key-auth.key","detail":"value 1"}`)
	c.want(c.do("PUT", "/apisix/admin/consumers/jack/credentials/c1", `{"plugins":{"key-auth":{"key":"auth-two"}}}`), 201, "")
	// A plugin without a consumer schema is checked on a consumer as on a route.
	c.want(c.do("PUT", "/apisix/admin/consumers", `{"username":"bob","plugins":{"prometheus":{"prefer_name":1}}}`), 400, "")
	c.want(c.do("PUT", "/apisix/admin/routes/1", `{"uri":"/hello","plugins":{"key-auth":{}},"upstream":{"nodes":{"127.0.0.1:1980":1}}}`), 201, "")

	want, _ := r.ConsumerSchema("key-auth")
	if got := c.do("GET", "/apisix/admin/plugins/key-auth?schema_type=consumer", ""); got.status != 200 || string(got.body) != string(want) {
		t.Fatalf("consumer schema: %d %s", got.status, got.body)
	}
	c.want(c.do("GET", "/apisix/admin/plugins/prometheus?schema_type=consumer", ""), 400, `{"error_msg":"not found schema"}`)
}
