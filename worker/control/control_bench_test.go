package control

import (
	"fmt"
	"strings"
	"testing"
)

// BenchmarkDecodeSpec5000 decodes the Config payload of 5 000 routes, as
// a worker does for every configuration of a node that size.
func BenchmarkDecodeSpec5000(b *testing.B) {
	var sb strings.Builder
	sb.WriteString(`{"routes":[`)
	for i := range 5000 {
		if i > 0 {
			sb.WriteByte(',')
		}
		fmt.Fprintf(&sb, `{"id":"r%d","uri":"/bulk/%d","upstream":{"type":"roundrobin","nodes":{"127.0.0.1:1980":1}}}`, i, i)
	}
	sb.WriteString(`]}`)
	s, err := DecodeSpec([]byte(sb.String()), nil)
	if err != nil {
		b.Fatal(err)
	}
	payload, err := EncodeSpec(s)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(payload)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := DecodeSpec(payload, nil); err != nil {
			b.Fatal(err)
		}
	}
}
