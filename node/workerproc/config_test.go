package workerproc

import (
	"testing"

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
