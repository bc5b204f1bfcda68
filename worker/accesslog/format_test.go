package accesslog

import (
	"errors"
	"testing"
	"time"

	"coregate/httpvar"
	"github.com/google/go-cmp/cmp"
)

func TestCompile(t *testing.T) {
	for _, tc := range []struct {
		format string
		want   []Part
	}{
		{"", nil},
		{"plain", []Part{{Kind: Literal, Text: "plain"}}},
		{`$remote_addr - [$time_local] "$request"`, []Part{
			{Kind: httpvar.RemoteAddr}, {Kind: Literal, Text: " - ["}, {Kind: httpvar.TimeLocal},
			{Kind: Literal, Text: `] "`}, {Kind: httpvar.Request}, {Kind: Literal, Text: `"`},
		}},
		{"${status}x$status", []Part{{Kind: httpvar.Status}, {Kind: Literal, Text: "x"}, {Kind: httpvar.Status}}},
		{"$http_user_agent $HTTP_X_Real_IP", []Part{
			{Kind: httpvar.HTTP, Name: "user_agent"}, {Kind: Literal, Text: " "}, {Kind: httpvar.HTTP, Name: "x_real_ip"},
		}},
		{"$arg_Page $cookie_sid $sent_http_x_id", []Part{
			{Kind: httpvar.Arg, Name: "Page"}, {Kind: Literal, Text: " "}, {Kind: httpvar.Cookie, Name: "sid"},
			{Kind: Literal, Text: " "}, {Kind: httpvar.SentHTTP, Name: "x_id"},
		}},
		{"$apisix_request_id $request_id $query_string $args", []Part{
			{Kind: httpvar.RequestID}, {Kind: Literal, Text: " "}, {Kind: httpvar.RequestID}, {Kind: Literal, Text: " "},
			{Kind: httpvar.Args}, {Kind: Literal, Text: " "}, {Kind: httpvar.Args},
		}},
		{"$route_id/$route_name/$service_id/$consumer_name", []Part{
			{Kind: httpvar.RouteID}, {Kind: Literal, Text: "/"}, {Kind: httpvar.RouteName}, {Kind: Literal, Text: "/"},
			{Kind: httpvar.ServiceID}, {Kind: Literal, Text: "/"}, {Kind: httpvar.ConsumerName},
		}},
		{"$msec.", []Part{{Kind: httpvar.Msec}, {Kind: Literal, Text: "."}}},
	} {
		f, err := Compile(tc.format, EscapeDefault)
		if err != nil {
			t.Errorf("Compile(%q): %v", tc.format, err)
			continue
		}
		if d := cmp.Diff(tc.want, f.Parts); d != "" {
			t.Errorf("Compile(%q) (-want +got):\n%s", tc.format, d)
		}
	}
}

func TestCompileErrors(t *testing.T) {
	for _, tc := range []struct{ format, msg string }{
		{"$nope", "access log format: unknown variable $nope"},
		{"a $ b", "access log format: $ without a variable name at offset 2"},
		{"${status", "access log format: missing } after ${status"},
		{"$http_", "access log format: unknown variable $http_"},
	} {
		_, err := Compile(tc.format, EscapeDefault)
		if err == nil || err.Error() != tc.msg || !errors.Is(err, ErrFormat) {
			t.Errorf("Compile(%q) = %v, want %q", tc.format, err, tc.msg)
		}
	}
}

func TestParseEscape(t *testing.T) {
	for s, want := range map[string]Escape{"default": EscapeDefault, "": EscapeDefault, "json": EscapeJSON, "none": EscapeNone} {
		if got, err := ParseEscape(s); err != nil || got != want {
			t.Errorf("ParseEscape(%q) = %v, %v", s, got, err)
		}
	}
	if _, err := ParseEscape("xml"); err == nil {
		t.Error("ParseEscape(xml): no error")
	}
}

func TestAppendValue(t *testing.T) {
	in := "a\"b\\c\x01\n\té\x7f z"
	for _, tc := range []struct {
		esc  Escape
		want string
	}{
		{EscapeDefault, `a\x22b\x5Cc\x01\x0A\x09\xC3\xA9\x7F z`},
		{EscapeJSON, "a\\\"b\\\\c\\u0001\\n\\té\x7f z"},
		{EscapeNone, in},
	} {
		if got := string(AppendValue([]byte("<"), []byte(in), tc.esc)); got != "<"+tc.want {
			t.Errorf("AppendValue(%v) = %q, want %q", tc.esc, got, "<"+tc.want)
		}
	}
	if got := string(AppendValue(nil, []byte{}, EscapeDefault)); got != "" {
		t.Errorf("an empty value: %q, want nothing", got)
	}
	if got := string(AppendUnset(nil, EscapeDefault)); got != "-" {
		t.Errorf("unset: %q, want -", got)
	}
	if got := string(AppendUnset(nil, EscapeJSON)); got != "" {
		t.Errorf("unset, json: %q, want nothing", got)
	}
}

func TestClock(t *testing.T) {
	c := Clock{Loc: time.FixedZone("X", 2*3600)}
	ns := time.Date(2026, 12, 1, 12, 36, 17, 123456789, time.UTC).UnixNano()
	if got := string(c.AppendTimeLocal(nil, ns)); got != "01/Dec/2026:14:36:17 +0200" {
		t.Errorf("time_local %q", got)
	}
	if got := string(c.AppendISO8601(nil, ns)); got != "2026-12-01T14:36:17+02:00" {
		t.Errorf("time_iso8601 %q", got)
	}
	if got := string(c.AppendTimeLocal(nil, ns+int64(time.Second))); got != "01/Dec/2026:14:36:18 +0200" {
		t.Errorf("the next second: %q", got)
	}
	for ns, want := range map[int64]string{
		0: "0.000", 999_999: "0.000", 1_000_000: "0.001", 1_234_567_890: "1.234", 61_050_000_000: "61.050", -5: "0.000",
	} {
		if got := string(AppendMillis(nil, ns)); got != want {
			t.Errorf("AppendMillis(%d) = %q, want %q", ns, got, want)
		}
	}
}
