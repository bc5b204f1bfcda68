package iprestriction

import (
	"encoding/json"
	"strings"
	"testing"

	"coregate/plugins"
	"coregate/plugins/plugintest"
)

func build(t testing.TB, conf string) *plugins.Phases { return plugintest.Build(t, Name, conf) }

// TestCheck: APISIX's refusals (t/plugin/ip-restriction.t), with its
// messages.
func TestCheck(t *testing.T) {
	const pre = "failed to check the configuration of plugin ip-restriction err: "
	for _, tc := range []struct{ conf, err string }{
		{`{"whitelist":["10.255.254.0/24","192.168.0.0/16"]}`, ""},
		{`{"blacklist":["127.0.0.1","::1","fe80::/10","2001:db8::/128","0.0.0.0/0"]}`, ""},
		{`{"whitelist":["127.0.0.1"],"message":"go away","response_code":404}`, ""},
		{`{"whitelist":["10.255.256.0/24"]}`, pre + `property "whitelist" validation failed: failed to validate item 1: object matches none of the required`},
		{`{"blacklist":["10.255.254.0/38"]}`, pre + `property "blacklist" validation failed: failed to validate item 1: object matches none of the required`},
		{`{}`, pre + "value should match only one schema, but matches none"},
		{`{"whitelist":[]}`, pre + `property "whitelist" validation failed: expect array to have at least 1 items`},
		{`{"whitelist":["1.1.1.1"],"blacklist":["2.2.2.2"]}`, pre + "value should match only one schema, but matches both schemas 1 and 2"},
		{`{"whitelist":["::1/129"]}`, pre + "invalid ip address: ::1/129"},
		{`{"blacklist":["1.1.1.1","fe80::1/200"]}`, pre + "invalid ip address: fe80::1/200"},
		{`{"whitelist":["1.1.1.1"],"response_code":401}`, pre + `property "response_code" validation failed: expected 401 to be at least 403`},
		{`{"whitelist":["1.1.1.1"],"message":""}`, pre + `property "message" validation failed: string too short, expected at least 1, got 0`},
	} {
		err := plugins.Check(Name, json.RawMessage(tc.conf))
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("%s: %v", tc.conf, err)
		case tc.err != "" && (err == nil || !strings.HasPrefix(err.Error(), tc.err)):
			t.Errorf("%s: %v, want %q", tc.conf, err, tc.err)
		}
	}
}

// TestRestrict: whitelists and blacklists of addresses and CIDRs of both
// families, the message and the status.
func TestRestrict(t *testing.T) {
	const deny = `{"message":"Your IP address is not allowed"}` + "\n"
	for _, tc := range []struct {
		conf, addr string
		status     int
		body       string
	}{
		{`{"whitelist":["127.0.0.1"]}`, "127.0.0.1", 0, ""},
		{`{"whitelist":["127.0.0.2"]}`, "127.0.0.1", 403, deny},
		{`{"whitelist":["10.255.254.0/24","192.168.0.0/16"]}`, "192.168.77.3", 0, ""},
		{`{"whitelist":["10.255.254.0/24","192.168.0.0/16"]}`, "10.255.253.255", 403, deny},
		{`{"blacklist":["10.255.254.0/24","192.168.0.0/16"]}`, "10.255.254.255", 403, deny},
		{`{"blacklist":["10.255.254.0/24","192.168.0.0/16"]}`, "127.0.0.1", 0, ""},
		{`{"blacklist":["0.0.0.0/0"]}`, "203.0.113.9", 403, deny},
		{`{"blacklist":["0.0.0.0/0"]}`, "::1", 0, ""},
		{`{"whitelist":["::1"]}`, "::1", 0, ""},
		{`{"whitelist":["fe80::/10"]}`, "fe80::abcd:1", 0, ""},
		{`{"whitelist":["fe80::/10"]}`, "fec0::1", 403, deny},
		{`{"blacklist":["2001:db8::/32","::/0"]}`, "2a00::1", 403, deny},
		{`{"blacklist":["::ffff:a00:0/104"]}`, "10.1.2.3", 403, deny},
		// The address is read from $remote_addr; one that does not parse
		// is on no list.
		{`{"whitelist":["127.0.0.1"]}`, "", 403, deny},
		{`{"blacklist":["127.0.0.1"]}`, "not-an-ip", 0, ""},
		{`{"whitelist":["127.0.0.2"],"message":"Do you know where you are? \"/\"","response_code":404}`, "127.0.0.1", 404,
			`{"message":"Do you know where you are? \"\/\""}` + "\n"},
	} {
		p := build(t, tc.conf)
		c := plugintest.NewCtx("GET", "/hello").WithVar("remote_addr", tc.addr)
		plugintest.Run(p, c)
		if c.ExitStatus() != tc.status || string(c.Body) != tc.body && tc.status != 0 {
			t.Errorf("%s from %q: %d %q, want %d %q", tc.conf, tc.addr, c.ExitStatus(), c.Body, tc.status, tc.body)
		}
		if c.Upstream != (tc.status == 0) {
			t.Errorf("%s from %q: upstream reached: %v", tc.conf, tc.addr, c.Upstream)
		}
	}
}

// TestPhase: the access phase at APISIX's priority, before key-auth.
func TestPhase(t *testing.T) {
	p := build(t, `{"whitelist":["127.0.0.1"]}`)
	if got := p.Names(plugins.Access); len(got) != 1 || got[0] != Name {
		t.Fatalf("access phase: %v", got)
	}
	if got := p.Names(plugins.Rewrite); len(got) != 0 {
		t.Fatalf("rewrite phase: %v", got)
	}
	e, _, _ := plugins.Lookup(Name)
	if e.Priority != 3000 {
		t.Fatalf("priority %d", e.Priority)
	}
}

// TestMappedAddresses: a client whose address is IPv4-mapped IPv6 (a
// dual-stack listener's IPv4 client), in either notation, is judged by
// its IPv4 address, so that a list of IPv4 prefixes cannot be passed by
// connecting over IPv6; a v4-mapped entry is its IPv4 address.
func TestMappedAddresses(t *testing.T) {
	for _, tc := range []struct {
		conf, addr string
		status     int
	}{
		{`{"blacklist":["10.0.0.0/8"]}`, "::ffff:10.1.2.3", 403},
		{`{"blacklist":["10.0.0.0/8"]}`, "::ffff:a01:203", 403},
		{`{"blacklist":["10.0.0.0/8"]}`, "::FFFF:10.1.2.3", 403},
		{`{"blacklist":["10.1.2.3"]}`, "::ffff:10.1.2.4", 0},
		{`{"whitelist":["127.0.0.1"]}`, "::ffff:127.0.0.1", 0},
		{`{"whitelist":["127.0.0.1"]}`, "::ffff:127.0.0.2", 403},
		{`{"whitelist":["::ffff:127.0.0.1"]}`, "127.0.0.1", 0},
		{`{"blacklist":["::ffff:a00:0/104"]}`, "::ffff:10.9.9.9", 403},
		// IPv4-compatible and NAT64 addresses are IPv6 addresses.
		{`{"blacklist":["10.0.0.0/8"]}`, "::10.1.2.3", 0},
		{`{"blacklist":["10.0.0.0/8"]}`, "64:ff9b::10.1.2.3", 0},
	} {
		p := build(t, tc.conf)
		c := plugintest.NewCtx("GET", "/hello").WithVar("remote_addr", tc.addr)
		plugintest.Run(p, c)
		if c.ExitStatus() != tc.status {
			t.Errorf("%s from %q: %d, want %d", tc.conf, tc.addr, c.ExitStatus(), tc.status)
		}
	}
}
