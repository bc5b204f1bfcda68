package main

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"coregate/admin/adminapi"
)

// TestAdminAPIHMACAuth: hmac-auth configured through the Admin API, a
// consumer's and a credential's key_id and secret_key: a real client that
// signs its requests as APISIX's clients do passes as the consumer, others
// get APISIX's answers; with hide_credentials the upstream gets no
// Authorization; the secret_key is stored encrypted; an invalid
// max_req_body_size is refused; the plugin is listed with its schemas.
func TestAdminAPIHMACAuth(t *testing.T) {
	t.Parallel()
	up := headEchoUpstream(t)
	adminPort := freePort(t)
	g := startSupervisor(t, "", etcdConfig(adminPort, adminapi.LegacyAdminKey), 1)
	c := newClient(t)
	admin := legacyAdmin(adminPort)
	put := func(path, body string, want int) result {
		t.Helper()
		r := admin.do(t, c, "PUT", path, body)
		if r.status != want {
			t.Fatalf("PUT %s: %d %s, want %d", path, r.status, r.body, want)
		}
		return r
	}
	// sign signs a GET of target over @request-target, date and x-custom-a.
	sign := func(keyID, secret, target string) map[string]string {
		date := time.Now().UTC().Format(http.TimeFormat)
		m := hmac.New(sha256.New, []byte(secret))
		fmt.Fprintf(m, "%s\nGET %s\ndate: %s\nx-custom-a: 1\n", keyID, target, date)
		return map[string]string{"Date": date, "X-Custom-A": "1",
			"Authorization": fmt.Sprintf(`Signature keyId=%q,algorithm="hmac-sha256",headers="@request-target date x-custom-a",signature=%q`,
				keyID, base64.StdEncoding.EncodeToString(m.Sum(nil)))}
	}

	if r := admin.do(t, c, "GET", "plugins/list", ""); r.status != 200 || !strings.Contains(r.body, `"hmac-auth"`) {
		t.Fatalf("plugins/list: %d %s", r.status, r.body)
	}
	if r := admin.do(t, c, "GET", "plugins/hmac-auth?schema_type=consumer", ""); r.status != 200 || !strings.Contains(r.body, `"secret_key"`) {
		t.Fatalf("consumer schema: %d %s", r.status, r.body)
	}
	r := do(t, c, "GET", fmt.Sprintf("http://127.0.0.1:%d/apisix/admin/schema/plugins/hmac-auth", adminPort), "",
		map[string]string{"X-API-KEY": adminapi.LegacyAdminKey}, nil)
	if r.status != 200 || !strings.Contains(r.body, `"allowed_algorithms"`) {
		t.Fatalf("schema: %d %s", r.status, r.body)
	}

	r = put("routes/bad", fmt.Sprintf(`{"uri":"/bad","plugins":{"hmac-auth":{"validate_request_body":true,"max_req_body_size":0}},"upstream":{"nodes":{%q:1}}}`, up.Addr()), 400)
	if !strings.Contains(r.body, `failed to check the configuration of plugin hmac-auth err: property \"max_req_body_size\" validation failed: expected 0 to be at least 1`) {
		t.Fatalf("max_req_body_size: %s", r.body)
	}
	r = put("consumers", `{"username":"rose","plugins":{"hmac-auth":{"key_id":"user-key"}}}`, 400)
	if !strings.Contains(r.body, `failed to check the configuration of plugin hmac-auth err: property \"secret_key\" is required`) {
		t.Fatalf("no secret_key: %s", r.body)
	}

	put("routes/1", fmt.Sprintf(`{"uri":"/hm","plugins":{"hmac-auth":{"hide_credentials":true,"signed_headers":["date","x-custom-a"]}},"upstream":{"nodes":{%q:1}}}`, up.Addr()), 201)
	put("consumers", `{"username":"jack","plugins":{"hmac-auth":{"key_id":"my-access-key","secret_key":"my-secret-key"}}}`, 201)
	put("consumers/jack/credentials/c1", `{"plugins":{"hmac-auth":{"key_id":"jack-key-2","secret_key":"another-secret"}}}`, 201)
	eventually(t, 10*time.Second, func() error {
		if r := do(t, c, "GET", g.url("/hm"), "", sign("jack-key-2", "another-secret", "/hm"), nil); r.status != 200 {
			return fmt.Errorf("credential c1: %d %q", r.status, r.body)
		}
		return nil
	})
	for _, who := range [][2]string{{"my-access-key", "my-secret-key"}, {"jack-key-2", "another-secret"}} {
		e := upstreamSaw(t, do(t, c, "GET", g.url("/hm?a=1"), "", sign(who[0], who[1], "/hm?a=1"), nil))
		if e.get("X-Consumer-Username") != "jack" || e.has("Authorization") || e.get("X-Custom-A") != "1" {
			t.Fatalf("%s: upstream saw %+v", who[0], e)
		}
	}

	stale := sign("my-access-key", "my-secret-key", "/hm")
	stale["Date"] = "Thu, 24 Sep 2020 06:39:52 GMT"
	noCustom := sign("my-access-key", "my-secret-key", "/hm")
	noCustom["Authorization"] = strings.Replace(noCustom["Authorization"], ` x-custom-a"`, `"`, 1)
	const (
		notValid = `{"message":"client request can't be validated"}` + "\n"
	)
	for _, tc := range []struct {
		name string
		hdr  map[string]string
		body string
	}{
		{"missing", nil, `{"message":"client request can't be validated: missing Authorization header"}` + "\n"},
		{"not Signature", map[string]string{"Authorization": "Basic YmFy"},
			`{"message":"client request can't be validated: Authorization header does not start with 'Signature'"}` + "\n"},
		{"wrong secret", sign("my-access-key", "other", "/hm"), notValid},
		{"unknown key", sign("sdf", "my-secret-key", "/hm"), notValid},
		{"other target", sign("my-access-key", "my-secret-key", "/other"), notValid},
		{"clock skew", stale, notValid},
		{"signed header not listed", noCustom, notValid},
	} {
		r := do(t, c, "GET", g.url("/hm"), "", tc.hdr, nil)
		if r.status != 401 || r.body != tc.body || r.header.Get("WWW-Authenticate") != `hmac realm="hmac"` {
			t.Errorf("%s: %d %q %q", tc.name, r.status, r.body, r.header.Get("WWW-Authenticate"))
		}
	}

	// Stored encrypted, never in clear.
	s := embeddedStore(t, g.dir)
	for _, key := range []string{"/apisix/consumers/jack", "/apisix/consumers/jack/credentials/c1"} {
		kv, err := s.Get(context.Background(), key)
		if err != nil {
			t.Fatal(err)
		}
		if v := string(kv.Value); !strings.Contains(v, `"secret_key":"`) || strings.Contains(v, `secret"`) || strings.Contains(v, `-secret-key"`) {
			t.Fatalf("%s: etcd holds %s", key, v)
		}
	}
	r = put("consumers", `{"username":"rose","plugins":{"hmac-auth":{"key_id":"my-access-key","secret_key":"x"}}}`, 400)
	if !strings.Contains(r.body, `duplicate key_id of plugin hmac-auth found with consumer: jack`) {
		t.Fatalf("duplicate key_id: %s", r.body)
	}
}

