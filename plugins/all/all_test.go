package all

import (
	"slices"
	"testing"

	"coregate/plugins"
)

// TestRegistered: importing the package registers the plugins.
func TestRegistered(t *testing.T) {
	for _, name := range []string{
		"api-breaker",
		"basic-auth",
		"consumer-restriction",
		"cors",
		"csrf",
		"echo",
		"fault-injection",
		"file-logger",
		"hmac-auth",
		"http-logger",
		"ip-restriction",
		"jwt-auth",
		"key-auth",
		"limit-conn",
		"limit-count",
		"limit-req",
		"mocking",
		"opentelemetry",
		"prometheus",
		"proxy-mirror",
		"proxy-rewrite",
		"real-ip",
		"redirect",
		"referer-restriction",
		"request-id",
		"request-validation",
		"response-rewrite",
		"traffic-split",
		"ua-restriction",
		"uri-blocker",
	} {
		if _, _, ok := plugins.Lookup(name); !ok {
			t.Errorf("%s is not registered", name)
		}
	}
}

// TestSchemasCompile: every registered plugin's schemas compile (the
// registry compiles them when first used; the gateway's supervisor compiles
// them all at start).
func TestSchemasCompile(t *testing.T) {
	if err := plugins.Default.Compile(); err != nil {
		t.Fatal(err)
	}
	for _, name := range plugins.Names() {
		if _, ok := plugins.Default.Schema(name); !ok {
			t.Errorf("%s: no schema", name)
		}
		if _, ok := plugins.Default.MetadataSchema(name); !ok {
			t.Errorf("%s: no metadata schema", name)
		}
	}
}

// TestEncryptFields: the plugins' secret fields are APISIX's encrypt_fields
// (key-auth.lua's consumer_schema, limit-count/init.lua, limit-req.lua,
// limit-conn.lua); the others have none.
func TestEncryptFields(t *testing.T) {
	for _, tc := range []struct {
		name     string
		consumer bool
		want     []string
	}{
		{"basic-auth", true, []string{"password"}},
		{"basic-auth", false, nil},
		{"consumer-restriction", false, nil},
		{"hmac-auth", true, []string{"secret_key"}},
		{"hmac-auth", false, nil},
		{"jwt-auth", true, []string{"secret"}},
		{"jwt-auth", false, nil},
		{"cors", false, nil},
		{"csrf", false, []string{"key"}},
		{"key-auth", true, []string{"key"}},
		{"key-auth", false, nil},
		{"limit-count", false, []string{"redis_password", "sentinel_password"}},
		{"limit-req", false, []string{"redis_password"}},
		{"limit-conn", false, []string{"redis_password"}},
		{"limit-conn", true, []string{"redis_password"}},
		{"api-breaker", false, nil},
		{"mocking", false, nil},
		{"prometheus", false, nil},
		{"proxy-mirror", false, nil},
		{"proxy-rewrite", false, nil},
		{"ip-restriction", false, nil},
		{"ua-restriction", false, nil},
		{"referer-restriction", false, nil},
		{"uri-blocker", false, nil},
		{"fault-injection", false, nil},
		{"real-ip", false, nil},
		{"echo", false, nil},
		{"redirect", false, nil},
		{"request-id", false, nil},
		{"request-validation", false, nil},
		{"opentelemetry", false, nil},
		{"traffic-split", false, nil},
		{"response-rewrite", false, nil},
		{"file-logger", false, nil},
		{"http-logger", false, []string{"auth_header"}},
	} {
		if got := plugins.Default.EncryptFields(tc.name, tc.consumer); !slices.Equal(got, tc.want) {
			t.Errorf("%s consumer=%v: %q, want %q", tc.name, tc.consumer, got, tc.want)
		}
	}
}
