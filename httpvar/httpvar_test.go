package httpvar

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParse(t *testing.T) {
	names := []string{"uri", "host", "remote_addr", "request_method", "request_uri",
		"query_string", "args", "scheme", "server_port", "arg_id", "http_X_Real_IP",
		"http_user_agent", "cookie_sid", "arg_", "upstream_addr", "URI", "Arg_ID",
		"http_x-foo", "sent_http_X_Cache", "cookie_SID", "document_uri",
		"apisix_request_id", "x.y", "route_id", "balancer_ip", "remote_port",
		"server_addr", "Server_Name", "hostname"}
	var got []Var
	for _, n := range names {
		got = append(got, Parse(n))
	}
	want := []Var{
		{Kind: URI}, {Kind: Host}, {Kind: RemoteAddr}, {Kind: RequestMethod},
		{Kind: RequestURI}, {Kind: Args}, {Kind: Args}, {Kind: Scheme},
		{Kind: ServerPort}, {Kind: Arg, Name: "id"}, {Kind: HTTP, Name: "x_real_ip"},
		{Kind: HTTP, Name: "user_agent"}, {Kind: Cookie, Name: "sid"},
		{Kind: Unknown, Name: "arg_"}, {Kind: UpstreamAddr}, {Kind: URI}, {Kind: Arg, Name: "ID"},
		{Kind: HTTP, Name: "x_foo"}, {Kind: SentHTTP, Name: "x_cache"}, {Kind: Cookie, Name: "SID"},
		{Kind: URI}, {Kind: RequestID}, {Kind: Unknown, Name: "x.y"}, {Kind: RouteID}, {Kind: BalancerIP},
		{Kind: RemotePort}, {Kind: ServerAddr}, {Kind: ServerName}, {Kind: Hostname},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Parse (-want +got):\n%s", diff)
	}
}

// TestGroups: every name of the table is in one group, and the groups are
// those the package documents.
func TestGroups(t *testing.T) {
	exact, prefixes := Names()
	if len(exact) < 30 || len(prefixes) != 4 {
		t.Fatalf("Names: %d names, prefixes %q", len(exact), prefixes)
	}
	for _, n := range exact {
		k := Parse(n).Kind
		if k == Unknown {
			t.Errorf("%s: Unknown", n)
		}
		if k.Exchange() && k.LogOnly() {
			t.Errorf("%s: in two groups", n)
		}
	}
	for n, want := range map[string][2]bool{
		"uri": {false, false}, "cookie_a": {false, false}, "route_id": {true, false},
		"balancer_ip": {true, false}, "server_addr": {false, false}, "hostname": {false, false}, "remote_user": {false, true}, "sent_http_a": {false, true},
	} {
		if k := Parse(n).Kind; k.Exchange() != want[0] || k.LogOnly() != want[1] {
			t.Errorf("%s: exchange %v, log only %v; want %v", n, k.Exchange(), k.LogOnly(), want)
		}
	}
}

// TestHeaderIs: nginx's comparison, the header's '-' read as '_'.
func TestHeaderIs(t *testing.T) {
	for _, c := range []struct {
		header, name string
		want         bool
	}{
		{"X-Real-IP", "x_real_ip", true},
		{"x_real_ip", "x_real_ip", true},
		{"X-Real-IPs", "x_real_ip", false},
		{"X-Real", "x_real_ip", false},
		{"Xreal-ip", "x_real_ip", false},
	} {
		if got := HeaderIs(c.header, c.name); got != c.want {
			t.Errorf("HeaderIs(%q, %q) = %v", c.header, c.name, got)
		}
		if got := HeaderIs([]byte(c.header), c.name); got != c.want {
			t.Errorf("HeaderIs([]byte(%q), %q) = %v", c.header, c.name, got)
		}
	}
}

func TestQueryArg(t *testing.T) {
	q := []byte("a=1&b=&c&a=2&d=x%20y&=e")
	for name, want := range map[string]string{"a": "1", "b": "", "d": "x%20y", "": "e"} {
		v, ok := QueryArg(q, name)
		if !ok || string(v) != want || v == nil {
			t.Errorf("QueryArg(%q) = %q, %v; want %q", name, v, ok, want)
		}
	}
	for _, name := range []string{"c", "A", "x"} {
		if v, ok := QueryArg(q, name); ok {
			t.Errorf("QueryArg(%q) = %q, set", name, v)
		}
	}
}

func TestCookieValue(t *testing.T) {
	h := []byte("sid=abc; theme=dark ;x=1=2;empty=")
	for name, want := range map[string]string{"sid": "abc", "theme": "dark", "x": "1=2", "empty": ""} {
		if v, ok := CookieValue(h, name); !ok || string(v) != want {
			t.Errorf("CookieValue(%q) = %q, %v; want %q", name, v, ok, want)
		}
	}
	if v, ok := CookieValue(h, "SID"); ok {
		t.Errorf("CookieValue(SID) = %q, set", v)
	}
}

// TestEqualFold: ASCII letters in any case on either side, nothing else
// folded, lengths must match; strings and byte slices alike.
func TestEqualFold(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want bool
	}{
		{"Content-Length", "content-length", true},
		{"content-length", "CONTENT-LENGTH", true},
		{"te", "te", true},
		{"", "", true},
		{"te", "tex", false},
		{"X_A", "x-a", false},
		{"\u212a", "k", false},
	} {
		if got := EqualFold(tc.a, tc.b); got != tc.want {
			t.Errorf("EqualFold(%q, %q) = %v", tc.a, tc.b, got)
		}
		if got := EqualFold([]byte(tc.a), tc.b); got != tc.want {
			t.Errorf("EqualFold([]byte(%q), %q) = %v", tc.a, tc.b, got)
		}
		if got := EqualFold([]byte(tc.a), []byte(tc.b)); got != tc.want {
			t.Errorf("EqualFold([]byte(%q), []byte(%q)) = %v", tc.a, tc.b, got)
		}
	}
}