// TestAdminAPIHMACAuthREADME: the client of plugins/hmacauth/README.md, a
// shell script signing with openssl, passes the README's route as its
// consumer.
func TestAdminAPIHMACAuthREADME(t *testing.T) {
	t.Parallel()
	for _, tool := range []string{"bash", "openssl", "base64"} {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatalf("%s is missing", tool)
			}
			t.Skipf("%s is missing", tool)
		}
	}
	md, err := os.ReadFile("../../plugins/hmacauth/README.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)```sh\n(.*?)```").FindSubmatch(md)
	if m == nil {
		t.Fatal("README.md shows no sh block")
	}
	up := headEchoUpstream(t)
	adminPort := freePort(t)
	g := startSupervisor(t, "", etcdConfig(adminPort, adminapi.LegacyAdminKey), 1)
	c := newClient(t)
	admin := legacyAdmin(adminPort)
	for _, o := range [][2]string{
		{"consumers", `{"username":"jack","plugins":{"hmac-auth":{"key_id":"my-access-key","secret_key":"my-secret-key"}}}`},
		{"routes/1", fmt.Sprintf(`{"uri":"/hello","plugins":{"hmac-auth":{}},"upstream":{"nodes":{%q:1}}}`, up.Addr())},
	} {
		if r := admin.do(t, c, "PUT", o[0], o[1]); r.status != 201 {
			t.Fatalf("PUT %s: %d %s", o[0], r.status, r.body)
		}
	}
	script := strings.Replace(string(m[1]), "http://127.0.0.1:9080/hello", g.url("/hello"), 1)
	if script == string(m[1]) {
		t.Fatal("the README's script does not call http://127.0.0.1:9080/hello")
	}
	eventually(t, 10*time.Second, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		out, err := exec.CommandContext(ctx, "bash", "-c", "set -e -o pipefail\ncurl() { command curl -sS --fail-with-body \"$@\"; }\n"+script).CombinedOutput()
		if err != nil || !strings.Contains(string(out), `"X-Consumer-Username":["jack"]`) {
			return fmt.Errorf("the README's client: %v: %s", err, out)
		}
		return nil
	})
}

