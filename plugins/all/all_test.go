package all

import (
	"testing"

	"coregate/plugins"
)

// TestRegistered: importing the package registers the plugins.
func TestRegistered(t *testing.T) {
	for _, name := range []string{"key-auth", "limit-conn", "limit-count", "limit-req", "mocking", "prometheus", "proxy-rewrite"} {
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
