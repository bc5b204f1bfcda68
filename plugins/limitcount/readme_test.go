package limitcount

import (
	"testing"

	"coregate/plugins/plugintest"
)

// TestREADMEExamples: every route README.md shows is a valid route whose
// limit-count configuration passes the plugin's checks and builds.
func TestREADMEExamples(t *testing.T) { plugintest.CheckRouteExamples(t, Name, 7) }
