package workerproc

import (
	"testing"
	"time"

	"coregate/admin/nodeconf"
)

// TestWorkerConfigKeepalive: config.yaml's client keep-alive settings reach
// the worker as nginx reads them: keepalive_requests and keepalive_time as
// given, and a keepalive_timeout or keepalive_time of 0 as one request per
// connection.
func TestWorkerConfigKeepalive(t *testing.T) {
	for _, tc := range []struct {
		http     string
		requests int
	}{
		{"", 1000},
		{"    keepalive_requests: 50\n", 50},
		{"    keepalive_timeout: 0\n", 1},
		{"    keepalive_timeout: 0s\n    keepalive_requests: 50\n", 1},
		{"    keepalive_time: 0\n", 1},
		{"    keepalive_time: 10m\n", 1000},
	} {
		src := "nginx_config:\n  http:\n    enable_access_log: false\n" + tc.http
		nc, _, err := nodeconf.Parse([]byte(src), "config.yaml")
		if err != nil {
			t.Fatalf("%q: %v", tc.http, err)
		}
		cfg := workerConfig(nc, nil)
		if cfg.KeepaliveRequests != tc.requests {
			t.Errorf("%q: KeepaliveRequests = %d, want %d", tc.http, cfg.KeepaliveRequests, tc.requests)
		}
	}
}

// TestWorkerConfigDNS: apisix.dns_resolver, dns_resolver_valid,
// resolver_timeout and discovery.dns.servers reach the worker.
func TestWorkerConfigDNS(t *testing.T) {
	src := "apisix:\n  dns_resolver: [127.0.0.1:5353]\n  dns_resolver_valid: 30\n  resolver_timeout: 2\ndiscovery:\n  dns:\n    servers: [127.0.0.1:8600]\n"
	nc, _, err := nodeconf.Parse([]byte(src), "config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfg := workerConfig(nc, nil)
	if got := cfg.DNS; len(got.Servers) != 1 || got.Servers[0] != "127.0.0.1:5353" || got.Valid != 30*time.Second || got.Timeout != 2*time.Second {
		t.Errorf("DNS = %+v, want 127.0.0.1:5353, 30s, 2s", got)
	}
	if got := cfg.DiscoveryDNS; len(got.Servers) != 1 || got.Servers[0] != "127.0.0.1:8600" || got.Timeout != 2*time.Second {
		t.Errorf("DiscoveryDNS = %+v, want 127.0.0.1:8600, 2s", got)
	}
	nc, _, err = nodeconf.Parse(nil, "config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if got := workerConfig(nc, nil).DiscoveryDNS; got.Servers != nil {
		t.Errorf("default DiscoveryDNS = %+v, want no server", got)
	}
	if got := workerConfig(nc, nil).DNS; got.Servers != nil || got.Valid != 0 || got.Timeout != 5*time.Second {
		t.Errorf("default DNS = %+v, want the system resolver, the records' TTLs, 5s", got)
	}
}

// TestWorkerConfigUnderscores: underscores_in_headers off, and only off,
// has the worker drop the fields with "_" in their names.
func TestWorkerConfigUnderscores(t *testing.T) {
	for _, tc := range []struct {
		http string
		drop bool
	}{
		{"", false},
		{"    underscores_in_headers: \"on\"\n", false},
		{"    underscores_in_headers: \"off\"\n", true},
	} {
		nc, _, err := nodeconf.Parse([]byte("nginx_config:\n  http:\n    enable_access_log: false\n"+tc.http), "config.yaml")
		if err != nil {
			t.Fatalf("%q: %v", tc.http, err)
		}
		if got := workerConfig(nc, nil).DropUnderscores; got != tc.drop {
			t.Errorf("%q: DropUnderscores = %v, want %v", tc.http, got, tc.drop)
		}
	}
}
