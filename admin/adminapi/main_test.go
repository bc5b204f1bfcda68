package adminapi

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"coregate/admin/nodeconf"
	"coregate/admin/store/etcdstore"
	"coregate/plugins"
	"coregate/plugins/limitcount"
)

// The tests run the handler behind a real HTTP server on loopback, over
// the etcd store on one embedded etcd started for the package; each test
// works under a key prefix of its own.

var (
	etcdEndpoints []string
	etcdEmbedded  *etcdstore.Embedded // for stores that call it in process
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "adminapi-etcd-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	e, err := etcdstore.StartEmbedded(filepath.Join(dir, "etcd"), etcdstore.EmbedOptions{LogLevel: "none"})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	etcdEndpoints, etcdEmbedded = e.Endpoints, e
	code := m.Run()
	e.Stop()
	os.RemoveAll(dir)
	os.Exit(code)
}

const testKey = "test-admin-key-0123456789"
const testViewerKey = "test-viewer-key-0123456789"

var prefixN atomic.Int64

// newStore opens the etcd store under a fresh prefix.
func newStore(t testing.TB) *etcdstore.Store {
	t.Helper()
	s, err := etcdstore.New(etcdstore.Options{
		Endpoints: etcdEndpoints,
		Prefix:    fmt.Sprintf("/t%d-%d/apisix", os.Getpid(), prefixN.Add(1)),
		Timeout:   20 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// testAdmin is deployment.admin as the tests use it: APISIX's defaults
// with an admin and a viewer key.
func testAdmin() nodeconf.AdminConfig {
	a := nodeconf.Default().Deployment.Admin
	a.AdminKey = []nodeconf.AdminKey{
		{Name: "admin", Key: testKey, Role: "admin"},
		{Name: "viewer", Key: testViewerKey, Role: "viewer"},
	}
	return a
}

// client talks to one Admin API server.
type client struct {
	t    testing.TB
	url  string
	st   *etcdstore.Store
	key  string // sent as X-API-KEY unless empty
	http *http.Client
}

// newServer serves an Admin API over a fresh prefix of the etcd, with the
// test plugins, configured by admin.
func newServer(t testing.TB, admin nodeconf.AdminConfig) *client {
	t.Helper()
	st := newStore(t)
	h, err := New(Options{Store: st, Admin: admin, Plugins: testPlugins})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return &client{t: t, url: srv.URL, st: st, key: testKey, http: srv.Client()}
}

func newTestServer(t testing.TB) *client { return newServer(t, testAdmin()) }

// serve serves h on loopback.
func serve(t testing.TB, h http.Handler, st *etcdstore.Store) *client {
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return &client{t: t, url: srv.URL, st: st, key: testKey, http: srv.Client()}
}

// newUnreachableStore is the etcd store pointed at a loopback port
// nothing listens on: every call fails as with an etcd that is down.
func newUnreachableStore(t testing.TB) *etcdstore.Store {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	s, err := etcdstore.New(etcdstore.Options{Endpoints: []string{"http://" + addr}, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// response is one answer.
type response struct {
	status int
	header http.Header
	body   []byte
}

// json decodes the body as a tree (numbers as json.Number).
func (r response) json(t testing.TB) map[string]any {
	t.Helper()
	v, err := decodeJSON(r.body)
	if err != nil {
		t.Fatalf("body %q: %v", r.body, err)
	}
	m, ok := v.(map[string]any)
	if !ok {
		t.Fatalf("body %q: not an object", r.body)
	}
	return m
}

// do sends a request; hdr holds extra header lines "Name: value".
func (c *client) do(method, path, body string, hdr ...string) response {
	c.t.Helper()
	r, err := c.tryDo(method, path, body, hdr...)
	if err != nil {
		c.t.Fatal(err)
	}
	return r
}

// tryDo is do returning the error instead of failing the test, for
// goroutines of their own.
func (c *client) tryDo(method, path, body string, hdr ...string) (response, error) {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, c.url+path, rd)
	if err != nil {
		return response{}, err
	}
	if c.key != "" {
		req.Header.Set("X-API-KEY", c.key)
	}
	for _, h := range hdr {
		k, v, _ := strings.Cut(h, ":")
		req.Header.Set(k, strings.TrimSpace(v))
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return response{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return response{}, err
	}
	return response{status: resp.StatusCode, header: resp.Header, body: b}, nil
}

// want checks the status and, when body is not empty, the exact body
// (compared as JSON when it is JSON).
func (c *client) want(r response, status int, body string) {
	c.t.Helper()
	if r.status != status {
		c.t.Fatalf("status %d, want %d; body %s", r.status, status, r.body)
	}
	if body == "" {
		return
	}
	if !jsonEqual(r.body, []byte(body)) {
		c.t.Fatalf("body\n%s\nwant\n%s", r.body, body)
	}
}

func jsonEqual(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return strings.TrimSpace(string(a)) == strings.TrimSpace(string(b))
	}
	return fmt.Sprint(x) == fmt.Sprint(y)
}

// stored returns the value stored at key (relative to the prefix), or
// nil when there is none.
func (c *client) stored(key string) map[string]any {
	c.t.Helper()
	kv, err := c.st.Get(c.t.Context(), c.st.Prefix()+key)
	if err != nil {
		return nil
	}
	m, ok := decodeStored(kv.Value)
	if !ok {
		c.t.Fatalf("%s: stored %q is not an object", key, kv.Value)
	}
	return m
}

// Test plugins: a registry of three plugins named as APISIX's, with
// schemas close to theirs, so that plugin checks run through the real
// registry; key-auth authenticates.
var testPlugins = func() *plugins.Registry {
	r := plugins.NewRegistry([]plugins.Entry{{Name: "key-auth", Priority: 2500}, {Name: "limit-count", Priority: 1002}, {Name: "prometheus", Priority: 500}})
	r.Register("key-auth", testAuthPlugin{`{"type":"object","properties":{"header":{"type":"string"},"query":{"type":"string"},"key":{"type":"string"}}}`})
	// The real limit-count: its group check compares configurations
	// with their defaults (plugins.GroupPlugin).
	r.Register("limit-count", limitcount.Plugin{})
	r.Register("prometheus", testPlugin(`{"type":"object","properties":{"prefer_name":{"type":"boolean"}}}`))
	return r
}()

type testPlugin string

func (p testPlugin) Schema() []byte            { return []byte(p) }
func (testPlugin) Check(json.RawMessage) error { return nil }
func (testPlugin) Build(json.RawMessage, plugins.Env) (plugins.Instance, error) {
	return struct{}{}, nil
}

// testAuthPlugin is a testPlugin that authenticates: its consumers are
// found by their "key" (plugins.CredentialPlugin), as key-auth's.
type testAuthPlugin struct{ testPlugin }

func (testAuthPlugin) Credential(raw json.RawMessage) (string, error) {
	var c struct {
		Key string `json:"key"`
	}
	err := json.Unmarshal(raw, &c)
	return c.Key, err
}
