package standalone

import (
	"errors"
	"log/slog"
	"os"
	"path/filepath"
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

// TestSSLReferences: an ssl object of apisix.yaml whose cert and key are
// $env:// references reaches the Spec as written, through Parse and the
// store's sync; CheckFile (coregate -t) resolves them as the workers
// will, and reports one that does not resolve, naming the item, the
// member and the reference, never a value.
func TestSSLReferences(t *testing.T) {
	c := testcert.New(t, testcert.Options{DNSNames: []string{"a.com"}}, nil)
	t.Setenv("COREGATE_TEST_SSL_CERT", c.CertPEM)
	t.Setenv("COREGATE_TEST_SSL_KEY", c.KeyPEM)
	t.Setenv("COREGATE_TEST_SSL_UNSET", "")
	if err := os.Unsetenv("COREGATE_TEST_SSL_UNSET"); err != nil {
		t.Fatal(err)
	}
	body := "ssls:\n" +
		"  - id: s1\n    snis: [a.com]\n    cert: $env://COREGATE_TEST_SSL_CERT\n    key: $env://COREGATE_TEST_SSL_KEY\n" +
		"#END\n"
	sp, err := Parse([]byte(body), "apisix.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(sp.SSLs) != 1 || sp.SSLs[0].Key != "$env://COREGATE_TEST_SSL_KEY" || sp.SSLs[0].Cert != "$env://COREGATE_TEST_SSL_CERT" {
		t.Fatalf("ssls %+v", sp.SSLs)
	}
	s, _, lb := newTestStore(t, body)
	sy := storesync.New(storesync.Options{Store: s, Plugins: plugins.Default, Retry: pollEvery,
		Log: slog.New(slog.NewTextHandler(lb, nil))})
	if sp, err = sy.Load(); err != nil || len(sp.SSLs) != 1 || sp.SSLs[0].Key != "$env://COREGATE_TEST_SSL_KEY" {
		t.Fatalf("synced: %v %+v (log %s)", err, sp, lb)
	}

	path := filepath.Join(t.TempDir(), "apisix.yaml")
	writeFile(t, path, body)
	if err := CheckFile(path, plugins.NewRegistry(nil)); err != nil {
		t.Fatalf("-t of resolving references: %v", err)
	}
	writeFile(t, path, strings.Replace(body, "$env://COREGATE_TEST_SSL_KEY", "$env://COREGATE_TEST_SSL_UNSET", 1))
	err = CheckFile(path, plugins.NewRegistry(nil))
	if err == nil || !errors.Is(err, ErrInvalid) || err.Error() != "apisix.yaml: ssls (id s1): key: cannot resolve $env://COREGATE_TEST_SSL_UNSET: environment variable COREGATE_TEST_SSL_UNSET is not set" {
		t.Fatalf("-t of an unset variable: %v", err)
	}
	if strings.Contains(err.Error(), "PRIVATE KEY") {
		t.Fatal("a value in the error")
	}
}
