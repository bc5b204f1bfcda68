package mocking

import (
	"bytes"
	"encoding/json"
	"os"
	"testing"

	"coregate/plugins"
)

// TestREADMEExamples checks every JSON configuration README.md shows
// against the plugin's schema and Check, and builds it.
func TestREADMEExamples(t *testing.T) {
	md, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, block := range bytes.Split(md, []byte("```json\n"))[1:] {
		end := bytes.Index(block, []byte("```"))
		if end < 0 {
			t.Fatal("unterminated json block")
		}
		raw := json.RawMessage(block[:end])
		if err := plugins.Check(Name, raw); err != nil {
			t.Errorf("example %d: %v\n%s", n+1, err, raw)
		}
		if _, err := (Plugin{}).Build(raw, plugins.Env{}); err != nil {
			t.Errorf("example %d: build: %v", n+1, err)
		}
		n++
	}
	if n < 3 {
		t.Fatalf("README.md shows %d configurations, want at least 3", n)
	}
}
