package keyauth

import (
	"encoding/json"
	"strconv"
	"testing"

	"coregate/plugins"
	"coregate/plugins/plugintest"
)

// BenchmarkRewrite: one request through key-auth, by where its key is and
// how many consumers there are.
func BenchmarkRewrite(b *testing.B) {
	for _, n := range []int{1, 100, 10000} {
		var cs []*plugins.Consumer
		for i := range n {
			cs = append(cs, &plugins.Consumer{Username: "user" + strconv.Itoa(i),
				Plugins: map[string]json.RawMessage{Name: json.RawMessage(`{"key":"user-key` + strconv.Itoa(i) + `"}`)}})
		}
		x, err := plugins.Default.IndexConsumers(cs, nil)
		if err != nil {
			b.Fatal(err)
		}
		key := "user-key" + strconv.Itoa(n-1)
		for _, tc := range []struct {
			name, conf string
			c          *plugintest.Ctx
		}{
			{"header", `{}`, plugintest.NewCtx("GET", "/hello").WithHeader("Host", "a.com").WithHeader("apikey", key)},
			{"query", `{}`, plugintest.NewCtx("GET", "/hello?a=1&apikey="+key)},
			{"query hidden", `{"hide_credentials":true}`, plugintest.NewCtx("GET", "/hello?a=1&apikey="+key)},
			{"missing", `{}`, plugintest.NewCtx("GET", "/hello")},
		} {
			b.Run(tc.name+"/consumers="+strconv.Itoa(n), func(b *testing.B) {
				p := build(b, tc.conf, x)
				b.ReportAllocs()
				for b.Loop() {
					tc.c.Reset()
					plugintest.Run(&p, tc.c)
				}
			})
		}
	}
}
