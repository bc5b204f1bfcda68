package requestvalidation

import (
	"os"
	"testing"

	"coregate/plugins/plugintest"
)

// TestREADMEExamples checks every configuration README.md shows against
// the plugin's schema and Check.
func TestREADMEExamples(t *testing.T) {
	md, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	if n := plugintest.CheckExamples(t, md, Name); n < 3 {
		t.Fatalf("README.md shows %d configurations of %s, want at least 3", n, Name)
	}
}
