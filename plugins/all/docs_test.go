package all

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"coregate/plugins"
)

var update = flag.Bool("update", false, "write docs/plugins/ from the plugins' READMEs")

// docsDir is where the plugin pages are, from this package's folder.
const docsDir = "../../docs/plugins"

// pluginDocs returns the pages docs/plugins/ must hold, by file name: one
// per registered plugin, its README with a line saying where it comes
// from, and README.md, their index in Table's order.
func pluginDocs(t *testing.T) map[string][]byte {
	t.Helper()
	pages := map[string][]byte{}
	var index bytes.Buffer
	index.WriteString(generatedNote("plugins/*/README.md"))
	index.WriteString("# Plugins\n\nThe plugins coregate has, highest priority first (the order they run in within a\n" +
		"phase; `plugins/table.go`). Each page is its folder's README.\n\n| plugin | priority | what |\n|---|---:|---|\n")
	for _, e := range plugins.Table {
		if _, _, ok := plugins.Lookup(e.Name); !ok {
			continue
		}
		src := filepath.Join("plugins", strings.ReplaceAll(e.Name, "-", ""), "README.md")
		md, err := os.ReadFile(filepath.Join("../..", src))
		if err != nil {
			t.Fatalf("plugin %s: %v", e.Name, err)
		}
		pages[e.Name+".md"] = append([]byte(generatedNote(src)), md...)
		fmt.Fprintf(&index, "| [%s](%s.md) | %d | %s |\n", e.Name, e.Name, e.Priority, summary(t, e.Name, md))
	}
	pages["README.md"] = index.Bytes()
	return pages
}

// summary is the first sentence of a README's "## Name" section, without
// the plugin's name in front of it.
func summary(t *testing.T, name string, md []byte) string {
	t.Helper()
	_, rest, ok := strings.Cut(string(md), "\n## Name\n\n")
	if !ok {
		t.Fatalf("plugin %s: its README has no ## Name section", name)
	}
	para, _, _ := strings.Cut(rest, "\n\n")
	para = strings.Join(strings.Fields(para), " ")
	for _, sep := range []string{"`" + name + "`: ", "`" + name + "` — "} {
		para = strings.TrimPrefix(para, sep)
	}
	if i := strings.Index(para, ". "); i >= 0 {
		para = para[:i]
	}
	para = strings.TrimSuffix(para, ".")
	if para == "" || strings.HasPrefix(para, "`") {
		t.Fatalf("plugin %s: its README's ## Name does not start \"`%s`: what it does\"", name, name)
	}
	return strings.ReplaceAll(para, "|", "\\|")
}

func generatedNote(src string) string {
	return "<!-- generated from " + src + " by TestPluginDocs in plugins/all: edit the source, then\n" +
		"     go test ./plugins/all -run TestPluginDocs -update -->\n"
}

// TestPluginDocs fails when docs/plugins/ is not what the plugins' READMEs
// make of it: a page missing, different from its README, or left over
// from a plugin that is gone. -update writes it.
func TestPluginDocs(t *testing.T) {
	want := pluginDocs(t)
	if len(want) != len(plugins.Names())+1 {
		t.Fatalf("%d pages for %d plugins", len(want)-1, len(plugins.Names()))
	}
	if *update {
		if err := os.MkdirAll(docsDir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	have, err := os.ReadDir(docsDir)
	if err != nil && !*update {
		t.Fatal(err)
	}
	for _, d := range have {
		if _, ok := want[d.Name()]; ok {
			continue
		}
		if *update {
			if err := os.Remove(filepath.Join(docsDir, d.Name())); err != nil {
				t.Fatal(err)
			}
			continue
		}
		t.Errorf("docs/plugins/%s is no plugin's page (go test ./plugins/all -run TestPluginDocs -update)", d.Name())
	}
	for name, page := range want {
		path := filepath.Join(docsDir, name)
		if *update {
			if err := os.WriteFile(path, page, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		got, err := os.ReadFile(path)
		if err != nil {
			t.Errorf("%v (go test ./plugins/all -run TestPluginDocs -update)", err)
			continue
		}
		if !bytes.Equal(got, page) {
			t.Errorf("docs/plugins/%s differs from its source (go test ./plugins/all -run TestPluginDocs -update)", name)
		}
	}
}
