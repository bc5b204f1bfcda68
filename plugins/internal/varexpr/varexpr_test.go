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
		var ev Evaluator
		if got := ev.EvalAny(c, a); got != tc.want {
			t.Errorf("%s on %s %v: %v, want %v", tc.vars, tc.target, tc.hdr, got, tc.want)
		}
	}
}

// TestEvalOne: one expression holds when all its rules do; the zero Expr
// always; the Evaluator keeps nothing of the request once Eval returns.
func TestEvalOne(t *testing.T) {
	e, err := Compile([]byte(`[["uri","==","/a"],["arg_x","in",["1","2"]]]`))
	if err != nil {
		t.Fatal(err)
	}
	var ev Evaluator
	for target, want := range map[string]bool{"/a?x=2": true, "/a?x=3": false, "/b?x=1": false} {
		if got := ev.Eval(plugintest.NewCtx("GET", target), &e); got != want {
			t.Errorf("%s: %v, want %v", target, got, want)
		}
		if ev.src.c != nil || ev.req.Path != nil {
			t.Errorf("%s: the request is kept after Eval", target)
		}
	}
	if !ev.Eval(plugintest.NewCtx("GET", "/"), &Expr{}) {
		t.Error("the zero Expr does not hold")
	}
}

// TestResponseStatus: with ResponseStatus, $status is the response's
// status, compared as a number or as its text; without, it is Ctx.Var's.
func TestResponseStatus(t *testing.T) {
	a, err := CompileAny([]byte(`[[["status","==",200]],[["status","~~","^4"]]]`))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		status int
		rs     bool
		want   bool
	}{
		{200, true, true}, {404, true, true}, {500, true, false}, {0, true, false}, {200, false, false},
	} {
		c := statusCtx{plugintest.NewCtx("GET", "/"), tc.status}
		ev := Evaluator{ResponseStatus: tc.rs}
		if got := ev.EvalAny(c, a); got != tc.want {
			t.Errorf("status %d, ResponseStatus %v: %v, want %v", tc.status, tc.rs, got, tc.want)
		}
	}
}

// statusCtx is a Ctx whose response status is st.
type statusCtx struct {
	*plugintest.Ctx
	st int
}

func (c statusCtx) Status() int { return c.st }
