package csrf

import (
	"encoding/base64"
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	"coregate/plugins"
	"coregate/plugins/plugintest"
)

func build(t testing.TB, conf string) *plugins.Phases { return plugintest.Build(t, Name, conf) }

// Tokens APISIX made with the key "userkey" (t/plugin/csrf.t): one that
// expires in 2053, one from January 2022, and one whose sign is not the
// key's.
const (
	apisixValid   = "eyJyYW5kb20iOjAuNDI5ODYzMTk3MTYxMzksInNpZ24iOiI0ODRlMDY4NTkxMWQ5NmJhMDc5YzQ1ZGI0OTE2NmZkYjQ0ODhjODVkNWQ0NmE1Y2FhM2UwMmFhZDliNjE5OTQ2IiwiZXhwaXJlcyI6MjY0MzExOTYyNH0="
	apisixOld     = "eyJyYW5kb20iOjAuMDY3NjAxMDQwMDM5MzI4LCJzaWduIjoiOTE1Yjg2MjBhNTg1N2FjZmIzNjIxOTNhYWVlN2RkYjY5NmM0NWYwZjE5YjY5Zjg3NjM4ZTllNGNjNjYxYjQwNiIsImV4cGlyZXMiOjE2NDMxMjAxOTN9"
	apisixBadSign = "eyJyYW5kb20iOjAuMTYwOTgzMDYwMTg0NDksInNpZ24iOiI2YTEyYmViYTI4MzAyNDg4MDRmNGU0N2VkZDY5MWFmNjg5N2IyNzQ4YTY1YWMwMDJiMGFjMzFlN2NlMDdlZTViIiwiZXhwaXJlcyI6MTc0MzExOTkxMX0="
)

// TestCheck: key is required, the others typed.
func TestCheck(t *testing.T) {
	const prefix = "failed to check the configuration of plugin csrf err: "
	for _, tc := range []struct{ conf, err string }{
		{`{"key":"userkey"}`, ""},
		{`{"key":"userkey","expires":1,"name":"x-token"}`, ""},
		{`{}`, prefix + `property "key" is required`},
		{`{"key":1}`, prefix + `property "key" validation failed: wrong type: expected string, got number`},
		{`{"key":"k","expires":"1"}`, prefix + `property "expires" validation failed: wrong type: expected integer, got string`},
	} {
		err := plugins.Check(Name, json.RawMessage(tc.conf))
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("%s: %v", tc.conf, err)
		case tc.err != "" && (err == nil || !strings.HasPrefix(err.Error(), tc.err)):
			t.Errorf("%s: err = %v, want %q…", tc.conf, err, tc.err)
		}
	}
}

// TestAccess: csrf.t's answers, APISIX's own tokens verified (or found
// expired, or badly signed) here.
func TestAccess(t *testing.T) {
	p := build(t, `{"key":"userkey","expires":1000000000}`)
	for _, tc := range []struct {
		method, header, cookie string
		status                 int
		body                   string
	}{
		{"GET", "", "", 0, ""},
		{"HEAD", "", "", 0, ""},
		{"OPTIONS", "", "", 0, ""},
		{"POST", "", "", 401, `{"error_msg":"no csrf token in headers"}`},
		{"POST", "wrongtoken", "", 401, `{"error_msg":"no csrf cookie"}`},
		{"POST", "", "testcookie", 401, `{"error_msg":"no csrf token in headers"}`},
		{"POST", "wrongtoken", "testcookie", 401, `{"error_msg":"csrf token mismatch"}`},
		{"POST", apisixBadSign, apisixBadSign, 401, `{"error_msg":"Failed to verify the csrf token signature"}`},
		{"POST", apisixValid, apisixValid, 0, ""},
		{"PUT", apisixOld, apisixOld, 0, ""}, // 2022: within 1e9 s
		{"POST", "bm90IGpzb24=", "bm90IGpzb24=", 401, `{"error_msg":"Failed to verify the csrf token signature"}`},
		{"POST", "!!", "!!", 401, `{"error_msg":"Failed to verify the csrf token signature"}`},
	} {
		c := plugintest.NewCtx(tc.method, "/hello")
		if tc.header != "" {
			c.WithHeader("apisix-csrf-token", tc.header)
		}
		if tc.cookie != "" {
			c.WithHeader("Cookie", "a=b; apisix-csrf-token="+tc.cookie)
		}
		plugintest.Run(p, c)
		if c.ExitStatus() != tc.status || tc.status != 0 && string(c.Body) != tc.body+"\n" {
			t.Errorf("%s %.12s/%.12s: %d %q, want %d %q", tc.method, tc.header, tc.cookie, c.ExitStatus(), c.Body, tc.status, tc.body)
		}
	}
	// expires 1: the 2022 token is too old; 0: never.
	for conf, want := range map[string]int{`{"key":"userkey","expires":1}`: 401, `{"key":"userkey","expires":0}`: 0} {
		c := plugintest.NewCtx("POST", "/hello").WithHeader("apisix-csrf-token", apisixOld).WithHeader("Cookie", "apisix-csrf-token="+apisixOld)
		plugintest.Run(build(t, conf), c)
		if c.ExitStatus() != want {
			t.Errorf("%s: %d, want %d", conf, c.ExitStatus(), want)
		}
	}
	// Another key does not verify APISIX's token.
	c := plugintest.NewCtx("POST", "/hello").WithHeader("apisix-csrf-token", apisixValid).WithHeader("Cookie", "apisix-csrf-token="+apisixValid)
	plugintest.Run(build(t, `{"key":"otherkey"}`), c)
	if c.ExitStatus() != 401 {
		t.Errorf("another key: %d, want 401", c.ExitStatus())
	}
}

