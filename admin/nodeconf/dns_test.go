package nodeconf

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestNodeConfigDNS checks that apisix.dns_resolver, dns_resolver_valid
// and resolver_timeout are read, not reported, and that bad values are
// refused naming the key.
func TestNodeConfigDNS(t *testing.T) {
	c, warns, err := parseNode(t, "apisix:\n  dns_resolver:\n    - 1.1.1.1\n    - 127.0.0.1:5353\n    - \"[::1]:53\"\n    - ::1\n  dns_resolver_valid: 30\n  resolver_timeout: 2\n")
	if err != nil {
		t.Fatal(err)
	}
	if len(warns) != 0 {
		t.Errorf("warnings %v", warns)
	}
	if diff := cmp.Diff([]string{"1.1.1.1", "127.0.0.1:5353", "[::1]:53", "::1"}, c.APISIX.DNSResolver); diff != "" {
		t.Errorf("DNSResolver (-want +got):\n%s", diff)
	}
	if c.APISIX.DNSResolverValid != 30*time.Second || c.APISIX.ResolverTimeout != 2*time.Second {
		t.Errorf("DNSResolverValid %v, ResolverTimeout %v, want 30s and 2s", c.APISIX.DNSResolverValid, c.APISIX.ResolverTimeout)
	}
	if d := Default().APISIX; d.ResolverTimeout != 5*time.Second || d.DNSResolver != nil || d.DNSResolverValid != 0 {
		t.Errorf("defaults: %v %v %v, want 5s, none, 0", d.ResolverTimeout, d.DNSResolver, d.DNSResolverValid)
	}
	for src, want := range map[string]string{
		"apisix:\n  dns_resolver: 1.1.1.1":         `apisix.dns_resolver: want a list of a name server's address, "ip" or "ip:port", got "1.1.1.1"`,
		"apisix:\n  dns_resolver: [dns.example]":   `apisix.dns_resolver[0]: want a name server's address, "ip" or "ip:port", got "dns.example"`,
		"apisix:\n  dns_resolver: []":              `apisix.dns_resolver: want at least one name server`,
		"apisix:\n  dns_resolver_valid: 1.5":       `apisix.dns_resolver_valid: want an integer from 0 to 2147483647, got 1.5`,
		"apisix:\n  resolver_timeout: 0":           `apisix.resolver_timeout: want an integer from 1 to 2147483647, got 0`,
		"apisix:\n  resolver_timeout: \"5\"":       `apisix.resolver_timeout: want an integer from 1 to 2147483647, got "5"`,
		"apisix:\n  dns_resolver: [1.1.1.1:99999]": `apisix.dns_resolver[0]: want a name server's address, "ip" or "ip:port", got "1.1.1.1:99999"`,
	} {
		_, _, err := parseNode(t, src)
		if diff := cmp.Diff("nodeconf: conf/config.yaml: "+want, errText(err)); diff != "" {
			t.Errorf("%q (-want +got):\n%s", src, diff)
		}
	}
}

// TestNodeConfigDiscoveryDNS checks that discovery.dns.servers is read,
// the other discoveries reported.
func TestNodeConfigDiscoveryDNS(t *testing.T) {
	c, warns, err := parseNode(t, "discovery:\n  dns:\n    servers:\n      - 127.0.0.1:8600\n  consul:\n    servers: []\n")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"not supported yet: discovery.consul"}, warns); diff != "" {
		t.Errorf("warnings (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"127.0.0.1:8600"}, c.DiscoveryDNSServers); diff != "" {
		t.Errorf("DiscoveryDNSServers (-want +got):\n%s", diff)
	}
	_, _, err = parseNode(t, "discovery:\n  dns:\n    servers: [consul.local]\n")
	if diff := cmp.Diff(`nodeconf: conf/config.yaml: discovery.dns.servers[0]: want a name server's address, "ip" or "ip:port", got "consul.local"`, errText(err)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}
