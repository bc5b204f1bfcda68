//go:build !race

package trafficsplit

import (
	"testing"

	"coregate/plugins/plugintest"
)

// TestAllocs: matching the rules (a header, an argument, a regular
// expression) and choosing by weight allocate nothing.
func TestAllocs(t *testing.T) {
	p := build(t, `{"rules":[
		{"match":[{"vars":[["arg_name","==","jack"],["http_user-id",">",23]]},{"vars":[["http_apisix-key","~~","[a-z]+"]]}],
		 "weighted_upstreams":[{"upstream_id":"1","weight":2},{"upstream":{"name":"b","nodes":{"127.0.0.1:1":1}},"weight":1},{"weight":1}]},
		{"weighted_upstreams":[{"upstream_id":"2"}]}]}`)
	for _, target := range []string{"/?name=jack", "/?name=rose"} {
		c := plugintest.NewCtx("GET", target).WithHeader("User-Id", "30").WithHeader("Apisix-Key", "123")
		choose(p, c)
		plugintest.AllocsPerRun(t, 200, func() { choose(p, c) })
	}
}
