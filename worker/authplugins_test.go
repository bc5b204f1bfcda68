package worker

import (
	"bytes"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"coregate/plugins"
	_ "coregate/plugins/all"
	"coregate/worker/accesslog"
	"coregate/worker/router"
)

// realHarness is a harness whose worker compiled s with the gateway's
// plugins (plugins.Default).
func realHarness(t testing.TB, routes, consumers, creds []string) *harness {
	t.Helper()
	w := New(Config{Listen: []string{"127.0.0.1:0"}})
	snap, err := compile(pluginSpec(t, routes, nil, consumers, creds), router.HostURI, upstreamEnv{}, pluginSet{env: w.cfg.Plugins}, nil, nil)
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

// TestAttachConsumerUnderscoresUpstream: a client's X_Consumer_Username
// and the other '_' spellings of attach_consumer's headers do not reach
// the upstream beside the consumer the gateway found; a field of another
// name with '_' still does.
func TestAttachConsumerUnderscoresUpstream(t *testing.T) {
	h := realHarness(t, []string{
		`{"id":"r1","uri":"/a","plugins":{"key-auth":{}},"upstream":{"nodes":{"127.0.0.1:1980":1}}}`,
	}, []string{`{"username":"jack","plugins":{"key-auth":{"key":"k1"}}}`}, nil)
	up, got := h.roundTrip([]byte("GET /a HTTP/1.1\r\nHost: h\r\napikey: k1\r\nX_Consumer_Username: admin\r\n"+
		"x-consumer_custom-id: admin-id\r\nX_Credential_Identifier: c\r\nX_Other: 1\r\n\r\n"), []byte(upOK))
	if !bytes.HasPrefix(got, []byte("HTTP/1.1 200 ")) {
		t.Fatalf("answer %q", got)
	}
	head := upHead(up)
	if !strings.Contains(head, "\r\nX-Consumer-Username: jack\r\n") || !strings.Contains(head, "\r\nX_Other: 1\r\n") ||
		strings.Contains(head, "admin") || strings.Contains(head, "X_Credential_Identifier") {
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

// TestCompileResolvesRefs: every plugin is built with its $env://
// references resolved from the worker's environment. A route or a
// consumer whose reference does not resolve is left out, logged with its
// field and never a value, and the rest is served: no credential matches
// the reference as written. A global rule so refused refuses the whole
// configuration.
func TestCompileResolvesRefs(t *testing.T) {
	const (
		key   = "COREGATE_WORKER_TEST_KEY"
		token = "COREGATE_WORKER_TEST_TOKEN"
		unset = "COREGATE_WORKER_TEST_UNSET"
	)
	t.Setenv(key, "k-secret")
	t.Setenv(token, "t-secret")
	t.Setenv(unset, "")
	if err := os.Unsetenv(unset); err != nil {
		t.Fatal(err)
	}
	up := `"upstream":{"nodes":{"127.0.0.1:1980":1}}`
	s := pluginSpec(t, []string{
		`{"id":"r1","uri":"/a","plugins":{"key-auth":{}},` + up + `}`,
		`{"id":"r2","uri":"/b","plugins":{"proxy-rewrite":{"headers":{"set":{"X-Token":"$env://` + unset + `"}}}},` + up + `}`,
		`{"id":"r3","uri":"/c","plugins":{"proxy-rewrite":{"headers":{"set":{"X-Token":"$ENV://` + token + `"}}}},` + up + `}`,
	}, nil, []string{
		`{"username":"jack","plugins":{"key-auth":{"key":"$env://` + key + `"}}}`,
		`{"username":"bob","plugins":{"key-auth":{"key":"$env://` + unset + `"}}}`,
		`{"username":"ann","plugins":{"key-auth":{"key":"k-ann"}}}`,
	}, nil)
	var log bytes.Buffer
	w := New(Config{Listen: []string{"127.0.0.1:0"}, Logger: slog.New(slog.NewTextHandler(&log, nil))})
	if err := w.SetSpec(s, nil); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`msg="configuration: object left out" err="consumer bob: failed to check the configuration of plugin key-auth err: property \"key\" validation failed: cannot resolve $env://` + unset,
		`msg="configuration: object left out" err="route r2: failed to check the configuration of plugin proxy-rewrite err: property \"headers\" validation failed: property \"set\" validation failed: property \"X-Token\" validation failed: cannot resolve $env://` + unset,
	} {
		if !strings.Contains(log.String(), want) {
			t.Errorf("log lacks %s:\n%s", want, log.String())
		}
	}
	if strings.Contains(log.String(), "secret") {
		t.Errorf("the log shows a value:\n%s", log.String())
	}
	h := newHarnessSnap(t, w, w.snap.Load())
	for _, tc := range []struct{ req, status, upWant string }{
		{"GET /a HTTP/1.1\r\nHost: h\r\napikey: k-secret\r\n\r\n", "200", "\r\nX-Consumer-Username: jack\r\n"},
		{"GET /a HTTP/1.1\r\nHost: h\r\napikey: $env://" + key + "\r\n\r\n", "401", ""},
		{"GET /a HTTP/1.1\r\nHost: h\r\napikey: $env://" + unset + "\r\n\r\n", "401", ""},
		{"GET /a HTTP/1.1\r\nHost: h\r\napikey: k-ann\r\n\r\n", "200", "\r\nX-Consumer-Username: ann\r\n"},
		{"GET /b HTTP/1.1\r\nHost: h\r\n\r\n", "404", ""},
		{"GET /c HTTP/1.1\r\nHost: h\r\n\r\n", "200", "\r\nX-Token: t-secret\r\n"},
	} {
		resp := []byte(upOK)
		if tc.upWant == "" {
			resp = nil
		}
		toUp, got := h.roundTrip([]byte(tc.req), resp)
		if !bytes.HasPrefix(got, []byte("HTTP/1.1 "+tc.status+" ")) {
			t.Errorf("%q: answer %q, want %s", tc.req, got, tc.status)
		}
		if !strings.Contains(upHead(toUp), tc.upWant) {
			t.Errorf("%q: upstream head lacks %q:\n%s", tc.req, tc.upWant, upHead(toUp))
		}
	}

	g := pluginSpec(t, []string{`{"id":"r1","uri":"/a",` + up + `}`},
		[]string{`{"id":"g1","plugins":{"proxy-rewrite":{"headers":{"set":{"X-Token":"$env://` + unset + `"}}}}}`}, nil, nil)
	if err := w.SetSpec(g, nil); !errors.Is(err, plugins.ErrReference) || !strings.HasPrefix(err.Error(), "global_rule g1: ") {
		t.Errorf("a global rule's unresolved reference: %v", err)
	}
}

// TestAccessLogArgsAfterKeyAuth: the access log's $args and $arg_NAME
// are ngx.var.args as the plugins left it, as the route vars' and the
// plugins' are: key-auth's hide_credentials takes the key out of them, as
// its ngx.req.set_uri_args does in APISIX. $request_uri stays as sent.
func TestAccessLogArgsAfterKeyAuth(t *testing.T) {
	path := filepath.Join(t.TempDir(), "access.log")
	f, err := accesslog.Compile("$args|$arg_apikey|$arg_x|$request_uri", accesslog.EscapeDefault)
	if err != nil {
		t.Fatal(err)
	}
	l, err := accesslog.Open(accesslog.Options{Path: path, Flush: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	w := New(Config{Listen: []string{"127.0.0.1:0"}, AccessLog: l, AccessLogFormat: f})
	snap, err := compile(pluginSpec(t, []string{
		`{"id":"r1","uri":"/a","plugins":{"key-auth":{"hide_credentials":true}},"upstream":{"nodes":{"127.0.0.1:1980":1}}}`,
	}, nil, []string{`{"username":"jack","plugins":{"key-auth":{"key":"k1"}}}`}, nil), router.HostURI, upstreamEnv{}, pluginSet{env: w.cfg.Plugins}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	h := newHarnessSnap(t, w, snap)
	h.roundTrip([]byte("GET /a?x=1&apikey=k1 HTTP/1.1\r\nHost: h\r\n\r\n"), []byte(upOK))
	l.Close()
	got, _ := os.ReadFile(path)
	if want := "x=1|-|1|/a?x=1&apikey=k1\n"; string(got) != want {
		t.Errorf("line %q, want %q", got, want)
	}
}
