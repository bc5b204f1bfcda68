//go:build !race

package upstream

import "testing"

func TestScanAllocs(t *testing.T) {
	buf := []byte("GET /hello HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabcGET / HTTP/1.1\r\n\r\n")
	skip := 0
	if n := testing.AllocsPerRun(1000, func() { _, _, _ = Scan(buf, &skip) }); n != 0 {
		t.Fatalf("Scan allocates %v times per call", n)
	}
}
