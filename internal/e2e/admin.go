package e2e

import (
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
)

// Admin is a node's Admin API on 127.0.0.1:Port, as a client that sends
// Key as X-API-KEY sees it ("": no key sent). It holds no connection:
// requests go through the client given, and it is safe for concurrent use.
type Admin struct {
	Port int
	Key  string
}

// URL is the URL of path under /apisix/admin/ ("routes/1").
func (a Admin) URL(path string) string {
	return "http://127.0.0.1:" + strconv.Itoa(a.Port) + "/apisix/admin/" + path
}

// Do sends method on path (under /apisix/admin/) with body ("": none)
// through c and reads the whole answer, failing the test when it cannot.
func (a Admin) Do(t testing.TB, c *http.Client, method, path, body string) Result {
	t.Helper()
	r, err := a.TryDo(c, method, path, body)
	if err != nil {
		t.Fatalf("%s %s: %v", method, a.URL(path), err)
	}
	return r
}

// TryDo is Do returning the error.
func (a Admin) TryDo(c *http.Client, method, path, body string) (Result, error) {
	var hdr map[string]string
	if a.Key != "" {
		hdr = map[string]string{"X-API-KEY": a.Key}
	}
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	return TryDo(c, method, a.URL(path), "", hdr, r)
}
