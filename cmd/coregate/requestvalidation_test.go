package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"coregate/admin/adminapi"
	"coregate/internal/e2e"
)

// TestAdminAPIRequestValidation: request-validation configured through
// the Admin API (request-validation.t's header_schema): a real client
// without the required header, or with a value the enum refuses, gets
// APISIX's 400 and message, or the route's rejected_msg; one with good
// headers reaches the upstream. Invalid schemas are refused with 400 and
// nothing stored; the plugin is listed with its schema.
func TestAdminAPIRequestValidation(t *testing.T) {
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

	if r := admin.do(t, c, "GET", "plugins/list", ""); r.status != 200 || !strings.Contains(r.body, `"request-validation"`) {
		t.Fatalf("plugins/list: %d %s", r.status, r.body)
	}
	r := do(t, c, "GET", fmt.Sprintf("http://127.0.0.1:%d/apisix/admin/schema/plugins/request-validation", adminPort), "",
		map[string]string{"X-API-KEY": adminapi.LegacyAdminKey}, nil)
	if r.status != 200 || !strings.Contains(r.body, `"max_req_body_size"`) {
		t.Fatalf("schema: %d %s", r.status, r.body)
	}

	for _, tc := range []struct{ conf, want string }{
		{`{}`, `object matches none of the required: [\"header_schema\"] or [\"body_schema\"]`},
		{`{"body_schema":{"type":"test"}}`, `body_schema: `},
		{`{"header_schema":{"type":"test"}}`, `header_schema: `},
		{`{"header_schema":{},"rejected_code":600}`, `property \"rejected_code\" validation failed: expected 600 to be at most 599`},
	} {
		r := put("routes/bad", fmt.Sprintf(`{"uri":"/bad","plugins":{"request-validation":%s},"upstream":{"nodes":{%q:1}}}`, tc.conf, up.Addr()), 400)
		if !strings.Contains(r.body, "failed to check the configuration of plugin request-validation err: "+tc.want) {
			t.Errorf("%s: %s", tc.conf, r.body)
		}
	}
	if r := admin.do(t, c, "GET", "routes/bad", ""); r.status != 404 {
		t.Fatalf("an invalid route was stored: %d %s", r.status, r.body)
	}

	put("routes/payload", fmt.Sprintf(`{"uri":"/opentracing","plugins":{"request-validation":{"header_schema":{"type":"object","required":["required_payload"],
		"properties":{"required_payload":{"type":"string"},"timeouts":{"type":"integer","minimum":1}}}}},"upstream":{"nodes":{%q:1}}}`, up.Addr()), 201)
	put("routes/enum", fmt.Sprintf(`{"uri":"/enum","plugins":{"request-validation":{"header_schema":{"type":"object","properties":{"test":{"type":"string","enum":["a","b","c"]}},"required":["test"]},
		"rejected_msg":"customize reject message for header_schema.required"}},"upstream":{"nodes":{%q:1}}}`, up.Addr()), 201)
	put("routes/pattern", fmt.Sprintf(`{"uri":"/pattern","plugins":{"request-validation":{"header_schema":{"patternProperties":{"^x-":{"type":"string","maxLength":3}}}}},
		"upstream":{"nodes":{%q:1}}}`, up.Addr()), 201)
	eventually(t, 10*time.Second, func() error {
		if r := do(t, c, "GET", g.url("/pattern"), "", map[string]string{"X-Long": "abcd"}, nil); r.status != 400 {
			return fmt.Errorf("/pattern: %d %q", r.status, r.body)
		}
		return nil
	})
	eventually(t, 10*time.Second, func() error {
		if r := do(t, c, "GET", g.url("/enum"), "", nil, nil); r.status != 400 {
			return fmt.Errorf("/enum: %d %q", r.status, r.body)
		}
		return nil
	})

	const custom = "customize reject message for header_schema.required"
	for _, tc := range []struct {
		name, path string
		hdr        map[string]string
		status     int
		body       string
	}{
		{"required missing", "/opentracing", map[string]string{"Content-Type": "application/json"}, 400, `property "required_payload" is required`},
		{"required present", "/opentracing", map[string]string{"required_payload": "test payload"}, 200, ""},
		{"required, hyphen", "/opentracing", map[string]string{"Required-Payload": "test payload"}, 200, ""},
		{"no integer", "/opentracing", map[string]string{"required_payload": "x", "timeouts": "3"}, 400,
			`property "timeouts" validation failed: wrong type: expected integer, got string`},
		{"enum missing", "/enum", nil, 400, custom},
		{"enum refused", "/enum", map[string]string{"test": "abc"}, 400, custom},
		{"enum allowed", "/enum", map[string]string{"test": "b"}, 200, ""},
		{"pattern refused", "/pattern", map[string]string{"X-Long": "abcd"}, 400,
			`failed to validate x-long (matching "^x-"): string too long, expected at most 3, got 4`},
		{"pattern passed", "/pattern", map[string]string{"X-Ok": "abc", "Other": "long enough"}, 200, ""},
	} {
		r := do(t, c, "GET", g.url(tc.path), "", tc.hdr, nil)
		if r.status != tc.status || tc.status != 200 && r.body != tc.body {
			t.Errorf("%s: %d %q, want %d %q", tc.name, r.status, r.body, tc.status, tc.body)
		}
		if tc.status == 200 {
			upstreamSaw(t, r)
		}
	}
}

