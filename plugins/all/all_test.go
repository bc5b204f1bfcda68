package all

import (
	"slices"
	"testing"

	"coregate/plugins"
)

// TestRegistered: importing the package registers the plugins.
func TestRegistered(t *testing.T) {
	for _, name := range []string{"key-auth", "limit-conn", "limit-count", "limit-req", "mocking", "prometheus", "proxy-rewrite",
		"ip-restriction", "ua-restriction", "referer-restriction", "uri-blocker",
		"fault-injection", "real-ip", "echo", "file-logger", "http-logger"} {
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
		{"key-auth", true, []string{"key"}},
		{"key-auth", false, nil},
		{"limit-count", false, []string{"redis_password", "sentinel_password"}},
		{"limit-req", false, []string{"redis_password"}},
		{"limit-conn", false, []string{"redis_password"}},
		{"limit-conn", true, []string{"redis_password"}},
		{"mocking", false, nil},
		{"prometheus", false, nil},
		{"proxy-rewrite", false, nil},
		{"ip-restriction", false, nil},
		{"ua-restriction", false, nil},
		{"referer-restriction", false, nil},
		{"uri-blocker", false, nil},
		{"fault-injection", false, nil},
		{"real-ip", false, nil},
		{"echo", false, nil},
		{"file-logger", false, nil},
		{"http-logger", false, []string{"auth_header"}},
	} {
		if got := plugins.Default.EncryptFields(tc.name, tc.consumer); !slices.Equal(got, tc.want) {
			t.Errorf("%s consumer=%v: %q, want %q", tc.name, tc.consumer, got, tc.want)
		}
	}
}
