//go:build !race

package requestvalidation

import (
	"testing"

	"coregate/plugins/plugintest"
)

// TestAllocRewrite: request-validation's rewrite phase allocates nothing
// for headers a simple schema (types, enums, lengths of strings) lets
// through, nor for a refusal answered with rejected_msg.
func TestAllocRewrite(t *testing.T) {
	for _, tc := range []struct {
		name, conf string
		headers    []string
		status     int
	}{
		{"allowed", enumConf, []string{"test", "b"}, 200},
		{"allowed, hyphen", `{"header_schema":{"required":["x_token"],"properties":{"x_token":{"type":"string","minLength":1}}}}`,
			[]string{"X-Token", "t"}, 200},
		{"refused, rejected_msg", enumMsg, []string{"test", "abc"}, 400},
		{"missing, rejected_msg", enumMsg, nil, 400},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := build(t, tc.conf)
			c := plugintest.NewCtx("GET", "/hello")
			for i := 0; i < len(tc.headers); i += 2 {
				c.WithHeader(tc.headers[i], tc.headers[i+1])
			}
			plugintest.Run(&p, c)
			if c.Status() != tc.status {
				t.Fatalf("status %d, want %d", c.Status(), tc.status)
			}
			plugintest.AllocsPerRun(t, 200, func() {
				c.Reset()
				plugintest.Run(&p, c)
			})
		})
	}
}
