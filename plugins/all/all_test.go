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
