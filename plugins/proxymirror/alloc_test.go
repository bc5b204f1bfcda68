//go:build !race

package proxymirror

import (
	"strings"
	"testing"

	"coregate/plugins/plugintest"
)

// TestAllocs: the rewrite phase allocates nothing: the copy is made in a
// job's reused buffers and handed over on a channel (here taken back by
// the test, as a sender would, without sending it), a request's body
// included.
func TestAllocs(t *testing.T) {
	for _, conf := range []string{
		`{"host":"http://127.0.0.1:1986"}`,
		`{"host":"http://127.0.0.1:1986","path":"/a","path_concat_mode":"prefix","sample_ratio":0.5}`,
		`{"host":"http://127.0.0.1:1986","path":"/body"}`,
	} {
		p, in := build(t, conf)
		in.q = newQueue(1, 0)
		c := plugintest.NewCtx("GET", "/hello?a=1").WithHeader("Host", "app.example").WithHeader("X-A", "1").WithHeader("User-Agent", "curl")
		if strings.Contains(conf, "/body") {
			c = plugintest.NewCtx("POST", "/hello").WithHeader("Content-Length", "13").WithBody(`{"a":"body"}` + "\n")
		}
		plugintest.AllocsPerRun(t, 100, func() {
			c.Reset()
			plugintest.Run(p, c)
			select {
			case j := <-in.q.work:
				in.q.free <- j
			default:
			}
		})
	}
}
