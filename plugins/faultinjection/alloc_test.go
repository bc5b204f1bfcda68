//go:build !race

package faultinjection

import (
	"testing"

	"coregate/plugins/plugintest"
)

// TestAllocs: the rewrite phase allocates nothing: an abort with a body
// and headers of variables, a delay, vars that hold or not, percentages.
func TestAllocs(t *testing.T) {
	for _, conf := range []string{
		`{"abort":{"http_status":403,"body":"client addr: $remote_addr\n","headers":{"X-A":"$arg_name","X-N":1},` +
			`"vars":[[["arg_name","==","jack"],["arg_age","!","<",18]]]}}`,
		`{"abort":{"http_status":403,"vars":[[["arg_name","==","rose"]]]},"delay":{"duration":0.5,"vars":[[["arg_age",">",3]]]}}`,
		`{"abort":{"http_status":500,"body":"x","percentage":50},"delay":{"duration":1,"percentage":50}}`,
	} {
		p := build(t, conf)
		c := plugintest.NewCtx("GET", "/hello?name=jack&age=20")
		plugintest.AllocsPerRun(t, 200, func() {
			c.Reset()
			plugintest.Run(p, c)
		})
	}
}
