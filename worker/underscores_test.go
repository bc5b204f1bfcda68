package worker

import (
	"strings"
	"testing"
)

// TestDropUnderscores: with underscores_in_headers off (Config
// .DropUnderscores) a request's fields whose names have a "_" are gone
// before routing: a route's vars do not see them and the upstream does
// not get them, while the other fields, before and after them, go on.
// On, APISIX's default, they are forwarded and matched.
func TestDropUnderscores(t *testing.T) {
	s := testSpec(t, []string{`{"id":"1","nodes":{"127.0.0.1:1980":1}}`},
		`{"id":"1","uri":"/v","upstream_id":"1","vars":[["http_x_v","==","1"]]}`,
		`{"id":"2","uri":"/a","upstream_id":"1"}`)
	for _, drop := range []bool{false, true} {
		h := newHarnessConfig(t, s, Config{DropUnderscores: drop})
		up, got := h.roundTrip([]byte("GET /a HTTP/1.1\r\nX_Under: 1\r\nHost: h\r\nX-Dash: 2\r\nx_under_too: 3\r\nAccept: */*\r\n\r\n"), []byte(upOK))
		head := upHead(up)
		if !strings.HasPrefix(string(got), "HTTP/1.1 200 ") || !strings.Contains(head, "\r\nX-Dash: 2\r\n") || !strings.Contains(head, "\r\nAccept: */*\r\n") ||
			strings.Contains(head, "X_Under: 1") == drop || strings.Contains(head, "x_under_too: 3") == drop {
			t.Fatalf("drop %v: answer %q, upstream head:\n%s", drop, got, head)
		}
		_, got = h.roundTrip([]byte("GET /v HTTP/1.1\r\nHost: h\r\nX_V: 1\r\n\r\n"), []byte(upOK))
		if want := map[bool]string{false: "HTTP/1.1 200 ", true: "HTTP/1.1 404 "}[drop]; !strings.HasPrefix(string(got), want) {
			t.Fatalf("drop %v: GET /v with X_V: 1 answered %q, want %q", drop, got, want)
		}
	}
}
