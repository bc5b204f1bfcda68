package consumerrestriction

import (
	"strconv"
	"strings"
	"testing"
)

// BenchmarkAccess: one request through consumer-restriction, by outcome
// and length of the whitelist (the consumer is the list's last).
func BenchmarkAccess(b *testing.B) {
	for _, n := range []int{1, 100} {
		names := make([]string, n)
		for i := range names {
			names[i] = strconv.Quote("consumer" + strconv.Itoa(i))
		}
		list := "[" + strings.Join(names, ",") + "]"
		last := "consumer" + strconv.Itoa(n-1)
		for _, tc := range []struct {
			name, conf string
			req        request
		}{
			{"whitelisted", `{"whitelist":` + list + `}`, request{consumer: last}},
			{"blacklisted", `{"blacklist":` + list + `}`, request{consumer: last}},
			{"methods", `{"allowed_by_methods":[{"user":"` + last + `","methods":["POST","GET"]}]}`, request{method: "GET", consumer: last}},
		} {
			b.Run(tc.name+"/list="+strconv.Itoa(n), func(b *testing.B) {
				p := build(b, tc.conf)
				c := tc.req.ctx()
				k := c.Consumer()
				b.ReportAllocs()
				for b.Loop() {
					c.Reset()
					c.SetConsumer(k)
					p.Access[0].Access(c)
				}
			})
		}
	}
}
