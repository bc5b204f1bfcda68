//go:build !race

package httplogger

import (
	"strings"
	"testing"
	"time"

	"coregate/plugins/plugintest"
)

// TestAllocs: the log phase allocates nothing once the batch processor's
// buffers have grown, for the default entry (with response.headers and
// response.body, and include_req_body's body) and a log_format alike.
func TestAllocs(t *testing.T) {
	s := newLogServer(t, 0)
	for _, conf := range []string{
		`{"uri":"` + s.URL + `/a","batch_max_size":8,"inactive_timeout":1}`,
		`{"uri":"` + s.URL + `/c","batch_max_size":8,"inactive_timeout":1,"include_resp_body":true,"include_resp_body_expr":[["arg_a","==","1"]]}`,
		`{"uri":"` + s.URL + `/b","batch_max_size":8,"inactive_timeout":1,"log_format":{"h":"$host","s":"$status"}}`,
		`{"uri":"` + s.URL + `/d","batch_max_size":8,"inactive_timeout":1,"include_req_body":true,"include_req_body_expr":[["arg_a","==","1"]],"max_req_body_bytes":8}`,
	} {
		p := buildMD(t, conf, `{"max_pending_entries":64}`)
		c := plugintest.NewCtx("GET", "/hello?a=1&b=2").WithHeader("Host", "x").WithHeader("X-A", "1").WithResponseHeader("Content-Type", "text/plain")
		c.UpstreamBody = []byte("hello")
		if strings.Contains(conf, "include_req_body") {
			c.WithBody(`{"a":"a body longer than 8"}`)
		}
		// The instance's buffer and each of the processor's 64 grown: they
		// are taken in turn, the batches let go now and then.
		for i := range 256 {
			c.Reset()
			plugintest.Run(p, c)
			if i%32 == 31 {
				time.Sleep(20 * time.Millisecond)
			}
		}
		plugintest.AllocsPerRun(t, 100, func() {
			c.Reset()
			plugintest.Run(p, c)
		})
	}
}
