package worker

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"coregate/admin/spec"
	"coregate/httpvar"
	"coregate/plugins"
	"coregate/plugins/plugintest"
	"coregate/worker/accesslog"
	"coregate/worker/router"
)

const varTableTarget = "/hello?b=2&c=3&flag&e="

// varTableExchange is a logHarness with varTableTarget's request routed
// (to r1, /hello) and sent upstream, the answer not yet in.
func varTableExchange(t testing.TB) (*harness, *clientConn) {
	t.Helper()
	const req = "POST " + varTableTarget + " HTTP/1.1\r\nHost: Example.com:9080\r\nX-A: 1\r\nX_B: 2\r\nX-E:\r\n" +
		"Cookie: d=4; c=5\r\nContent-Length: 3\r\n\r\nabc"
	h, _ := logHarness(t, filepath.Join(t.TempDir(), "access.log"), "$uri", accesslog.EscapeNone)
	h.cl.in = append(h.cl.in, req...)
	h.w.OnTraffic(h.cl)
	cc := h.cl.ctx.(*clientConn)
	if cc.rt == nil || cc.tries != 1 {
		t.Fatalf("request not in flight: route %v, tries %d", cc.rt != nil, cc.tries)
	}
	return h, cc
}

// TestVarTable: every request and exchange variable of httpvar's table
// reads the same in a route's vars (router.Expr through reqVars), in the
// plugins' Var (pluginCtx), in the access log (appendPart) and in the
// plugin test kit's fake, for one request in flight to its upstream.
func TestVarTable(t *testing.T) {
	const target = varTableTarget
	const unset = "\x00unset"
	host, err := os.Hostname()
	if err != nil || host == "" {
		t.Fatalf("os.Hostname: %q, %v", host, err)
	}
	cases := []struct {
		name, want string
		// fake: the fake derives the value from its request (else it
		// has no state for it: WithVar sets it).
		fake bool
	}{
		{"uri", "/hello", true},
		{"document_uri", "/hello", true},
		{"request_uri", target, true},
		{"args", "b=2&c=3&flag&e=", true},
		{"query_string", "b=2&c=3&flag&e=", true},
		{"host", "example.com", true},
		{"remote_addr", "127.0.0.2", false},
		{"remote_port", "40000", false},
		{"request_method", "POST", true},
		{"scheme", "http", true},
		{"server_port", "9080", false},
		{"server_addr", "127.0.0.1", false},
		{"server_name", "_", true}, // whatever the Host: APISIX's "server_name _;"
		{"hostname", host, true},
		{"arg_b", "2", true},
		{"arg_e", "", true},
		{"arg_flag", unset, true}, // no '=': no argument, as nginx's ngx_http_arg
		{"arg_z", unset, true},
		{"http_x_a", "1", true},
		{"HTTP_X_A", "1", true},
		{"http_x_b", "2", true}, // X_B: '-' and '_' alike, as nginx compares
		{"http_x-a", "1", true},
		{"http_x_e", "", true},
		{"http_x_none", unset, true},
		{"cookie_c", "5", true},
		{"cookie_d", "4", true},
		{"cookie_z", unset, true},
		{"https", unset, true}, // a plain connection: TLS ones in tls_test.go
		{"ssl_server_name", unset, true},
		{"route_id", "r1", true},
		{"route_name", "hello", false},
		{"service_id", "s1", false},
		{"service_name", "svc one", false},
		{"matched_uri", "/hello", false},
		{"matched_host", unset, false},
		{"consumer_name", unset, true},
		{"upstream_addr", "127.0.0.1:1980", false},
		{"balancer_ip", "127.0.0.1", false},
		// Set by a plugin (Ctx.SetVar; setvar_test.go): none here.
		{"opentelemetry_context_traceparent", unset, true},
		{"opentelemetry_trace_id", unset, true},
		{"opentelemetry_span_id", unset, true},
	}
	covered := map[httpvar.Kind]bool{}
	for _, c := range cases {
		covered[httpvar.Parse(c.name).Kind] = true
	}
	exact, prefixes := httpvar.Names()
	for _, n := range append(exact, prefixes...) {
		if k := httpvar.Parse(n + "x").Kind; k != httpvar.Unknown && !k.LogOnly() && !covered[k] {
			t.Errorf("no case for $%sx", n)
		}
		if k := httpvar.Parse(n).Kind; k != httpvar.Unknown && !k.LogOnly() && !covered[k] {
			t.Errorf("no case for $%s", n)
		}
	}

	h, cc := varTableExchange(t)
	fake := plugintest.NewCtx("POST", target).
		WithHeader("Host", "Example.com:9080").WithHeader("X-A", "1").WithHeader("X_B", "2").
		WithHeader("X-E", "").WithHeader("Cookie", "d=4; c=5").WithRoute("r1")

	for _, c := range cases {
		v := httpvar.Parse(c.name)
		show := func(b []byte, ok bool) string {
			if !ok {
				return unset
			}
			return string(b)
		}
		// The plugins.
		got := (*pluginCtx)(cc).Var(v)
		if s := show(got, got != nil); s != c.want {
			t.Errorf("plugin ctx: $%s = %q, want %q", c.name, s, c.want)
		}
		// The access log: "-" for unset, no value is "-". A format names
		// variables of letters, digits and '_' only.
		f, err := accesslog.Compile("${"+c.name+"}", accesslog.EscapeNone)
		if strings.Contains(c.name, "-") {
			if err == nil {
				t.Errorf("access log: ${%s} compiled", c.name)
			}
		} else if err != nil {
			t.Errorf("access log: %v", err)
		} else {
			line := string(cc.appendPart(h.w.alog, nil, &f.Parts[0]))
			if want := c.want; line != want && !(want == unset && line == "-") {
				t.Errorf("access log: $%s = %q, want %q", c.name, line, want)
			}
		}
		// The router: [name, "==", value] holds, and no other value does.
		val := json.RawMessage(`null`)
		if c.want != unset {
			val, _ = json.Marshal(c.want)
		}
		rq := router.Request{Path: cc.curPath, RemoteAddr: cc.ip, Vars: (*reqVars)(cc)}
		for _, neg := range []bool{false, true} {
			op := "=="
			if neg {
				op = "~="
			}
			e, err := router.CompileVars(spec.Vars{{Var: c.name, Op: op, Value: val}})
			if err != nil {
				t.Fatal(err)
			}
			if e.Eval(&rq) == neg {
				t.Errorf("router: [%q, %q, %s] does not hold", c.name, op, val)
			}
		}
		// The fake.
		fc := fake
		if !c.fake {
			fc = plugintest.NewCtx("POST", target)
			if c.want != unset {
				fc.WithVar(c.name, c.want)
			}
		}
		if c.name == "consumer_name" {
			fc.SetConsumer(nil)
		}
		got = fc.Var(v)
		if s := show(got, got != nil); s != c.want {
			t.Errorf("plugintest: $%s = %q, want %q", c.name, s, c.want)
		}
	}

	// A consumer, once attached.
	k := &plugins.Consumer{Username: "jack"}
	(*pluginCtx)(cc).SetConsumer(k)
	fake.SetConsumer(k)
	cn := httpvar.Parse("consumer_name")
	if a, b := string((*pluginCtx)(cc).Var(cn)), string(fake.Var(cn)); a != "jack" || b != "jack" {
		t.Errorf("consumer_name: worker %q, fake %q", a, b)
	}
}

