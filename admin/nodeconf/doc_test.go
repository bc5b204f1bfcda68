package nodeconf

import (
	"bytes"
	"flag"
	"os"
	"testing"
)

var update = flag.Bool("update", false, "write docs/configuration.md from Template")

// configDoc is docs/configuration.md from this package's folder.
const configDoc = "../../docs/configuration.md"

// configPage is docs/configuration.md: Template, which is what coregate
// init writes, in a yaml block under a line saying where it comes from.
func configPage() []byte {
	var b bytes.Buffer
	b.WriteString("<!-- generated from admin/nodeconf's Template by TestConfigDoc: edit template.go, then\n" +
		"     go test ./admin/nodeconf -run TestConfigDoc -update -->\n")
	b.WriteString("# Configuration keys\n\n" +
		"Every `config.yaml` key coregate reads, with its default and what it does, as `coregate init`\n" +
		"writes them. Keys commented out are not set. A key of APISIX's that is not here is reported at\n" +
		"start (\"not supported yet\", or unknown), or refused when ignoring it would weaken security or\n" +
		"lose data: `admin/nodeconf`'s `doc.go` lists which. `docs/operations.md` has the command line.\n\n")
	b.WriteString("```yaml\n")
	b.Write(Template())
	b.WriteString("```\n")
	return b.Bytes()
}

// TestConfigDoc fails when docs/configuration.md is not Template's page;
// -update writes it.
func TestConfigDoc(t *testing.T) {
	want := configPage()
	if *update {
		if err := os.WriteFile(configDoc, want, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(configDoc)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("docs/configuration.md differs from Template (go test ./admin/nodeconf -run TestConfigDoc -update)")
	}
	if !bytes.Contains(got, []byte("\n  node_listen:\n")) {
		t.Fatal("docs/configuration.md has no apisix.node_listen")
	}
}
