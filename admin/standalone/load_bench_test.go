package standalone

import (
	"fmt"
	"strings"
	"testing"
)

// BenchmarkParse5000Routes loads a file shaped like the 5000-route
// benchmark scenario: one upstream, 5000 routes with explicit ids.
func BenchmarkParse5000Routes(b *testing.B) {
	var sb strings.Builder
	sb.WriteString("upstreams:\n  - id: 1\n    type: roundrobin\n    nodes:\n      \"127.0.0.1:1980\": 1\nroutes:\n")
	for i := 0; i < 5000; i++ {
		fmt.Fprintf(&sb, "  - id: %d\n    uri: /hello%d\n    upstream_id: 1\n", i+1, i)
	}
	sb.WriteString("#END\n")
	data := []byte(sb.String())
	b.ReportAllocs()
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		s, err := Parse(data, "apisix.yaml", func(string) (string, bool) { return "", false })
		if err != nil {
			b.Fatal(err)
		}
		if len(s.Routes) != 5000 {
			b.Fatalf("%d routes", len(s.Routes))
		}
	}
}
