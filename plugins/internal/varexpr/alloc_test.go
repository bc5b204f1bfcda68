//go:build !race

package varexpr

import (
	"testing"

	"coregate/plugins/plugintest"
)

// TestAllocs: an evaluation allocates nothing, whichever operators it
// runs.
func TestAllocs(t *testing.T) {
	a, err := CompileAny([]byte(`[[["arg_name","==","jack"],["arg_age","!","<",18],["arg_name","~~","^j"],` +
		`["arg_name","in",["jack","rose"]],["http_x_ip","ipmatch","10.0.0.0/8"]],[["http_apikey","==","api-key"]]]`))
	if err != nil {
		t.Fatal(err)
	}
	c := plugintest.NewCtx("GET", "/hello?name=jack&age=20").WithHeader("X-IP", "10.1.2.3")
	var ev Evaluator
	var got bool
	if n := testing.AllocsPerRun(200, func() { got = ev.EvalAny(c, a) }); n != 0 {
		t.Fatalf("%v allocations per evaluation", n)
	}
	if !got {
		t.Fatal("did not hold")
	}
}