// TestCookie: every response gets a new token in Set-Cookie, as csrf.lua
// writes it, which the next unsafe request carries back and passes with;
// a token of the name configured.
func TestCookie(t *testing.T) {
	p := build(t, `{"key":"userkey","expires":3600,"name":"x-csrf"}`)
	c := plugintest.NewCtx("GET", "/hello")
	c.Clock = time.Date(2026, 12, 5, 10, 0, 0, 0, time.UTC).UnixNano()
	plugintest.Run(p, c)
	set := c.ResponseHeaderValues("Set-Cookie")
	if len(set) != 1 {
		t.Fatalf("Set-Cookie %q", set)
	}
	m := regexp.MustCompile(`^x-csrf=([A-Za-z0-9+/=]+);path=/;SameSite=Lax;Expires=Sat, 05-Dec-26 11:00:00 GMT$`).FindStringSubmatch(set[0])
	if m == nil {
		t.Fatalf("Set-Cookie %q", set[0])
	}
	raw, err := base64.StdEncoding.DecodeString(m[1])
	if err != nil {
		t.Fatal(err)
	}
	var tok struct {
		Random  float64 `json:"random"`
		Expires int64   `json:"expires"`
		Sign    string  `json:"sign"`
	}
	if err := json.Unmarshal(raw, &tok); err != nil || tok.Expires != c.Clock/1e9 || len(tok.Sign) != 64 || tok.Random < 0 || tok.Random >= 1 {
		t.Fatalf("token %s: %v", raw, err)
	}
	post := plugintest.NewCtx("POST", "/hello").WithHeader("x-csrf", m[1]).WithHeader("Cookie", "x-csrf="+m[1])
	post.Clock = c.Clock + int64(3599*time.Second)
	plugintest.Run(p, post)
	if post.Exited() {
		t.Fatalf("its own token refused: %d %s", post.ExitStatus(), post.Body)
	}
	post.Reset()
	post.Clock = c.Clock + int64(3601*time.Second)
	plugintest.Run(p, post)
	if post.ExitStatus() != 401 {
		t.Fatalf("an expired token: %d", post.ExitStatus())
	}
	// A second response, a second token.
	c2 := plugintest.NewCtx("GET", "/hello")
	plugintest.Run(p, c2)
	if v := c2.ResponseHeaderValues("Set-Cookie"); len(v) != 1 || v[0] == set[0] {
		t.Fatalf("second Set-Cookie %q", v)
	}
}

// TestCookieTime: ngx.cookie_time's two-digit years until 2037.
func TestCookieTime(t *testing.T) {
	for tm, want := range map[time.Time]string{
		time.Date(2010, 11, 18, 11, 27, 35, 0, time.UTC): "Thu, 18-Nov-10 11:27:35 GMT",
		time.Date(2037, 1, 2, 3, 4, 5, 0, time.UTC):      "Fri, 02-Jan-37 03:04:05 GMT",
		time.Date(2038, 1, 2, 3, 4, 5, 0, time.UTC):      "Sat, 02-Jan-2038 03:04:05 GMT",
	} {
		if got := string(appendCookieTime(nil, tm)); got != want {
			t.Errorf("%v: %q, want %q", tm, got, want)
		}
	}
}
