package varexpr

import (
	"testing"

	"coregate/plugins/plugintest"
)

// TestCheck: lua-resty-expr's messages for malformed expressions
// (APISIX's fault-injection test 27), none for well-formed ones.
func TestCheck(t *testing.T) {
	for _, tc := range []struct{ vars, err string }{
		{`[[["arg_name","==","jack"],["arg_age","!","<",18]],[["http_apikey","==","api-key"]]]`, ""},
		{`[["arg_name","!=","jack"]]`, "rule should be wrapped inside brackets"},
		{`[[["arg_name","!=","jack"]]]`, "invalid operator '!='"},
		{`[[["remote_addr","ipmatch","10.0.0.0/33"]]]`, "invalid ip address: 10.0.0.0/33"},
		{`[[["arg_a","~~","(x"]]]`, "invalid regular expression '(x': error parsing regexp: missing closing ): `(x`"},
		{`[[]]`, ""},
	} {
		err := Check([]byte(tc.vars))
		if got := ""; err != nil && err.Error() != tc.err || err == nil && tc.err != got {
			t.Errorf("%s: %v, want %q", tc.vars, err, tc.err)
		}
	}
}

// TestEval: APISIX's fault-injection tests 29 to 33 (one expression of
// two holding is enough; every rule of one must hold), and each operator.
func TestEval(t *testing.T) {
	const apisix = `[[["arg_name","==","jack"],["arg_age","!","<",18]],[["http_apikey","==","api-key"]]]`
	for _, tc := range []struct {
		vars, target string
		hdr          []string // name, value
		want         bool
	}{
		{apisix, "/hello?name=jack&age=18", []string{"apikey", "api-key"}, true},
		{apisix, "/hello?name=jack&age=20", nil, true},
		{apisix, "/hello", []string{"apikey", "api-key"}, true},
		{apisix, "/hello?name=allen", nil, false},
		{apisix, "/hello?name=jack", nil, true}, // age unset: "<" does not hold, "!" makes it
		{apisix, "/hello?name=jack&age=17", nil, false},
		{apisix, "/hello", nil, false},
		{`[]`, "/", nil, false},
		{`[[]]`, "/", nil, true},
		{`[[["arg_a","~=","x"]]]`, "/", nil, true},
		{`[[["arg_a","~=","x"]]]`, "/?a=x", nil, false},
		{`[[["arg_a",">",2]]]`, "/?a=2.5", nil, true},
		{`[[["arg_a",">=","3"]]]`, "/?a=2.5", nil, false},
		{`[[["arg_a","<=",2]]]`, "/?a=x", nil, false},
		{`[[["arg_a","==",2]]]`, "/?a=2.0", nil, true},
		{`[[["arg_a","~~","^ab+$"]]]`, "/?a=abbb", nil, true},
		{`[[["arg_a","~*","^AB+$"]]]`, "/?a=abbb", nil, true},
		{`[[["arg_a","~~","^AB+$"]]]`, "/?a=abbb", nil, false},
		{`[[["arg_a","in",["x","y"]]]]`, "/?a=y", nil, true},
		{`[[["arg_a","!","in",["x","y"]]]]`, "/?a=y", nil, false},
		{`[[["arg_a","has","y"]]]`, "/?a=y", nil, false},
		{`[[["http_x_ip","ipmatch",["10.0.0.0/8","::1"]]]]`, "/", []string{"X-IP", "10.1.2.3"}, true},
		{`[[["http_x_ip","ipmatch","10.0.0.0/8"]]]`, "/", []string{"X-IP", "[::ffff:10.1.2.3]"}, true},
		{`[[["http_x_ip","ipmatch","10.0.0.0/8"]]]`, "/", []string{"X-IP", "11.1.2.3"}, false},
		{`[[["http_x_ip","ipmatch","10.0.0.0/8"]]]`, "/", nil, false},
		{`[[["arg_a","jack"]]]`, "/?a=jack", nil, true},
		{`[[["arg_a","==",null]]]`, "/", nil, true},
	} {
		a, err := CompileAny([]byte(tc.vars))
		if err != nil {
			t.Fatalf("%s: %v", tc.vars, err)
		}
		c := plugintest.NewCtx("GET", tc.target)
		if tc.hdr != nil {
			c.WithHeader(tc.hdr[0], tc.hdr[1])
		}
		if got := a.Eval(c); got != tc.want {
			t.Errorf("%s on %s %v: %v, want %v", tc.vars, tc.target, tc.hdr, got, tc.want)
		}
	}
}