// TestAdminAPIHMACAuthBody: hmac-auth with validate_request_body through
// the Admin API (t/plugin/hmac-auth3.t): a real client's signed POST whose
// Digest is its body's SHA-256, sent with Content-Length or chunked,
// reaches the upstream with that body; a missing or wrong Digest is 401,
// a body over max_req_body_size 413, the upstream not contacted.
func TestAdminAPIHMACAuthBody(t *testing.T) {
	t.Parallel()
	var hits atomic.Int64
	up := newHTTPUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		b, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, "%q %v", b, r.TransferEncoding)
	})
	adminPort := freePort(t)
	g := startSupervisor(t, "", etcdConfig(adminPort, adminapi.LegacyAdminKey), 1)
	c := newClient(t)
	admin := legacyAdmin(adminPort)
	for _, p := range []struct{ path, body string }{
		{"consumers", `{"username":"jack","plugins":{"hmac-auth":{"key_id":"my-access-key","secret_key":"my-secret-key"}}}`},
		{"routes/1", fmt.Sprintf(`{"uri":"/hello","plugins":{"hmac-auth":{"validate_request_body":true,"max_req_body_size":64}},"upstream":{"nodes":{%q:1}}}`, up.Addr())},
	} {
		if r := admin.do(t, c, "PUT", p.path, p.body); r.status != 201 {
			t.Fatalf("PUT %s: %d %s", p.path, r.status, r.body)
		}
	}
	// signed is a POST of /hello signed over @request-target and date,
	// with a Digest header unless digest is "".
	signed := func(digest string) map[string]string {
		date := time.Now().UTC().Format(http.TimeFormat)
		m := hmac.New(sha256.New, []byte("my-secret-key"))
		fmt.Fprintf(m, "my-access-key\nPOST /hello\ndate: %s\n", date)
		h := map[string]string{"Date": date,
			"Authorization": `Signature keyId="my-access-key",algorithm="hmac-sha256",headers="@request-target date",signature="` +
				base64.StdEncoding.EncodeToString(m.Sum(nil)) + `"`}
		if digest != "" {
			h["Digest"] = digest
		}
		return h
	}
	digest := func(body string) string {
		sum := sha256.Sum256([]byte(body))
		return "SHA-256=" + base64.StdEncoding.EncodeToString(sum[:])
	}
	const body = `{"name": "world"}`
	eventually(t, 10*time.Second, func() error {
		if r := do(t, c, "POST", g.url("/hello"), "", signed(digest(body)), strings.NewReader(body)); r.status != 200 {
			return fmt.Errorf("signed: %d %q", r.status, r.body)
		}
		return nil
	})
	hits.Store(0)

	type chunked struct{ io.Reader } // no length: net/http sends it chunked
	const notValidated = `{"message":"client request can't be validated"}` + "\n"
	for _, tc := range []struct {
		name   string
		hdr    map[string]string
		body   io.Reader
		status int
		resp   string
	}{
		{"digest ok", signed(digest(body)), strings.NewReader(body), 200, `"{\"name\": \"world\"}" []`},
		{"digest ok, chunked", signed(digest(body)), chunked{strings.NewReader(body)}, 200, `"{\"name\": \"world\"}" [chunked]`},
		{"digest missing", signed(""), strings.NewReader(body), 401, notValidated},
		{"digest wrong", signed("hello"), strings.NewReader(body), 401, notValidated},
		{"another body", signed(digest(body)), chunked{strings.NewReader(body + " ")}, 401, notValidated},
		{"over max_req_body_size", signed(digest(strings.Repeat("x", 65))), strings.NewReader(strings.Repeat("x", 65)), 413, ""},
	} {
		r := do(t, c, "POST", g.url("/hello"), "", tc.hdr, tc.body)
		if r.status != tc.status || tc.resp != "" && r.body != tc.resp {
			t.Errorf("%s: %d %q, want %d %q", tc.name, r.status, r.body, tc.status, tc.resp)
		}
	}
	if n := hits.Load(); n != 2 {
		t.Errorf("the upstream got %d requests, want the 2 with a good digest", n)
	}
}
