package realip

import (
	"encoding/json"
	"strings"
	"testing"

	"coregate/httpvar"
	"coregate/plugins"
	_ "coregate/plugins/iprestriction"
	"coregate/plugins/plugintest"
)

// build builds real-ip's conf, with ip-restriction's when restrict is not
// empty, as APISIX's tests pair them.
func build(t *testing.T, conf, restrict string) *plugins.Phases {
	t.Helper()
	confs := map[string]json.RawMessage{Name: json.RawMessage(conf)}
	if restrict != "" {
		confs["ip-restriction"] = json.RawMessage(restrict)
	}
	for name, c := range confs {
		if err := plugins.Check(name, c); err != nil {
			t.Fatalf("%s %s: %v", name, c, err)
		}
	}
	ph, err := plugins.Default.BuildPhases(confs, plugins.NewLocalEnv())
	if err != nil {
		t.Fatal(err)
	}
	return &ph
}

// TestCheck: APISIX's refusals (t/plugin/real-ip.t test 1).
func TestCheck(t *testing.T) {
	const prefix = "failed to check the configuration of plugin real-ip err: "
	for _, tc := range []struct{ conf, err string }{
		{`{"source":"http_xff"}`, ""},
		{`{"source":"http_x_forwarded_for","trusted_addresses":["192.128.0.0/16","::1","fe80::/10"],"recursive":true}`, ""},
		{`{}`, prefix + `property "source" is required`},
		{`{"source":""}`, prefix + `property "source" validation failed`},
		{`{"source":"http_xff","trusted_addresses":["127.0.0.1/33"]}`,
			prefix + `property "trusted_addresses" validation failed: failed to validate item 1: object matches none of the required`},
		{`{"source":"http_xff","trusted_addresses":["::1/129"]}`, prefix + `invalid ip address: ::1/129`},
		{`{"source":"http_xff","trusted_addresses":[]}`, prefix + `property "trusted_addresses" validation failed`},
		{`{"source":"http_xff","recursive":"yes"}`, prefix + `property "recursive" validation failed`},
	} {
		err := plugins.Check(Name, json.RawMessage(tc.conf))
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("%s: %v", tc.conf, err)
		case tc.err != "" && (err == nil || err.Error() != tc.err && !strings.HasPrefix(err.Error(), tc.err)):
			t.Errorf("%s: err = %v, want %q", tc.conf, err, tc.err)
		}
	}
}

