package httpvar

import "testing"

// TestHostOnly: $host is the Host value without its port and without one
// trailing dot, as nginx's ngx_http_validate_host leaves it.
func TestHostOnly(t *testing.T) {
	for in, want := range map[string]string{
		"example.com":       "example.com",
		"example.com:8080":  "example.com",
		"example.com.":      "example.com",
		"example.com.:8080": "example.com",
		".example.com":      ".example.com",
		"[::1]:80":          "[::1]",
		"[::1]":             "[::1]",
		"":                  "",
		"Example.com:8080":  "Example.com",
		"[::1":              "[::1",
	} {
		if got := string(HostOnly([]byte(in))); got != want {
			t.Errorf("HostOnly(%q) = %q, want %q", in, got, want)
		}
	}
}
