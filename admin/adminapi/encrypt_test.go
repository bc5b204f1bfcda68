package adminapi

import (
	"net/http/httptest"
	"strings"
	"testing"

	"coregate/admin/keyring"
	"coregate/admin/store"
	"coregate/plugins"
	"coregate/plugins/keyauth"
	"coregate/plugins/limitcount"
)

// encPlugins has the real key-auth and limit-count, whose schemas name
// their secret fields (encrypt_fields).
var encPlugins = func() *plugins.Registry {
	r := plugins.NewRegistry([]plugins.Entry{{Name: "key-auth", Priority: 2500}, {Name: "limit-count", Priority: 1002}})
	r.Register("key-auth", keyauth.Plugin{})
	r.Register("limit-count", limitcount.Plugin{})
	return r
}()

func mustKeyring(t *testing.T, keys ...string) *keyring.Keyring {
	t.Helper()
	k, err := keyring.Parse(keys)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// newEncServer serves an Admin API that encrypts private keys with k and
// plugins' secret fields with fields.
func newEncServer(t *testing.T, k, fields *keyring.Keyring) *client {
	t.Helper()
	st := newStore(t)
	h, err := New(Options{Store: st, Admin: testAdmin(), Plugins: encPlugins, Keyring: k, FieldsKeyring: fields})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return &client{t: t, url: srv.URL, st: st, key: testKey, http: srv.Client()}
}

// TestDataEncryptionSSL: with a keyring, an SSL object's private keys are
// stored encrypted, as APISIX stores them; the answers to writes show
// them encrypted, GET not at all; a key sent encrypted (as APISIX stored
// it) is checked decrypted and stored as sent, one that does not decrypt
// is refused; PATCH does not encrypt twice.
func TestDataEncryptionSSL(t *testing.T) {
	k := mustKeyring(t, keyring.Default...)
	c := newEncServer(t, k, k)
	cert, key := testCert(t)
	obj := func(m map[string]any) string { return string(encodeJSON(m)) }

	r := c.do("PUT", "/apisix/admin/ssls/1", obj(map[string]any{"cert": cert, "key": key, "snis": []string{"test.com"},
		"certs": []string{cert}, "keys": []string{key}}))
	c.want(r, 201, "")
	if strings.Contains(string(r.body), "PRIVATE KEY") {
		t.Fatalf("the PUT answer shows a key in clear: %s", r.body)
	}
	s := c.stored("/ssls/1")
	enc := k.Encrypt(key)
	if s["key"] != enc || s["keys"].([]any)[0] != enc {
		t.Fatalf("stored key %v, keys %v; want %q", s["key"], s["keys"], enc)
	}
	if v := r.json(t)["value"].(map[string]any); v["key"] != enc {
		t.Fatalf("the PUT answer's key is %v, want what is stored", v["key"])
	}
	for _, p := range []string{"/apisix/admin/ssls/1", "/apisix/admin/ssls"} {
		r = c.do("GET", p, "")
		c.want(r, 200, "")
		if strings.Contains(string(r.body), `"key":"`+enc) || strings.Contains(string(r.body), `"keys"`) ||
			strings.Contains(string(r.body), enc) || strings.Contains(string(r.body), "PRIVATE KEY") || !strings.Contains(string(r.body), "test.com") {
			t.Fatalf("GET %s: %s", p, r.body)
		}
	}

	// PATCH merges into the stored object: the key stays encrypted once.
	c.want(c.do("PATCH", "/apisix/admin/ssls/1", `{"snis":["test.com","www.test.com"]}`), 200, "")
	if s := c.stored("/ssls/1"); s["key"] != enc || s["keys"].([]any)[0] != enc {
		t.Fatalf("after PATCH: key %v, keys %v; want %q", s["key"], s["keys"], enc)
	}
	// A sub-path PATCH with a key in PEM encrypts it.
	c.want(c.do("PATCH", "/apisix/admin/ssls/1/key", string(encodeJSON(key))), 200, "")
	if s := c.stored("/ssls/1"); s["key"] != enc {
		t.Fatalf("after PATCH of key: %v", s["key"])
	}

	// Sent encrypted, as APISIX stored it: checked in clear, stored as sent.
	c.want(c.do("PUT", "/apisix/admin/ssls/2", obj(map[string]any{"cert": cert, "key": enc, "sni": "test.com"})), 201, "")
	if s := c.stored("/ssls/2"); s["key"] != enc {
		t.Fatalf("an encrypted key was stored as %v", s["key"])
	}
	// Encrypted with another keyring: refused, as APISIX refuses it.
	other := mustKeyring(t, "0123456789abcdef").Encrypt(key)
	r = c.do("PUT", "/apisix/admin/ssls/3", obj(map[string]any{"cert": cert, "key": other, "sni": "test.com"}))
	c.want(r, 400, `{"error_msg":"failed to decrypt previous encrypted key","field":"key"}`)
	if c.stored("/ssls/3") != nil {
		t.Fatal("an ssl whose key does not decrypt was stored")
	}

	// A rotated keyring reads the old key and writes with the new one.
	rotated := mustKeyring(t, append([]string{"0123456789abcdef0123456789abcdef"}, keyring.Default...)...)
	c2 := newEncServer(t, rotated, rotated)
	c2.want(c2.do("PUT", "/apisix/admin/ssls/1", obj(map[string]any{"cert": cert, "key": enc, "sni": "test.com"})), 201, "")
	c2.want(c2.do("PUT", "/apisix/admin/ssls/2", obj(map[string]any{"cert": cert, "key": key, "sni": "test.com"})), 201, "")
	if got := c2.stored("/ssls/2")["key"]; got != rotated.Encrypt(key) || got == enc {
		t.Fatalf("rotated keyring stored %v", got)
	}

	// keyring: null stores the key as sent.
	c3 := newEncServer(t, nil, nil)
	c3.want(c3.do("PUT", "/apisix/admin/ssls/1", obj(map[string]any{"cert": cert, "key": key, "sni": "test.com"})), 201, "")
	if c3.stored("/ssls/1")["key"] != key {
		t.Fatal("without a keyring the key was not stored as sent")
	}
}

// TestDataEncryptionUpstreamClientKey: an upstream's tls.client_key is
// stored encrypted, as APISIX's upstream encrypt_conf.
func TestDataEncryptionUpstreamClientKey(t *testing.T) {
	k := mustKeyring(t, keyring.Default...)
	c := newEncServer(t, k, k)
	cert, key := testCert(t)
	tls := string(encodeJSON(map[string]any{"client_cert": cert, "client_key": key}))
	c.want(c.do("PUT", "/apisix/admin/upstreams/1", `{"nodes":{"127.0.0.1:1980":1},"tls":`+tls+`}`), 201, "")
	c.want(c.do("PUT", "/apisix/admin/routes/1", `{"uri":"/a","upstream":{"nodes":{"127.0.0.1:1980":1},"tls":`+tls+`}}`), 201, "")
	for _, p := range []string{"/upstreams/1", "/routes/1"} {
		s := c.stored(p)
		u := s
		if p == "/routes/1" {
			u = s["upstream"].(map[string]any)
		}
		if got := u["tls"].(map[string]any)["client_key"]; got != k.Encrypt(key) {
			t.Errorf("%s: client_key stored as %v", p, got)
		}
	}
}

// TestDataEncryptionPluginFields: with enable_encrypt_fields, key-auth's
// key and limit-count's redis_password are stored encrypted (the key
// byte for byte as APISIX stores it with its default keyring), GET shows
// them in clear (as APISIX), the unique-key check compares them in clear,
// and PATCH does not encrypt them twice.
func TestDataEncryptionPluginFields(t *testing.T) {
	k := mustKeyring(t, keyring.Default...)
	c := newEncServer(t, k, k)
	// What APISIX 3 stores for {"key-auth":{"key":"user-key"}} with its
	// default keyring (computed with OpenSSL, package keyring's tests).
	const apisixStored = "XU29sA3FEVF68hGcdPo7sg=="

	r := c.do("PUT", "/apisix/admin/consumers", `{"username":"jack","plugins":{"key-auth":{"key":"user-key"}}}`)
	c.want(r, 201, "")
	if got := c.stored("/consumers/jack")["plugins"].(map[string]any)["key-auth"].(map[string]any)["key"]; got != apisixStored {
		t.Fatalf("stored key %v, want %s", got, apisixStored)
	}
	if strings.Contains(string(r.body), "user-key") {
		t.Fatalf("the PUT answer shows the key in clear: %s", r.body)
	}
	for _, p := range []string{"/apisix/admin/consumers/jack", "/apisix/admin/consumers"} {
		r = c.do("GET", p, "")
		c.want(r, 200, "")
		if !strings.Contains(string(r.body), `"key":"user-key"`) {
			t.Fatalf("GET %s: %s", p, r.body)
		}
	}
	// Another consumer or credential with the same key is refused.
	c.want(c.do("PUT", "/apisix/admin/consumers", `{"username":"bob","plugins":{"key-auth":{"key":"user-key"}}}`), 400,
		`{"error_msg":"duplicate key of plugin key-auth found with consumer: jack","field":"plugins.key-auth.key"}`)
	c.want(c.do("PUT", "/apisix/admin/consumers", `{"username":"bob"}`), 201, "")
	c.want(c.do("PUT", "/apisix/admin/consumers/bob/credentials/c1", `{"plugins":{"key-auth":{"key":"user-key"}}}`), 400, "")
	c.want(c.do("PUT", "/apisix/admin/consumers/bob/credentials/c1", `{"plugins":{"key-auth":{"key":"bob-key"}}}`), 201, "")
	if got := c.stored("/consumers/bob/credentials/c1")["plugins"].(map[string]any)["key-auth"].(map[string]any)["key"]; got != k.Encrypt("bob-key") {
		t.Fatalf("credential key stored as %v", got)
	}
	// A value APISIX stored encrypted is shown in clear too.
	if _, _, err := c.st.Put(t.Context(), c.st.Prefix()+"/consumers/ann",
		[]byte(`{"username":"ann","plugins":{"key-auth":{"key":"gFmh9DIBEeNbj4knTl3xkw=="}}}`), store.PutOptions{IfModRevision: -1}); err != nil {
		t.Fatal(err)
	}
	r = c.do("GET", "/apisix/admin/consumers/ann", "")
	c.want(r, 200, "")
	if !strings.Contains(string(r.body), `"key":"user-key"`) {
		t.Fatalf("GET of APISIX's value: %s", r.body)
	}

	// limit-count's redis_password, on a route; a PATCH keeps it
	// encrypted once.
	lc := `{"count":1,"time_window":60,"policy":"redis","redis_host":"127.0.0.1","redis_password":"pw"}`
	c.want(c.do("PUT", "/apisix/admin/routes/1", `{"uri":"/a","upstream":{"nodes":{"127.0.0.1:1980":1}},"plugins":{"limit-count":`+lc+`}}`), 201, "")
	pw := func() any {
		return c.stored("/routes/1")["plugins"].(map[string]any)["limit-count"].(map[string]any)["redis_password"]
	}
	if pw() != k.Encrypt("pw") {
		t.Fatalf("redis_password stored as %v", pw())
	}
	c.want(c.do("PATCH", "/apisix/admin/routes/1", `{"plugins":{"limit-count":{"count":2}}}`), 200, "")
	if pw() != k.Encrypt("pw") {
		t.Fatalf("after PATCH, redis_password stored as %v", pw())
	}
	r = c.do("GET", "/apisix/admin/routes/1", "")
	if !strings.Contains(string(r.body), `"redis_password":"pw"`) || !strings.Contains(string(r.body), `"count":2`) {
		t.Fatalf("GET after PATCH: %s", r.body)
	}

	// A limit-count group's members are compared in clear: the stored
	// member's password, encrypted, is the same as the one sent.
	grp := `{"count":1,"time_window":60,"group":"g","policy":"redis","redis_host":"127.0.0.1","redis_password":"pw"}`
	c.want(c.do("PUT", "/apisix/admin/routes/g1", `{"uri":"/g1","upstream":{"nodes":{"127.0.0.1:1980":1}},"plugins":{"limit-count":`+grp+`}}`), 201, "")
	c.want(c.do("PUT", "/apisix/admin/routes/g2", `{"uri":"/g2","upstream":{"nodes":{"127.0.0.1:1980":1}},"plugins":{"limit-count":`+grp+`}}`), 201, "")
	c.want(c.do("PUT", "/apisix/admin/routes/g3", `{"uri":"/g3","upstream":{"nodes":{"127.0.0.1:1980":1}},"plugins":{"limit-count":`+
		strings.Replace(grp, `"pw"`, `"other"`, 1)+`}}`), 400, "")

	// enable_encrypt_fields false: the fields are stored as sent.
	c2 := newEncServer(t, k, nil)
	c2.want(c2.do("PUT", "/apisix/admin/consumers", `{"username":"jack","plugins":{"key-auth":{"key":"user-key"}}}`), 201, "")
	if got := c2.stored("/consumers/jack")["plugins"].(map[string]any)["key-auth"].(map[string]any)["key"]; got != "user-key" {
		t.Fatalf("without enable_encrypt_fields the key was stored as %v", got)
	}
}
