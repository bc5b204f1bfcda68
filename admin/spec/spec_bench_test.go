package spec

import (
	"encoding/json"
	"testing"
)

var benchRoute = []byte(`{"id":1,"uri":"/hello","methods":["GET","POST"],"hosts":["a.example.com"],
	"vars":[["arg_a","==","1"]],"plugins":{"limit-count":{"count":999999999,"time_window":60,"rejected_code":503,"key":"remote_addr"},"prometheus":{}},
	"upstream":{"type":"roundrobin","nodes":{"127.0.0.1:1980":1,"127.0.0.1:1981":1}}}`)

func BenchmarkDecodeRoute(b *testing.B) {
	b.ReportAllocs()
	b.SetBytes(int64(len(benchRoute)))
	for b.Loop() {
		if _, err := DecodeRoute(benchRoute); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkUnmarshalRoute is the lenient path (encoding/json, as used for
// values read back from a store), for comparison.
func BenchmarkUnmarshalRoute(b *testing.B) {
	b.ReportAllocs()
	b.SetBytes(int64(len(benchRoute)))
	for b.Loop() {
		var r Route
		if err := json.Unmarshal(benchRoute, &r); err != nil {
			b.Fatal(err)
		}
	}
}
