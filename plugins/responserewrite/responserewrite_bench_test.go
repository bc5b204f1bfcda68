package responserewrite

import (
	"strings"
	"testing"

	"coregate/plugins/plugintest"
)

// BenchmarkResponseRewrite: one response through response-rewrite, by
// configuration.
func BenchmarkResponseRewrite(b *testing.B) {
	for _, tc := range []struct{ name, conf string }{
		{"headers", `{"headers":{"set":{"X-Server-Id":"3","X-Addr":"$remote_addr"},"remove":["Server"]}}`},
		{"set literal", `{"headers":{"set":{"X-Route":"r1"}}}`},
		{"status body", `{"status_code":200,"body":"{\"code\":\"ok\"}"}`},
		{"vars", `{"vars":[["status","==",500]],"body":"hidden"}`},
	} {
		b.Run(tc.name, func(b *testing.B) {
			p := build(b, tc.conf)
			c := plugintest.NewCtx("GET", "/hello").WithResponseHeader("Server", "up")
			c.UpstreamBody = []byte("hello world")
			b.ReportAllocs()
			for b.Loop() {
				c.Reset()
				plugintest.Run(p, c)
			}
		})
	}
	for name, conf := range map[string]string{
		"filters literal": `{"filters":[{"regex":"world","replace":"there","scope":"global"}]}`,
		"filters regex":   `{"filters":[{"regex":"wor+ld","replace":"there","scope":"global"}]}`,
	} {
		b.Run(name, func(b *testing.B) { benchFilters(b, conf) })
	}
}

// benchFilters: filters over a 1 KiB body that comes in two pieces, with
// 85 matches.
func benchFilters(b *testing.B, conf string) {
	p := build(b, conf)
	c := plugintest.NewCtx("GET", "/hello")
	h, f, l := p.HeaderFilter[0], p.BodyFilter[0], p.Log[0]
	piece := make([]byte, 512)
	for i := range piece {
		piece[i] = "hello world "[i%12]
	}
	b.ReportAllocs()
	for b.Loop() {
		c.Reset()
		h.HeaderFilter(c)
		f.BodyFilter(c, piece, false)
		f.BodyFilter(c, piece, false)
		f.BodyFilter(c, nil, true)
		l.Log(c)
	}
}

// BenchmarkBenchRow: the bench row's response (bench/scenario,
// "response-rewrite"): a header set and a literal filter over the seeds'
// 1 KiB body ("1234567890" × 102 + "1234", 102 matches), which comes in
// one piece, as from the upstream on loopback.
func BenchmarkBenchRow(b *testing.B) {
	p := build(b, `{"headers":{"set":{"X-Server-Id":"3"}},"filters":[{"regex":"5678","replace":"abcd","scope":"global"}]}`)
	c := plugintest.NewCtx("GET", "/hello")
	h, f, l := p.HeaderFilter[0], p.BodyFilter[0], p.Log[0]
	body := []byte(strings.Repeat("1234567890", 102) + "1234")
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		c.Reset()
		h.HeaderFilter(c)
		f.BodyFilter(c, body, false)
		f.BodyFilter(c, nil, true)
		l.Log(c)
	}
}

// BenchmarkLiteral: the search of a literal filter alone over a 1 KiB
// body, in place (a replacement as long as the literal) and by index (a
// longer one): the bench row's body, with a match every 10 bytes; text
// with the literal's first byte frequent and the literal rare; a body
// without the literal's first byte.
func BenchmarkLiteral(b *testing.B) {
	text := strings.Repeat("the quick brown fox jumps over the lazy dog. ", 23)[:1000] + "5678" + strings.Repeat(" ", 20)
	for _, tc := range []struct{ name, lit, body string }{
		{"row", "5678", strings.Repeat("1234567890", 102) + "1234"},
		{"text", "5678", text},
		{"text long", "5678 the lazy", text},
		{"absent", "5678", strings.Repeat("x", 1024)},
	} {
		c, err := compile([]byte(`{"filters":[{"regex":"` + tc.lit + `","replace":"` + strings.Repeat("a", len(tc.lit)) + `","scope":"global"}]}`))
		if err != nil {
			b.Fatal(err)
		}
		f := &c.filters[0]
		body := []byte(tc.body)
		b.Run(tc.name+"/overwrite", func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			for b.Loop() {
				copy(body, tc.body)
				f.overwrite(body)
			}
		})
		b.Run(tc.name+"/index", func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			copy(body, tc.body)
			for b.Loop() {
				for i := f.index(body, 0); i >= 0; i = f.index(body, i+len(f.lit)) {
				}
			}
		})
	}
}
