package node

import (
	"testing"
	"time"

	"coregate/admin/nodeconf"
)

// TestSecretResolver: the node's resolver keeps values and failures for
// apisix.lru.secret's ttl and neg_ttl, APISIX's 300 s and 60 s when they
// are not written.
func TestSecretResolver(t *testing.T) {
	for _, tc := range []struct {
		src      string
		ttl, neg time.Duration
	}{
		{"", 300 * time.Second, 60 * time.Second},
		{"apisix:\n  lru:\n    secret:\n      ttl: 20\n      neg_ttl: 3\n", 20 * time.Second, 3 * time.Second},
	} {
		nc, _, err := nodeconf.Parse([]byte(tc.src), "conf/config.yaml")
		if err != nil {
			t.Fatal(err)
		}
		if r := SecretResolver(nc); r.TTL != tc.ttl || r.NegTTL != tc.neg {
			t.Errorf("%q: TTL %v NegTTL %v, want %v %v", tc.src, r.TTL, r.NegTTL, tc.ttl, tc.neg)
		}
	}
}
