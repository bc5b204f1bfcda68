//go:build !race

package logentry

import (
	"testing"

	"coregate/plugins"
	"coregate/plugins/plugintest"
)

// TestAllocs: appending either entry to a grown buffer allocates nothing,
// with the request's body or without.
func TestAllocs(t *testing.T) {
	f := compile(t, `{"u":"$uri","x":"$http_x","n":{"s":"$status","t":"$request_time"}}`, true)
	extra := compile(t, `{"mine":"$host"}`, false)
	c := plugintest.NewCtx("GET", "/p?a=1&a=2&b=%20").WithHeader("X", "1").WithHeader("x", "2").
		WithResponseHeader("Content-Type", "text/plain").WithResponseHeader("Set-Cookie", "a").WithResponseHeader("set-cookie", "b")
	plugintest.Run(&plugins.Phases{}, c)
	c.SetConsumer(&plugins.Consumer{Username: "jack"})
	var b, tmp []byte
	plugintest.AllocsPerRun(t, 200, func() {
		b = AppendCustom(b[:0], c, f, "")
		b = AppendFull(b[:0], &tmp, c, extra, "no-matched", nil, nil)
	})
	c.WithBody(`{"a":"b"}`)
	r := &Body{max: 4}
	plugintest.AllocsPerRun(t, 200, func() {
		b = AppendFull(b[:0], &tmp, c, extra, "no-matched", r.Of(c), nil)
	})
}