// TestVarTableRouting: while a request is routed, the exchange variables
// are unset: a route that wants one never matches.
func TestVarTableRouting(t *testing.T) {
	s := logSpec(t)
	r, err := spec.DecodeRoute([]byte(`{"id":"r3","uri":"/v","vars":[["route_id","~=",null]],"upstream":{"nodes":{"127.0.0.1:1980":1}}}`))
	if err != nil {
		t.Fatal(err)
	}
	s.Routes = append(s.Routes, r)
	h := newHarness(t, s)
	_, out := h.roundTrip([]byte("GET /v HTTP/1.1\r\nHost: h\r\n\r\n"), nil)
	if len(out) < 12 || string(out[9:12]) != "404" {
		t.Errorf("answer %q, want a 404", out)
	}
}

// TestVarTableEmptyHost: an empty Host leaves $host unset, as route vars
// always read it: the access log writes "-".
func TestVarTableEmptyHost(t *testing.T) {
	path := filepath.Join(t.TempDir(), "access.log")
	h, l := logHarness(t, path, "[$host] [$http_host]", accesslog.EscapeDefault)
	h.roundTrip([]byte("GET /hello HTTP/1.1\r\nHost:\r\n\r\n"), []byte("HTTP/1.1 204 No Content\r\n\r\n"))
	l.Close()
	got, _ := os.ReadFile(path)
	if want := "[-] []\n"; string(got) != want {
		t.Errorf("line %q, want %q", got, want)
	}
}
