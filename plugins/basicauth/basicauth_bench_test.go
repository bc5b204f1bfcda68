package basicauth

import (
	"encoding/json"
	"strconv"
	"testing"

	"coregate/plugins"
	"coregate/plugins/plugintest"
)

// BenchmarkRewrite: one request through basic-auth, by outcome and number
// of consumers.
func BenchmarkRewrite(b *testing.B) {
	for _, n := range []int{1, 10000} {
		var cs []*plugins.Consumer
		for i := range n {
			u := "user" + strconv.Itoa(i)
			cs = append(cs, &plugins.Consumer{Username: u,
				Plugins: map[string]json.RawMessage{Name: json.RawMessage(`{"username":"` + u + `","password":"pw` + strconv.Itoa(i) + `"}`)}})
		}
		x, err := plugins.Default.IndexConsumers(cs, nil)
		if err != nil {
			b.Fatal(err)
		}
		last := strconv.Itoa(n - 1)
		for _, tc := range []struct {
			name string
			c    *plugintest.Ctx
		}{
			{"valid", ctx("Authorization", "Basic "+b64("user"+last+":pw"+last))},
			{"invalid password", ctx("Authorization", "Basic "+b64("user"+last+":nope"))},
			{"missing", ctx()},
		} {
			b.Run(tc.name+"/consumers="+strconv.Itoa(n), func(b *testing.B) {
				p := build(b, `{}`, x)
				b.ReportAllocs()
				for b.Loop() {
					tc.c.Reset()
					plugintest.Run(&p, tc.c)
				}
			})
		}
	}
}
