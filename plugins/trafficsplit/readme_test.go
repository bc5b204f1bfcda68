package trafficsplit

import (
	"encoding/json"
	"os"
	"regexp"
	"testing"

	"coregate/admin/spec"
	"coregate/plugins"
	"coregate/plugins/plugintest"
)

// TestREADMEExamples: every route README.md shows is a valid route whose
// traffic-split configuration passes the plugin's checks and builds, with
// the upstreams it names.
func TestREADMEExamples(t *testing.T) {
	md, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	if n := plugintest.CheckExamples(t, md, Name); n < 3 {
		t.Fatalf("README.md shows %d configurations of %s, want at least 3", n, Name)
	}
	e := plugins.NewLocalEnv()
	e.Upstreams = &plugintest.Upstreams{IDs: []string{"canary", "2"}}
	for _, b := range regexp.MustCompile("(?s)```json\n(.*?)```").FindAllSubmatch(md, -1) {
		r, err := spec.DecodeRoute(b[1])
		if err != nil {
			t.Errorf("%s: %v", b[1], err)
			continue
		}
		if _, err := plugins.Default.BuildPhases(map[string]json.RawMessage{Name: r.Plugins[Name]}, e); err != nil {
			t.Errorf("%s: build: %v", b[1], err)
		}
	}
}