// TestAdminAPIRequestValidationBody: body_schema through the Admin API
// (request-validation.t's body tests): a real client's JSON and form
// bodies, sent with Content-Length or chunked, are validated before the
// upstream is contacted; what passes reaches the upstream as sent, and
// what does not gets APISIX's 400 and message; a body over the limit
// gets 413.
func TestAdminAPIRequestValidationBody(t *testing.T) {
	t.Parallel()
	up := newHTTPUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, "%s %q %v", r.Method, b, r.TransferEncoding)
	})
	adminPort := freePort(t)
	g := startSupervisor(t, "", etcdConfig(adminPort, adminapi.LegacyAdminKey), 1)
	c := newClient(t)
	admin := legacyAdmin(adminPort)
	if r := admin.do(t, c, "PUT", "routes/echo", fmt.Sprintf(`{"uri":"/echo","plugins":{"request-validation":{"body_schema":{"type":"object",
		"properties":{"test":{"type":"string","enum":["a","b","c"]}},"required":["test"]},"max_req_body_size":1024}},"upstream":{"nodes":{%q:1}}}`, up.Addr())); r.status != 201 {
		t.Fatalf("PUT: %d %s", r.status, r.body)
	}
	eventually(t, 10*time.Second, func() error {
		if r := do(t, c, "GET", g.url("/echo"), "", nil, nil); r.status != 400 {
			return fmt.Errorf("/echo: %d %q", r.status, r.body)
		}
		return nil
	})

	// chunked hides the body's length: net/http sends it chunked.
	type chunked struct{ io.Reader }
	form := map[string]string{"Content-Type": "application/x-www-form-urlencoded"}
	for _, tc := range []struct {
		name   string
		hdr    map[string]string
		body   io.Reader
		status int
		resp   string
	}{
		{"json", nil, strings.NewReader(`{"test":"a"}`), 200, `POST "{\"test\":\"a\"}" []`},
		{"json, chunked", nil, chunked{strings.NewReader(`{"test":"b"}`)}, 200, `POST "{\"test\":\"b\"}" [chunked]`},
		{"refused", nil, strings.NewReader(`{"test":"abc"}`), 400, `property "test" validation failed: matches none of the enum values`},
		{"refused, chunked", nil, chunked{strings.NewReader(`{"x":1}`)}, 400, `property "test" is required`},
		{"form", form, strings.NewReader(strings.Repeat("a=b&", 101) + "test=c"), 200, ""},
		{"form refused", form, strings.NewReader("test=d"), 400, `property "test" validation failed: matches none of the enum values`},
		{"duplicate member", nil, strings.NewReader(`{"test":"a","test":"x"}`), 400, `duplicate member "test" in the body`},
		{"over the limit", nil, strings.NewReader(`{"test":"a","pad":"` + strings.Repeat("x", 1024) + `"}`), 413, ""},
	} {
		r := do(t, c, "POST", g.url("/echo"), "", tc.hdr, tc.body)
		if r.status != tc.status || tc.resp != "" && r.body != tc.resp {
			t.Errorf("%s: %d %q, want %d %q", tc.name, r.status, r.body, tc.status, tc.resp)
		}
	}

	// A client that sends "Expect: 100-continue" and waits for the 100
	// longer than it waits for the answer: the gateway's 100 Continue
	// lets the body come, before the phase runs.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	big := `{"test":"a","pad":"` + strings.Repeat("x", 900) + `"}`
	out, err := exec.CommandContext(ctx, "curl", "-sS", "--max-time", "3", "--expect100-timeout", "4", "-H", "Expect: 100-continue", "-H", "Content-Type: application/json",
		"--data-binary", big, "-w", " %{http_code}", g.url("/echo")).CombinedOutput()
	if err != nil || !strings.HasSuffix(string(out), " 200") || !strings.HasPrefix(string(out), "POST ") {
		t.Errorf("curl with 100-continue: %q %v", out, err)
	}
}

