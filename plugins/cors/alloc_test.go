//go:build !race

package cors

import (
	"encoding/json"
	"testing"

	"coregate/plugins"
	"coregate/plugins/plugintest"
)

// TestAllocs: the rewrite and header_filter phases allocate nothing, for
// each way of allowing an origin, a preflight included.
func TestAllocs(t *testing.T) {
	env := plugins.NewLocalEnv()
	env.Metadata = plugins.NewSettings(map[string]json.RawMessage{Name: json.RawMessage(`{"allow_origins":{"k":"http://a.com,http://b.com"}}`)})
	for _, conf := range []string{
		`{}`,
		`{"allow_origins":"http://a.com,http://b.com","allow_methods":"GET","allow_headers":"x","expose_headers":"y","allow_credential":true}`,
		`{"allow_origins":"**","allow_methods":"**","allow_headers":"**","timing_allow_origins":"**"}`,
		`{"allow_origins_by_regex":["^http://b\\.com$"],"timing_allow_origins_by_regex":["b"]}`,
		`{"allow_origins_by_metadata":["k"]}`,
	} {
		p := buildEnv(t, conf, env)
		for _, method := range []string{"GET", "OPTIONS"} {
			c := plugintest.NewCtx(method, "/hello").WithHeader("Origin", "http://b.com").WithHeader("Access-Control-Request-Headers", "a,b")
			plugintest.AllocsPerRun(t, 100, func() {
				c.Reset()
				plugintest.Run(p, c)
			})
		}
	}
}
