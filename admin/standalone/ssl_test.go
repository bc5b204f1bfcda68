package standalone

import (
	"log/slog"
	"strings"
	"testing"

	"coregate/admin/store/storesync"
	"coregate/internal/testcert"
	"coregate/plugins"
)

// yamlBlock indents a PEM as a YAML block scalar under a key at indent.
func yamlBlock(pem string, indent int) string {
	pad := strings.Repeat(" ", indent)
	return "|\n" + pad + strings.ReplaceAll(strings.TrimSpace(pem), "\n", "\n"+pad)
}

// TestSSLs: the ssls of apisix.yaml reach the Spec, through Load and
// through the node's Store and sync, keys kept as written; an invalid one
// is left out, logged with its message and the item.
func TestSSLs(t *testing.T) {
	c := testcert.New(t, testcert.Options{DNSNames: []string{"a.com"}}, nil)
	body := "ssls:\n" +
		"  - id: s1\n    snis: [a.com, \"*.a.com\"]\n    cert: " + yamlBlock(c.CertPEM, 6) + "\n    key: " + yamlBlock(c.KeyPEM, 6) + "\n" +
		"  - cert: " + yamlBlock(c.CertPEM, 6) + "\n    key: " + yamlBlock(c.KeyPEM, 6) + "\n    type: client\n" +
		"#END\n"
	sp, err := Parse([]byte(body), "apisix.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(sp.SSLs) != 2 || sp.SSLs[0].ID.String() != "s1" || sp.SSLs[0].SNIs[1] != "*.a.com" ||
		sp.SSLs[0].Key != c.KeyPEM || sp.SSLs[1].ID.String() != "arr_2" || !sp.SSLs[1].IsClient() {
		t.Fatalf("ssls %+v", sp.SSLs)
	}

	bad := strings.Replace(body, "#END\n", "  - id: bad\n    sni: b.com\n    cert: "+yamlBlock(strings.Replace(c.CertPEM, "MII", "AAA", 1), 6)+
		"\n    key: "+yamlBlock(c.KeyPEM, 6)+"\n#END\n", 1)
	s, _, lb := newTestStore(t, bad)
	sy := storesync.New(storesync.Options{Store: s, Plugins: plugins.Default, Retry: pollEvery,
		Log: slog.New(slog.NewTextHandler(lb, nil))})
	sp, err = sy.Load()
	if err != nil {
		t.Fatal(err)
	}
	if len(sp.SSLs) != 2 || sp.SSLs[0].ID.String() != "s1" || sp.SSLs[1].ID.String() != "arr_2" {
		t.Fatalf("ssls %+v", sp.SSLs)
	}
	if log := lb.String(); !strings.Contains(log, `item="apisix.yaml: ssls[2] (id bad)"`) || !strings.Contains(log, "failed to parse cert: ") {
		t.Fatalf("log: %s", log)
	}
}