// TestAdminAPIRequestValidationBodyTLS: the body read for body_schema
// over an HTTPS listener, sent in pieces, chunked: a good body reaches the
// upstream, a bad one gets the validator's 400.
func TestAdminAPIRequestValidationBodyTLS(t *testing.T) {
	t.Parallel()
	p := newPKI(t)
	up := newHTTPUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, "%q", b)
	})
	g, admin := etcdTLS(t)
	c := newClient(t)
	cert := p.server(t, "body", false, "api.example.com")
	for _, o := range []struct{ path, body string }{
		{"ssls/1", sslJSON(t, obj{"snis": []string{"api.example.com"}, "cert": cert.CertPEM, "key": cert.KeyPEM})},
		{"routes/1", fmt.Sprintf(`{"uri":"/echo","plugins":{"request-validation":{"body_schema":{"type":"object","required":["test"]}}},"upstream":{"nodes":{%q:1}}}`, up.Addr())},
	} {
		if r := admin.do(t, c, "PUT", o.path, o.body); r.status != 201 {
			t.Fatalf("PUT %s: %d %s", o.path, r.status, r.body)
		}
	}
	hc := e2e.HTTPSClient(t, g.TLSAddr(), p.config(""), false)
	// pieces sends its body in several writes, without a length.
	type pieces struct{ io.Reader }
	body := func(s string) io.Reader {
		pr, pw := io.Pipe()
		go func() {
			for i := 0; i < len(s); i += 3 {
				_, _ = pw.Write([]byte(s[i:min(i+3, len(s))]))
				time.Sleep(2 * time.Millisecond)
			}
			pw.Close()
		}()
		return pieces{pr}
	}
	eventually(t, 10*time.Second, func() error {
		r, err := tryDo(hc, "POST", "https://api.example.com/echo", "", nil, body(`{"test":1}`))
		if err != nil || r.status != 200 || r.body != `"{\"test\":1}"` {
			return fmt.Errorf("good body: %d %q %v", r.status, r.body, err)
		}
		return nil
	})
	r, err := tryDo(hc, "POST", "https://api.example.com/echo", "", nil, body(`{"other":1}`))
	if err != nil || r.status != 400 || r.body != `property "test" is required` {
		t.Fatalf("bad body: %d %q %v", r.status, r.body, err)
	}
}
