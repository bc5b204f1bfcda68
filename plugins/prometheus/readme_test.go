package prometheus

import (
	"os"
	"regexp"
	"testing"

	"coregate/plugins"
	"coregate/plugins/plugintest"
)

// TestREADMEExamples checks every configuration README.md shows.
func TestREADMEExamples(t *testing.T) {
	md, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	if n := plugintest.CheckExamples(t, md, Name); n < 3 {
		t.Fatalf("README.md shows %d configurations of %s, want at least 3", n, Name)
	}
	// The plugin metadata the Admin API example PUTs.
	bodies := metadataExample.FindAllSubmatch(md, -1)
	if len(bodies) == 0 {
		t.Fatal("README.md shows no plugin metadata")
	}
	for _, b := range bodies {
		if err := plugins.Default.CheckMetadata(Name, b[1]); err != nil {
			t.Errorf("README metadata %s: %v", b[1], err)
		}
	}
}

var metadataExample = regexp.MustCompile(`plugin_metadata/prometheus -X PUT[^']*-d '([^']*)'`)
