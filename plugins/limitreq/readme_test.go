package limitreq

import (
	"encoding/json"
	"os"
	"regexp"
	"testing"

	"coregate/admin/spec"
	"coregate/plugins"
)

// TestREADMEExamples: every route README.md shows is a valid route whose
// limit-req configuration passes the plugin's checks and builds.
func TestREADMEExamples(t *testing.T) {
	md, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := regexp.MustCompile("(?s)```json\n(.*?)```").FindAllSubmatch(md, -1)
	if len(blocks) < 2 {
		t.Fatalf("README.md shows %d configurations, want 2", len(blocks))
	}
	for i, b := range blocks {
		if err := spec.ValidateObject(spec.KindRoute, b[1]); err != nil {
			t.Errorf("example %d: not a valid route: %v", i+1, err)
			continue
		}
		var route struct {
			Plugins map[string]json.RawMessage `json:"plugins"`
		}
		if err := json.Unmarshal(b[1], &route); err != nil {
			t.Fatalf("example %d: %v", i+1, err)
		}
		conf, ok := route.Plugins[Name]
		if !ok {
			t.Errorf("example %d: no %s", i+1, Name)
			continue
		}
		if err := plugins.Check(Name, conf); err != nil {
			t.Errorf("example %d: %v", i+1, err)
		}
		if _, err := plugins.Default.Build(map[string]json.RawMessage{Name: conf}, plugins.NewLocalEnv()); err != nil {
			t.Errorf("example %d: build: %v", i+1, err)
		}
	}
}
