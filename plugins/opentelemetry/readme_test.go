package opentelemetry

import (
	"testing"

	"coregate/plugins/plugintest"
)

// TestREADMEExamples checks every route README.md shows against the route
// schema and the plugin's, and builds its configuration.
func TestREADMEExamples(t *testing.T) {
	plugintest.CheckRouteExamples(t, Name, 3)
}
