//go:build !race

package filelogger

import (
	"path/filepath"
	"testing"
	"time"

	"coregate/plugins"
	"coregate/plugins/plugintest"
)

// TestAllocs: the log phase allocates nothing once the writer's buffers
// have grown, for the default entry (with response.headers and
// response.body, and include_req_body's body) and a log_format alike.
func TestAllocs(t *testing.T) {
	dir := t.TempDir()
	for _, path := range []string{filepath.Join(dir, "a.log"), filepath.Join(dir, "b.log"), filepath.Join(dir, "c.log")} {
		conf := `{"path":"` + path + `","include_resp_body":true}`
		switch filepath.Base(path) {
		case "b.log":
			conf = `{"path":"` + path + `","log_format":{"h":"$host","s":"$status","t":"$request_time","n":{"a":"$arg_a"}},"match":[[["arg_a","==","1"]]]}`
		case "c.log":
			conf = `{"path":"` + path + `","include_req_body":true,"include_req_body_expr":[["arg_a","==","1"]],"max_req_body_bytes":8}`
		}
		p := build(t, conf, "")
		c := plugintest.NewCtx("GET", "/hello?a=1&b=x%20y&a=2").WithHeader("Host", "x").WithHeader("X-A", "1").WithHeader("x-a", "2").
			WithResponseHeader("Content-Type", "text/plain")
		c.UpstreamBody = []byte("hello")
		if filepath.Base(path) == "c.log" {
			c.WithBody(`{"a":"a body longer than 8"}`)
		}
		c.SetConsumer(&plugins.Consumer{Username: "jack"})
		c.Figures = plugins.Exchange{RequestTime: time.Millisecond, Proxied: true}
		// Grow every buffer of the writer: each is taken in turn, the
		// writer let drain now and then so that none is dropped.
		w := writerOf(path)
		for i := range 2 * queueLen {
			c.Reset()
			plugintest.Run(p, c)
			for i%256 == 255 && len(w.free) < queueLen {
				time.Sleep(time.Millisecond)
			}
		}
		if d, _ := Dropped(path); d != 0 {
			t.Fatalf("%d entries dropped while growing the buffers", d)
		}
		plugintest.AllocsPerRun(t, 200, func() {
			c.Reset()
			plugintest.Run(p, c)
		})
	}
}
