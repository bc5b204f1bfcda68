package worker

import (
	"bytes"
	"testing"

	_ "coregate/plugins/all"
	"coregate/worker/router"
)

// realHarness is a harness whose worker compiled s with the gateway's
// plugins (plugins.Default).
func realHarness(t testing.TB, routes, consumers, creds []string) *harness {
	t.Helper()
	w := New(Config{Listen: []string{"127.0.0.1:0"}})
	snap, err := compile(pluginSpec(t, routes, nil, consumers, creds), router.HostURI, Keepalive{}, pluginSet{env: w.cfg.Plugins}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	return newHarnessSnap(t, w, snap)
}

// upHead is the request line and headers the upstream got.
func upHead(up []byte) string {
	if i := bytes.Index(up, []byte("\r\n\r\n")); i >= 0 {
		return string(up[:i+2])
	}
	return string(up)
}

// TestKeyAuthArgsReachProxyRewrite: key-auth's hide_credentials takes the
// query key out of $args and proxy-rewrite, which rebuilds the target
// after it, sends the edited arguments; a header template reads them too.
// The arguments of the request the client sent stay its own: nothing
// leaks into the next exchange on the connection.
func TestKeyAuthArgsReachProxyRewrite(t *testing.T) {
	h := realHarness(t, []string{
		`{"id":"r1","uri":"/a","plugins":{"key-auth":{"hide_credentials":true},` +
			`"proxy-rewrite":{"uri":"/up","headers":{"set":{"X-Args":"[$args]","X-Key":"[$arg_apikey]"}}}},` +
			`"upstream":{"nodes":{"127.0.0.1:1980":1}}}`,
		`{"id":"r2","uri":"/b","plugins":{"proxy-rewrite":{"uri":"/up2","headers":{"set":{"X-Args":"[$args]"}}}},` +
			`"upstream":{"nodes":{"127.0.0.1:1980":1}}}`,
	}, []string{`{"username":"jack","plugins":{"key-auth":{"key":"k1"}}}`}, nil)
	up, got := h.roundTrip([]byte("GET /a?x=1&apikey=k1&y=2 HTTP/1.1\r\nHost: h\r\n\r\n"), []byte(upOK))
	head := upHead(up)
	if !bytes.HasPrefix(got, []byte("HTTP/1.1 200 ")) {
		t.Fatalf("answer %q", got)
	}
	for _, want := range []string{"GET /up?x=1&y=2 HTTP/1.1\r\n", "\r\nX-Args: [x=1&y=2]\r\n", "\r\nX-Key: []\r\n", "\r\nX-Consumer-Username: jack\r\n"} {
		if !bytes.Contains([]byte(head), []byte(want)) {
			t.Fatalf("upstream head lacks %q:\n%s", want, head)
		}
	}
	if bytes.Contains(up, []byte("k1")) {
		t.Fatalf("the key went upstream:\n%s", head)
	}
	// Only the key: no query left at all.
	up, _ = h.roundTrip([]byte("GET /a?apikey=k1 HTTP/1.1\r\nHost: h\r\n\r\n"), []byte(upOK))
	if head := upHead(up); !bytes.HasPrefix([]byte(head), []byte("GET /up HTTP/1.1\r\n")) || !bytes.Contains(up, []byte("\r\nX-Args: []\r\n")) {
		t.Fatalf("upstream head:\n%s", head)
	}
	// The next exchange, without key-auth, reads its own arguments.
	up, _ = h.roundTrip([]byte("GET /b?apikey=k9&z=3 HTTP/1.1\r\nHost: h\r\n\r\n"), []byte(upOK))
	if head := upHead(up); !bytes.HasPrefix([]byte(head), []byte("GET /up2?apikey=k9&z=3 HTTP/1.1\r\n")) ||
		!bytes.Contains(up, []byte("\r\nX-Args: [apikey=k9&z=3]\r\n")) {
		t.Fatalf("upstream head:\n%s", head)
	}
}

// TestKeyAuthNotRerunForConsumer: once key-auth attaches a consumer with
// plugins of its own, the rewrite phase runs only the plugins the
// consumer adds; key-auth does not run again, neither with the route's
// configuration nor the consumer's ({"key": ...}, whose defaults would
// look for an apikey header this request does not have and answer 401).
func TestKeyAuthNotRerunForConsumer(t *testing.T) {
	h := realHarness(t, []string{
		`{"id":"r1","uri":"/a","plugins":{"key-auth":{"header":"X-Key","hide_credentials":true}},` +
			`"upstream":{"nodes":{"127.0.0.1:1980":1}}}`,
	}, []string{
		`{"username":"jack","plugins":{"key-auth":{"key":"k1"},"proxy-rewrite":{"headers":{"set":{"X-Who":"jack"}}}}}`,
	}, []string{`{"id":"jack/credentials/c1","plugins":{"key-auth":{"key":"k2"}}}`})
	for _, key := range []string{"k1", "k2"} {
		up, got := h.roundTrip([]byte("GET /a HTTP/1.1\r\nHost: h\r\nX-Key: "+key+"\r\n\r\n"), []byte(upOK))
		if !bytes.HasPrefix(got, []byte("HTTP/1.1 200 ")) {
			t.Fatalf("key %s: answer %q", key, got)
		}
		head := upHead(up)
		for _, want := range []string{"\r\nX-Who: jack\r\n", "\r\nX-Consumer-Username: jack\r\n"} {
			if !bytes.Contains([]byte(head), []byte(want)) {
				t.Fatalf("key %s: upstream head lacks %q:\n%s", key, want, head)
			}
		}
		if bytes.Contains([]byte(head), []byte("X-Key")) {
			t.Fatalf("key %s: the key went upstream:\n%s", key, head)
		}
	}
	_, got := h.roundTrip([]byte("GET /a HTTP/1.1\r\nHost: h\r\nX-Key: nope\r\n\r\n"), []byte(upOK))
	if !bytes.HasPrefix(got, []byte("HTTP/1.1 401 ")) {
		t.Fatalf("bad key: answer %q", got)
	}
}
