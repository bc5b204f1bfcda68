package worker

import (
	"bytes"
	"strconv"
	"testing"
)

// TestURIBlockerEncodings: uri-blocker matches the path as nginx's $uri
// has it, percent-decoded with "//" merged and "." and ".." resolved, so
// that a rule anchored at "^/admin" is not passed by encoding the path;
// case is APISIX's: only case_insensitive folds it.
func TestURIBlockerEncodings(t *testing.T) {
	for _, tc := range []struct {
		ci      bool
		target  string
		blocked bool
	}{
		{false, "/admin", true},
		{false, "/%61dmin", true},
		{false, "/%2561dmin", false}, // decoded once, as nginx: "/%61dmin"
		{false, "//admin", true},
		{false, "/./admin", true},
		{false, "/%2e/admin", true},
		{false, "/x/../admin", true},
		{false, "/x/%2e%2e/admin", true},
		{false, "/x/..%2fadmin", true},
		{false, "/ADMIN", false},
		{true, "/ADMIN", true},
		{true, "/%41dmin", true},
		{false, "/public?next=/admin", false},
	} {
		// A harness of its own: a request let through takes the
		// upstream connection the harness answers on.
		h := realHarness(t, []string{`{"id":"r1","uri":"/*","plugins":{"uri-blocker":{"block_rules":["^/admin"],` +
			`"case_insensitive":` + strconv.FormatBool(tc.ci) + `}},"upstream":{"nodes":{"127.0.0.1:1980":1}}}`}, nil, nil)
		up, got := h.roundTrip([]byte("GET "+tc.target+" HTTP/1.1\r\nHost: h\r\n\r\n"), []byte(upOK))
		blocked := bytes.HasPrefix(got, []byte("HTTP/1.1 403 "))
		if blocked != tc.blocked || !blocked && !bytes.HasPrefix(got, []byte("HTTP/1.1 200 ")) || blocked && len(up) > 0 {
			t.Errorf("case_insensitive %v, %s: %.40q, want blocked %v", tc.ci, tc.target, got, tc.blocked)
		}
	}
}
