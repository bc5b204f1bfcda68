package all

import (
	"testing"

	"coregate/plugins"
)

// TestLimitCountRegistered: importing the package registers limit-count.
func TestLimitCountRegistered(t *testing.T) {
	if _, _, ok := plugins.Lookup("limit-count"); !ok {
		t.Error("limit-count is not registered")
	}
}
