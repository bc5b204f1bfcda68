package plugintest

import (
	"bytes"
	"encoding/json"
	"os"
	"regexp"
	"testing"

	"coregate/admin/spec"
	"coregate/plugins"
)

// CheckExamples checks every configuration a plugin's README shows, in
// its ```json blocks, with plugins.Default, and returns how many
// configurations of the plugin name it checked. A block is an Admin API
// object with a "plugins" member (each entry checked as the object's kind
// checks it: a consumer's, one with a "username", with CheckConsumer,
// others with Check) or, without one, a configuration of name itself.
// Each failure is reported on t.
func CheckExamples(t testing.TB, readme []byte, name string) int {
	t.Helper()
	n := 0
	const open, end = "```json\n", "```"
	for rest := readme; ; {
		i := bytes.Index(rest, []byte(open))
		if i < 0 {
			return n
		}
		rest = rest[i+len(open):]
		j := bytes.Index(rest, []byte(end))
		if j < 0 {
			t.Errorf("README: a ```json block is not closed")
			return n
		}
		block := rest[:j]
		rest = rest[j+len(end):]
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(block, &obj); err != nil {
			t.Errorf("README example %s: %v", block, err)
			continue
		}
		confs := map[string]json.RawMessage{name: block}
		check := plugins.Check
		if raw, ok := obj["plugins"]; ok {
			confs = nil
			if err := json.Unmarshal(raw, &confs); err != nil {
				t.Errorf("README example %s: plugins: %v", block, err)
				continue
			}
			if _, ok := obj["username"]; ok {
				check = plugins.CheckConsumer
			}
		}
		for p, conf := range confs {
			if err := check(p, conf); err != nil {
				t.Errorf("README example %s: %v", block, err)
			}
			if p == name {
				n++
			}
		}
	}
}

// CheckRouteExamples checks that README.md (in the test's directory) shows
// at least min ```json blocks, each a valid route whose configuration of
// plugin name passes the plugin's checks and builds.
func CheckRouteExamples(t testing.TB, name string, min int) {
	t.Helper()
	md, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := regexp.MustCompile("(?s)```json\n(.*?)```").FindAllSubmatch(md, -1)
	if len(blocks) < min {
		t.Fatalf("README.md shows %d configurations, want %d", len(blocks), min)
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
		conf, ok := route.Plugins[name]
		if !ok {
			t.Errorf("example %d: no %s", i+1, name)
			continue
		}
		if err := plugins.Check(name, conf); err != nil {
			t.Errorf("example %d: %v", i+1, err)
		}
		if _, err := plugins.Default.Build(map[string]json.RawMessage{name: conf}, plugins.NewLocalEnv()); err != nil {
			t.Errorf("example %d: build: %v", i+1, err)
		}
	}
}
