//go:build !race

package consumerrestriction

import (
	"testing"

	"coregate/plugins/plugintest"
)

// TestAllocAccess: consumer-restriction's access phase allocates nothing,
// whichever way the request goes.
func TestAllocAccess(t *testing.T) {
	for _, tc := range []struct {
		name, conf string
		req        request
	}{
		{"whitelisted", `{"whitelist":["jack0","jack1"]}`, request{consumer: "jack1"}},
		{"blacklisted", `{"blacklist":["jack1"],"rejected_msg":"no"}`, request{consumer: "jack1"}},
		{"no consumer", `{"whitelist":["jack1"]}`, request{}},
		{"methods", `{"allowed_by_methods":[{"user":"jack1","methods":["POST","GET"]}]}`, request{method: "GET", consumer: "jack1"}},
		{"route", `{"type":"route_id","whitelist":["1"]}`, request{route: "1"}},
		{"service", `{"type":"service_id","blacklist":["1"]}`, request{service: "2"}},
		{"group", `{"type":"consumer_group_id","whitelist":["g1"]}`, request{consumer: "jack1", group: "g1"}},
		{"group refused", `{"type":"consumer_group_id","blacklist":["g1"]}`, request{consumer: "jack1", group: "g1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := build(t, tc.conf)
			c := tc.req.ctx()
			k := c.Consumer()
			plugintest.AllocsPerRun(t, 200, func() {
				c.Reset()
				if k != nil {
					c.SetConsumer(k)
				}
				plugintest.Run(&p, c)
			})
		})
	}
}
