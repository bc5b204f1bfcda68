//go:build !race

package proxymirror

import (
	"strings"
	"testing"

	"coregate/plugins/plugintest"
)

// TestAllocs: the rewrite and log phases allocate nothing: the copy is
// made in a job's reused buffers and handed over on a channel (here taken
// back by the test, as a sender would, without sending it), a request's
// body included, read before the phases or copied as it went upstream
// (the job kept from rewrite to log).
func TestAllocs(t *testing.T) {
	for _, conf := range []string{
		`{"host":"http://127.0.0.1:1986"}`,
		`{"host":"http://127.0.0.1:1986","path":"/a","path_concat_mode":"prefix","sample_ratio":0.5}`,
		`{"host":"http://127.0.0.1:1986","path":"/body"}`,
		`{"host":"http://127.0.0.1:1986","path":"/tee"}`,
	} {
		p, in := build(t, conf)
		in.q = newQueue(1, 0)
		c := plugintest.NewCtx("GET", "/hello?a=1").WithHeader("Host", "app.example").WithHeader("X-A", "1").WithHeader("User-Agent", "curl")
		if strings.Contains(conf, "/body") {
			c = plugintest.NewCtx("POST", "/hello").WithHeader("Content-Length", "13").WithBody(`{"a":"body"}` + "\n")
		}
		if strings.Contains(conf, "/tee") {
			c = plugintest.NewCtx("POST", "/hello").WithHeader("Content-Length", "13").WithTeeBody(`{"a":"body"}` + "\n")
		}
		plugintest.AllocsPerRun(t, 100, func() {
			c.Reset()
			plugintest.Run(p, c)
			select {
			case j := <-in.q.work:
				in.q.free <- j
			default:
			}
			if len(in.q.free) != 1 {
				t.Fatal("the job was not given back")
			}
		})
	}
}