// TestRealIP: APISIX's tests 2 to 23: the address a source gives, with
// or without a port, IPv4 or IPv6, bracketed or not, is the client's for
// ip-restriction after it; a bad one, or none, leaves it as it was;
// X-Forwarded-For's last address, of the last header, or its last
// untrusted one when recursive; a client not trusted keeps its own.
func TestRealIP(t *testing.T) {
	const xff = `{"source":"http_xff"}`
	const fwd = `{"source":"http_x_forwarded_for"}`
	const untrusted = `{"source":"http_x_forwarded_for","trusted_addresses":["192.128.0.0/16"]}`
	const trusted = `{"source":"http_x_forwarded_for","trusted_addresses":["192.128.0.0/16","127.0.0.0/24"]}`
	const recursive = `{"source":"http_x_forwarded_for","trusted_addresses":["192.128.0.0/16","127.0.0.0/24"],"recursive":true}`
	const only1 = `{"whitelist":["1.1.1.1"]}`
	const only2 = `{"whitelist":["::2"]}`
	for _, tc := range []struct {
		conf, restrict string
		hdrs           []string // name, value, …
		pass           bool
		addr, port     string // $remote_addr, $remote_port after it, when pass
	}{
		{xff, only1, []string{"XFF", "1.1.1.1"}, true, "1.1.1.1", "40000"},
		{xff, only1, []string{"XFF", "1.1.1.1:80"}, true, "1.1.1.1", "80"},
		{xff, only1, nil, false, "", ""},
		{xff, only1, []string{"XFF", "1.1.1.1.1"}, false, "", ""},
		{xff, only1, []string{"XFF", "1.1.1.1:65536"}, false, "", ""},
		{xff, only1, []string{"XFF", "1.1.1.1:0"}, false, "", ""},
		{xff, only1, []string{"XFF", "1.1.1.1:x"}, true, "1.1.1.1", "40000"},
		{xff, only1, []string{"XFF", "example.com"}, false, "", ""},
		{xff, only2, []string{"XFF", "::2"}, true, "::2", "40000"},
		{xff, only2, []string{"XFF", "[::2]:80"}, true, "::2", "80"},
		{xff, only2, []string{"XFF", "[::2]"}, true, "::2", "40000"},
		{xff, only2, []string{"XFF", "[::2]x80"}, false, "", ""},
		{xff, "", []string{"XFF", "1.1.1.1:7090"}, true, "1.1.1.1", "7090"},
		{fwd, only2, []string{"X-Forwarded-For", "::1, ::2"}, true, "::2", "40000"},
		{fwd, only2, []string{"X-Forwarded-For", "::1", "X-Forwarded-For", "::2"}, true, "::2", "40000"},
		{fwd, only2, []string{"X-Forwarded-For", "::2", "X-Forwarded-For", "::1"}, false, "", ""},
		{fwd, only2, nil, false, "", ""},
		{untrusted, only1, []string{"X-Forwarded-For", "1.1.1.1"}, false, "", ""},
		{trusted, only1, []string{"X-Forwarded-For", "1.1.1.1"}, true, "1.1.1.1", "40000"},
		{trusted, only1, []string{"X-Forwarded-For", "1.1.1.1, 192.128.1.1, 127.0.0.1"}, false, "", ""},
		{recursive, only1, []string{"X-Forwarded-For", "1.1.1.1, 192.128.1.1, 127.0.0.1"}, true, "1.1.1.1", "40000"},
		{recursive, only1, []string{"X-Forwarded-For", "1.1.1.1,\t192.128.1.1,127.0.0.1"}, true, "1.1.1.1", "40000"},
		{recursive, "", []string{"X-Forwarded-For", "1.1.1.1, 2.2.2.2, 127.0.0.1"}, true, "2.2.2.2", "40000"},
		{recursive, "", []string{"X-Forwarded-For", "9.9.9.9"}, true, "9.9.9.9", "40000"},
		{`{"source":"arg_realip"}`, "", nil, true, "127.0.0.1", "40000"},
	} {
		p := build(t, tc.conf, tc.restrict)
		target := "/hello"
		if strings.Contains(tc.conf, "arg_realip") {
			target += "?realip=10.0.0.9:81"
			tc.addr, tc.port = "10.0.0.9", "81"
		}
		c := plugintest.NewCtx("GET", target).WithVar("remote_port", "40000")
		for i := 0; i+1 < len(tc.hdrs); i += 2 {
			c.WithHeader(tc.hdrs[i], tc.hdrs[i+1])
		}
		plugintest.Run(p, c)
		if c.Upstream != tc.pass {
			t.Errorf("%s %v: upstream %v (status %d), want %v", tc.conf, tc.hdrs, c.Upstream, c.ExitStatus(), tc.pass)
			continue
		}
		if !tc.pass {
			continue
		}
		addr, port := string(c.Var(httpvar.Parse("remote_addr"))), string(c.Var(httpvar.Parse("remote_port")))
		if addr != tc.addr || port != tc.port {
			t.Errorf("%s %v: client %s port %s, want %s port %s", tc.conf, tc.hdrs, addr, port, tc.addr, tc.port)
		}
	}
}

// TestPhase: the rewrite phase at APISIX's priority.
func TestPhase(t *testing.T) {
	p := build(t, `{"source":"http_xff"}`, "")
	if got := p.Names(plugins.Rewrite); len(got) != 1 || got[0] != Name {
		t.Fatalf("rewrite phase: %v", got)
	}
	if e, _, _ := plugins.Lookup(Name); e.Priority != 23000 {
		t.Fatalf("priority %d", e.Priority)
	}
}
