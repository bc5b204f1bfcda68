//go:build !race

package apibreaker

import (
	"testing"

	"coregate/plugins/plugintest"
)

// TestAllocs: a request through a closed breaker, one counted unhealthy
// and one answered by the open breaker with its body and headers
// allocate nothing once the pair is tracked.
func TestAllocs(t *testing.T) {
	p := build(t, `{"break_response_code":502,"break_response_body":"open","break_response_headers":[{"key":"X-Client","value":"$remote_addr"}],"unhealthy":{"failures":1000000000}}`)
	c := plugintest.NewCtx("GET", "/a").WithHeader("Host", "a.com")
	send(p, c, 500)
	plugintest.AllocsPerRun(t, 200, func() { send(p, c, 500) })
	plugintest.AllocsPerRun(t, 200, func() { send(p, c, 200) })

	p = build(t, `{"break_response_code":502,"break_response_body":"open","break_response_headers":[{"key":"X-Client","value":"$remote_addr"}],"unhealthy":{"failures":1}}`)
	send(p, c, 500)
	if send(p, c, 200) != 502 {
		t.Fatal("breaker not open")
	}
	plugintest.AllocsPerRun(t, 200, func() { send(p, c, 200) })
}
