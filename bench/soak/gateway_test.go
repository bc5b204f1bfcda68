package soak

import (
	"slices"
	"testing"

	"coregate/admin/nodeconf"
)

// TestEnvConfig: both generations of the gateway's config.yaml parse
// without warnings, listen on the Env's two ports (the TLS listener on
// its own free port, not APISIX's 9443) and differ in keepalive_timeout.
func TestEnvConfig(t *testing.T) {
	ports, err := freePorts(2)
	if err != nil {
		t.Fatal(err)
	}
	if ports[0] == ports[1] {
		t.Fatalf("freePorts(2) = %v", ports)
	}
	e := &Env{Workers: 2, GatewayPort: uint16(ports[0]), TLSPort: uint16(ports[1])}
	var timeouts []int64
	for range 2 {
		c, warnings, err := nodeconf.Parse(e.config(), "config.yaml")
		if err != nil || len(warnings) > 0 {
			t.Fatalf("generation %d: %v, warnings %v", e.gen, err, warnings)
		}
		if p := c.Ports(); !slices.Equal(p, ports) {
			t.Errorf("generation %d listens on %v, want %v", e.gen, p, ports)
		}
		if l := c.APISIX.SSL.Listen; len(l) != 1 || l[0].IP != "127.0.0.1" {
			t.Errorf("generation %d: TLS on %v, want loopback", e.gen, l)
		}
		timeouts = append(timeouts, int64(c.NginxConfig.HTTP.KeepaliveTimeout))
		e.gen++
	}
	if timeouts[0] == timeouts[1] {
		t.Errorf("the generations' keepalive_timeout are the same: %v", timeouts)
	}
}
