package storesync

import (
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"coregate/internal/syncbuf"
	"coregate/internal/testcert"
	"coregate/plugins"
)

// TestSSLs: ssls stored in etcd reach the Spec as the Admin API stores
// them, keys unread (an encrypted one too); an invalid one is logged with
// its message and left out, and served once mended.
func TestSSLs(t *testing.T) {
	e := newEnv(t)
	c := testcert.New(t, testcert.Options{DNSNames: []string{"a.com"}}, nil)
	obj := func(m map[string]any) string {
		b, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	enc := strings.Repeat("E", 80) // an encrypted key, as apisix.data_encryption stores it
	e.put("ssls/1", obj(map[string]any{"id": "1", "cert": c.CertPEM, "key": c.KeyPEM, "snis": []string{"a.com"}}))
	e.put("ssls/2", obj(map[string]any{"cert": c.CertPEM, "key": enc, "type": "client"}))
	e.put("ssls/3", obj(map[string]any{"id": "3", "cert": c.CertPEM, "key": c.KeyPEM})) // no sni
	e.put("routes/1", route("/one"))
	var logs syncbuf.Buffer
	s := New(Options{Store: e.store, CachePath: e.cache, Retry: 200 * time.Millisecond, Plugins: plugins.Default,
		Log: slog.New(slog.NewTextHandler(&logs, nil))})
	sp, err := s.Load()
	if err != nil {
		t.Fatal(err)
	}
	if len(sp.SSLs) != 2 || sp.SSLs[0].ID.String() != "1" || sp.SSLs[0].Key != c.KeyPEM ||
		sp.SSLs[1].ID.String() != "2" || sp.SSLs[1].Key != enc || !sp.SSLs[1].IsClient() {
		t.Fatalf("ssls %+v", sp.SSLs)
	}
	if l := logs.String(); !strings.Contains(l, "invalid object left out") || !strings.Contains(l, "/apisix/ssls/3") ||
		!strings.Contains(l, "value should match only one schema, but matches none") {
		t.Fatalf("log: %s", l)
	}
	e.watch(s)
	e.put("ssls/3", obj(map[string]any{"id": "3", "cert": c.CertPEM, "key": c.KeyPEM, "sni": "b.com"}))
	deadline := time.After(30 * time.Second)
	for {
		select {
		case sp = <-e.specs:
		case <-deadline:
			t.Fatal("the mended ssl is not served within 30 s")
		}
		if len(sp.SSLs) == 3 && sp.SSLs[2].SNI == "b.com" {
			break
		}
	}
	if err := sp.Check(); err != nil {
		t.Fatal(err)
	}
}
