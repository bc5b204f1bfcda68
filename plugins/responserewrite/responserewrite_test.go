package responserewrite

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"

	"coregate/plugins"
	"coregate/plugins/plugintest"
)

func build(t testing.TB, conf string) *plugins.Phases { return plugintest.Build(t, Name, conf) }

// TestCheck: the schema's refusals and check_schema's messages, as
// response-rewrite*.t show them.
func TestCheck(t *testing.T) {
	const prefix = "failed to check the configuration of plugin response-rewrite err: "
	for _, tc := range []struct{ conf, err string }{
		{`{}`, ""},
		{`{"status_code":200,"body":"x","headers":{"X-A":"1","X-B":2}}`, ""},
		{`{"headers":{"add":["X-A: 1"],"set":{"X-B":"$remote_addr"},"remove":["Server"]}}`, ""},
		{`{"filters":[{"regex":"l","scope":"global","replace":"t"}]}`, ""},
		{`{"vars":[["status","==",200]],"body":"x"}`, ""},
		{`{"status_code":599}`, prefix + `property "status_code" validation failed: expected 599 to be at most 598`},
		{`{"body":1}`, prefix + `property "body" validation failed: wrong type: expected string, got number`},
		{`{"status_code":200,"headers":{"":2}}`, prefix + "invalid field length in header"},
		{`{"status_code":200,"headers":{"X-Name":{}}}`, prefix + "invalid type as header value"},
		{`{"body":"1","body_base64":true}`, prefix + "invalid base64 content"},
		{`{"body":"","body_base64":true}`, prefix + "invalid base64 content"},
		{`{"body_base64":true}`, prefix + "invalid base64 content"},
		{`{"vars":[[]]}`, prefix + "failed to validate the 'vars' expression: rule too short"},
		{`{"filters":[{"regex":"l"}]}`, prefix + `property "filters" validation failed: failed to validate item 1: property "replace" is required`},
		{`{"filters":[{"regex":"l","replace":"t","scope":"one"}]}`, prefix + `property "filters" validation failed: failed to validate item 1: property "scope" validation failed: matches none of the enum values`},
		{`{"filters":[{"regex":"","replace":"t"}]}`, prefix + `property "filters" validation failed: failed to validate item 1: property "regex" validation failed: string too short, expected at least 1, got 0`},
		{`{"filters":[{"regex":"hello","replace":"t","options":"h"}]}`, prefix + `regex "hello" validation failed: unknown flag "h" (flags "h")`},
		{`{"filters":[{"regex":"(","replace":"t"}]}`, prefix + `regex "(" validation failed: failed to compile the regex`},
		{`{"filters":[{"regex":"l","replace":"t"}],"body":"x"}`, prefix + `failed to validate dependent schema for "filters|body"`},
		{`{"headers":{"add":["X-A 1"]}}`, prefix + `property "headers" validation failed`},
	} {
		err := plugins.Check(Name, json.RawMessage(tc.conf))
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("%s: %v", tc.conf, err)
		case tc.err != "" && (err == nil || !strings.HasPrefix(err.Error(), tc.err)):
			t.Errorf("%s: err = %v, want %q…", tc.conf, err, tc.err)
		}
	}
}

// TestRewrite: the status, the body (base64 too) and the headers, on the
// upstream's answer and on a plugin's exit.
func TestRewrite(t *testing.T) {
	p := build(t, `{"status_code":403,"body":"new body\n","headers":{"X-Server-Id":3,"X-Addr":"$remote_addr","X-Server-Status":"on"}}`)
	c := plugintest.NewCtx("GET", "/hello")
	c.UpstreamBody = []byte("old")
	c.WithResponseHeader("ETag", `"abc"`).WithResponseHeader("Content-Encoding", "identity")
	plugintest.Run(p, c)
	if c.Status() != 403 || string(c.Body) != "new body\n" {
		t.Fatalf("status %d body %q, want 403 and the new body", c.Status(), c.Body)
	}
	for name, want := range map[string]string{"X-Server-Id": "3", "X-Addr": "127.0.0.1", "X-Server-Status": "on", "ETag": "", "Content-Encoding": ""} {
		if got := string(c.ResponseHeader(name)); got != want {
			t.Errorf("%s: %q, want %q", name, got, want)
		}
	}

	p = build(t, `{"body":"SGVsbG8K","body_base64":true}`)
	c = plugintest.NewCtx("GET", "/hello")
	c.UpstreamBody = []byte("old")
	plugintest.Run(p, c)
	if c.Status() != 200 || string(c.Body) != "Hello\n" {
		t.Fatalf("base64: status %d body %q, want 200 Hello", c.Status(), c.Body)
	}
}

// TestHeaders: APISIX 3.x's add, set and remove, in that order.
func TestHeaders(t *testing.T) {
	p := build(t, `{"headers":{"add":["Set-Cookie: a=1","X-Up: $uri"],"set":{"X-Set":"v","X-Up":"set"},"remove":["Server","X-Gone"]}}`)
	c := plugintest.NewCtx("GET", "/hello")
	c.UpstreamBody = []byte("kept")
	c.WithResponseHeader("Server", "up").WithResponseHeader("X-Gone", "1").WithResponseHeader("Set-Cookie", "b=2")
	plugintest.Run(p, c)
	if string(c.Body) != "kept" {
		t.Errorf("body %q, want the upstream's", c.Body)
	}
	if got := c.ResponseHeaderValues("Set-Cookie"); len(got) != 1 || got[0] != "a=1" {
		t.Errorf("Set-Cookie added: %q, want a=1 after the upstream's", got)
	}
	for name, want := range map[string]string{"Set-Cookie": "b=2", "X-Set": "v", "X-Up": "set", "Server": "", "X-Gone": ""} {
		if got := string(c.ResponseHeader(name)); got != want {
			t.Errorf("%s: %q, want %q", name, got, want)
		}
	}
}

// TestVars: the rewrite only for the responses vars hold for, $status
// included.
func TestVars(t *testing.T) {
	p := build(t, `{"vars":[["status","==",500],["arg_a","~=","x"]],"body":"hidden","status_code":200}`)
	for _, tc := range []struct {
		target string
		status int
		body   string
	}{
		{"/hello", 500, "hidden"},
		{"/hello?a=y", 500, "hidden"},
		{"/hello?a=x", 500, "boom"},
		{"/hello", 502, "boom"},
	} {
		c := plugintest.NewCtx("GET", tc.target)
		c.UpstreamStatus, c.UpstreamBody = tc.status, []byte("boom")
		plugintest.Run(p, c)
		want := tc.status
		if tc.body == "hidden" {
			want = 200
		}
		if string(c.Body) != tc.body || c.Status() != want {
			t.Errorf("%s %d: status %d body %q, want %d %q", tc.target, tc.status, c.Status(), c.Body, want, tc.body)
		}
	}
}

// body runs the body through p's body_filter in pieces, as the worker
// gives it, after header_filter; it returns what the client gets.
func body(p *plugins.Phases, c *plugintest.Ctx, pieces ...string) string {
	for _, h := range p.HeaderFilter {
		h.HeaderFilter(c)
	}
	var out []byte
	for i, piece := range pieces {
		b := []byte(piece)
		eof := i == len(pieces)-1
		for _, f := range p.BodyFilter {
			b = f.BodyFilter(c, b, eof)
		}
		out = append(out, b...)
	}
	for _, l := range p.Log {
		l.Log(c)
	}
	return string(out)
}

// TestFilters: response-rewrite2.t's filters, once and global, on a body
// that comes in pieces; the groups of the replacement; the options.
func TestFilters(t *testing.T) {
	for _, tc := range []struct {
		conf   string
		pieces []string
		want   string
	}{
		{`{"filters":[{"regex":"hello","replace":"test"}]}`, []string{"hel", "lo world\n", ""}, "test world\n"},
		{`{"filters":[{"regex":"l","scope":"global","replace":"t"}]}`, []string{"hello ", "world", ""}, "hetto wortd"},
		{`{"filters":[{"regex":"hello","replace":""}]}`, []string{"hello world\n", ""}, " world\n"},
		{`{"filters":[{"regex":"(\\w+) (\\w+)","replace":"$2 $1"}]}`, []string{"hello world", ""}, "world hello"},
		{`{"filters":[{"regex":"HELLO","replace":"x","options":"ijo"}]}`, []string{"hello", ""}, "x"},
		{`{"filters":[{"regex":"HELLO","replace":"x"}]}`, []string{"hello", ""}, "hello"},
		{`{"filters":[{"regex":"o","replace":"0","scope":"global"},{"regex":"l+","replace":"L"}]}`, []string{"hello world", ""}, "heL0 w0rld"},
		{`{"max_resp_body_size":5,"filters":[{"regex":"l","replace":"L","scope":"global"}]}`, []string{"hel", "lo world", ""}, "heLLo"},
	} {
		p := build(t, tc.conf)
		c := plugintest.NewCtx("GET", "/hello")
		c.UpstreamStatus = 200
		// The buffers are the instance's, reused: twice gives the same.
		for range 2 {
			if got := body(p, c, tc.pieces...); got != tc.want {
				t.Errorf("%s %q: %q, want %q", tc.conf, tc.pieces, got, tc.want)
			}
			c.Reset()
		}
	}
}

// TestFiltersGzip: a gzip body is decoded for the filters and sent plain,
// Content-Encoding gone; an encoding the filters cannot read is left as
// it came, its Content-Encoding kept.
func TestFiltersGzip(t *testing.T) {
	p := build(t, `{"filters":[{"regex":"hello","replace":"test"}]}`)
	var z bytes.Buffer
	zw := gzip.NewWriter(&z)
	zw.Write([]byte("hello world"))
	zw.Close()
	c := plugintest.NewCtx("GET", "/hello").WithResponseHeader("Content-Encoding", "gzip")
	c.Upstream = true
	if got := body(p, c, z.String()[:5], z.String()[5:], ""); got != "test world" {
		t.Errorf("gzip: %q, want test world", got)
	}
	if ce := c.ResponseHeader("Content-Encoding"); ce != nil {
		t.Errorf("gzip: Content-Encoding %q left", ce)
	}
	c = plugintest.NewCtx("GET", "/hello").WithResponseHeader("Content-Encoding", "br")
	c.Upstream = true
	if got := body(p, c, "hello", ""); got != "hello" {
		t.Errorf("br: %q, want the body as it came", got)
	}
	if ce := string(c.ResponseHeader("Content-Encoding")); ce != "br" {
		t.Errorf("br: Content-Encoding %q, want br", ce)
	}
}

// TestInterleaved: two responses' bodies in pieces on one instance, as
// an event loop interleaves them, each rewritten from its own: streamed
// (a literal replaced by one as long), the pieces held where they end with
// the literal's first bytes, and held whole (a longer replacement).
func TestInterleaved(t *testing.T) {
	for _, tc := range []struct{ conf, want1, want2 string }{
		{`{"filters":[{"regex":"a","replace":"b","scope":"global"}]}`, "bbyb", "xbz"},
		{`{"filters":[{"regex":"ay","replace":"AY","scope":"global"}]}`, "aAYa", "xaz"},
		{`{"filters":[{"regex":"a","replace":"bc","scope":"global"}]}`, "bcbcybc", "xbcz"},
	} {
		p := build(t, tc.conf)
		f := p.BodyFilter[0]
		c1, c2 := plugintest.NewCtx("GET", "/1"), plugintest.NewCtx("GET", "/2")
		p.HeaderFilter[0].HeaderFilter(c1)
		p.HeaderFilter[0].HeaderFilter(c2)
		var got1, got2 []byte
		got1 = append(got1, f.BodyFilter(c1, []byte("aa"), false)...)
		got2 = append(got2, f.BodyFilter(c2, []byte("xa"), false)...)
		got1 = append(got1, f.BodyFilter(c1, []byte("ya"), false)...)
		got2 = append(got2, f.BodyFilter(c2, []byte("z"), true)...)
		got1 = append(got1, f.BodyFilter(c1, nil, true)...)
		if string(got1) != tc.want1 || string(got2) != tc.want2 {
			t.Fatalf("%s: bodies %q and %q, want %s and %s", tc.conf, got1, got2, tc.want1, tc.want2)
		}
	}
}

// TestGzipBomb: a gzip body is decoded to max_resp_body_size at most.
func TestGzipBomb(t *testing.T) {
	p := build(t, `{"max_resp_body_size":16384,"filters":[{"regex":"a","replace":"b","scope":"global"}]}`)
	var z bytes.Buffer
	zw := gzip.NewWriter(&z)
	zw.Write(bytes.Repeat([]byte("a"), 10<<20))
	zw.Close()
	if z.Len() > 16384 {
		t.Fatalf("10 MiB of a compressed to %d bytes, over the limit", z.Len())
	}
	c := plugintest.NewCtx("GET", "/hello").WithResponseHeader("Content-Encoding", "gzip")
	c.Upstream = true
	if got := body(p, c, z.String(), ""); got != strings.Repeat("b", 16384) {
		t.Fatalf("%d bytes, want 16384 b", len(got))
	}
}

// TestGzipCut: a gzip body longer than max_resp_body_size is cut before
// it is decoded; what decodes of the cut is sent, rewritten, rather than
// the cut gzip bytes themselves, which the client would get with
// Content-Encoding gone.
func TestGzipCut(t *testing.T) {
	p := build(t, `{"max_resp_body_size":4096,"filters":[{"regex":"a","replace":"b","scope":"global"}]}`)
	plain := make([]byte, 64<<10)
	x := uint32(1)
	for i := range plain {
		x = x*1664525 + 1013904223 // incompressible: the cut ends the stream early
		plain[i] = byte(x >> 24)
	}
	var z bytes.Buffer
	zw := gzip.NewWriter(&z)
	zw.Write(plain)
	zw.Close()
	if z.Len() <= 4096 {
		t.Fatalf("compressed to %d bytes, within the limit", z.Len())
	}
	c := plugintest.NewCtx("GET", "/hello").WithResponseHeader("Content-Encoding", "gzip")
	c.Upstream = true
	got := body(p, c, z.String()[:3000], z.String()[3000:], "")
	want := strings.ReplaceAll(string(plain), "a", "b")
	if len(got) == 0 || len(got) > 4096 || !strings.HasPrefix(want, got) {
		t.Fatalf("%d bytes %q..., want a decoded prefix of at most 4096", len(got), got[:min(len(got), 16)])
	}
}

// TestFiltersLiteral: a literal pattern, found without regexp and
// replaced in place when its replacement is as long, gives what regexp's
// own replacement gives: once and global, a replacement shorter, as long
// and longer, with a group, matches at the ends and side by side, and
// runs of false starts (the literal's first byte without the rest) long
// enough that the search hands over to bytes.Index, the first byte far
// enough away that bytes.IndexByte finds it, literals shorter and longer
// than the word compared at once, and matches within the last word of the
// body. Each body comes in
// two pieces, and the instance is used twice, as its buffers are reused.
func TestFiltersLiteral(t *testing.T) {
	bodies := []string{
		"", "a", "ab", "abab", "xabyabzab", "ababab", "aab" + strings.Repeat("a", 40) + "b",
		strings.Repeat("a", 100) + "ab" + strings.Repeat("a", 50) + "ab",
		strings.Repeat("1234567890", 102) + "1234", strings.Repeat("5", 33) + "5678",
		strings.Repeat("x", 100) + "ab" + strings.Repeat("y", 37) + "a", "hello, world! hello, world? hello, world!",
		strings.Repeat("hello, world", 5) + "!",
	}
	for _, pat := range []string{"ab", "5678", "aab", "a", "hello, world!"} {
		for _, repl := range []string{"", "x", "XY", "XYZW", "longer than it", "[$0]"} {
			conf := fmt.Sprintf(`{"filters":[{"regex":%q,"replace":%q,"scope":"global"},{"regex":%q,"replace":%q}]}`, pat, repl, "z", "Z")
			p := build(t, conf)
			re := regexp.MustCompile(pat)
			for _, b := range bodies {
				want := re.ReplaceAllString(b, strings.ReplaceAll(repl, "$0", "${0}"))
				want = strings.Replace(want, "z", "Z", 1)
				for range 2 {
					c := plugintest.NewCtx("GET", "/hello")
					c.Upstream = true
					if got := body(p, c, b[:len(b)/2], b[len(b)/2:], ""); got != want {
						t.Fatalf("%s over %q: %q, want %q", conf, b, got, want)
					}
				}
			}
			once := build(t, fmt.Sprintf(`{"filters":[{"regex":%q,"replace":%q}]}`, pat, repl))
			for _, b := range bodies {
				want := b
				if loc := re.FindStringIndex(b); loc != nil {
					want = b[:loc[0]] + re.ReplaceAllString(b[loc[0]:loc[1]], strings.ReplaceAll(repl, "$0", "${0}")) + b[loc[1]:]
				}
				c := plugintest.NewCtx("GET", "/hello")
				c.Upstream = true
				if got := body(once, c, b, ""); got != want {
					t.Fatalf("once %q → %q over %q: %q, want %q", pat, repl, b, got, want)
				}
			}
		}
	}
}

// TestPhasesByConf: a configuration that leaves the body alone (status,
// headers, vars) runs in header_filter only, so that the worker forwards
// the body as it came; one with a body or filters runs in body_filter and
// log as well, and removes Content-Length with the other headers a
// changed body makes wrong.
func TestPhasesByConf(t *testing.T) {
	for conf, bodyPhases := range map[string]bool{
		`{"status_code":403}`: false,
		`{"headers":{"add":["X-A: 1"],"set":{"X-B":"2"},"remove":["Server"]}}`: false,
		`{"vars":[["status","==",500]],"status_code":503}`:                     false,
		`{"body":"x"}`: true,
		`{"filters":[{"regex":"a","replace":"b"}]}`: true,
	} {
		p := build(t, conf)
		if len(p.HeaderFilter) != 1 || (len(p.BodyFilter) == 1) != bodyPhases || (len(p.Log) == 1) != bodyPhases {
			t.Errorf("%s: %d header_filter, %d body_filter, %d log", conf, len(p.HeaderFilter), len(p.BodyFilter), len(p.Log))
		}
		c := plugintest.NewCtx("GET", "/hello").WithResponseHeader("Content-Length", "5").WithResponseHeader("ETag", `"v"`)
		c.Upstream = true
		body(p, c, "hello", "")
		if got := c.ResponseHeader("Content-Length") == nil; got != bodyPhases {
			t.Errorf("%s: Content-Length removed %v, want %v", conf, got, bodyPhases)
		}
	}
}

// TestTransferCoded: a body with a transfer coding besides chunked is
// left as it came, by filters and by a new body alike, its headers
// (Content-Length aside, there is none) kept; "chunked" alone, in any
// case, is no coding of the body.
func TestTransferCoded(t *testing.T) {
	for _, conf := range []string{`{"filters":[{"regex":"o","replace":"0","scope":"global"}]}`, `{"body":"new"}`} {
		p := build(t, conf)
		for te, want := range map[string]string{"gzip, chunked": "hello world", "deflate": "hello world", "Chunked": "hell0 w0rld"} {
			if te == "Chunked" && conf == `{"body":"new"}` {
				want = "new"
			}
			c := plugintest.NewCtx("GET", "/hello").WithResponseHeader("Transfer-Encoding", te).WithResponseHeader("ETag", `"v"`)
			c.Upstream = true
			if got := body(p, c, "hello ", "world", ""); got != want {
				t.Errorf("%s, %s: %q, want %q", conf, te, got, want)
			}
			if kept := c.ResponseHeader("ETag") != nil; kept != (want == "hello world") {
				t.Errorf("%s, %s: ETag kept %v", conf, te, kept)
			}
		}
	}
}

// TestFiltersLiteralWidths: a literal of each length from one byte to
// nine (one past a word), replaced by one as long (written in place, with
// a store of its width for 1, 2, 4 and 8 bytes), shorter and longer, once
// and global, over bodies drawn from a small alphabet so that matches are
// dense, overlap and fall at the body's last bytes; each against regexp's
// ReplaceAll over the same body, which comes in two pieces.
func TestFiltersLiteralWidths(t *testing.T) {
	rng := rand.New(rand.NewPCG(40, 1))
	draw := func(n int, alphabet string) string {
		b := make([]byte, n)
		for i := range b {
			b[i] = alphabet[rng.IntN(len(alphabet))]
		}
		return string(b)
	}
	for n := 1; n <= 9; n++ {
		for range 4 {
			pat := draw(n, "ab")
			for _, repl := range []string{strings.Repeat("Z", n), strings.ToUpper(pat), "", "0123456789"} {
				re := regexp.MustCompile(regexp.QuoteMeta(pat))
				global := build(t, fmt.Sprintf(`{"filters":[{"regex":%q,"replace":%q,"scope":"global"}]}`, pat, repl))
				once := build(t, fmt.Sprintf(`{"filters":[{"regex":%q,"replace":%q}]}`, pat, repl))
				for range 20 {
					b := draw(rng.IntN(70), "abc")
					cut := rng.IntN(len(b) + 1)
					c := plugintest.NewCtx("GET", "/hello")
					c.Upstream = true
					if got, want := body(global, c, b[:cut], b[cut:], ""), re.ReplaceAllLiteralString(b, repl); got != want {
						t.Fatalf("global %q → %q over %q: %q, want %q", pat, repl, b, got, want)
					}
					want := b
					if loc := re.FindStringIndex(b); loc != nil {
						want = b[:loc[0]] + repl + b[loc[1]:]
					}
					c = plugintest.NewCtx("GET", "/hello")
					c.Upstream = true
					if got := body(once, c, b[:cut], b[cut:], ""); got != want {
						t.Fatalf("once %q → %q over %q: %q, want %q", pat, repl, b, got, want)
					}
				}
			}
		}
	}
}

// TestFiltersStreamed: a literal replaced by text as long is rewritten
// piece by piece: each piece comes back at once but for its last bytes
// where they begin the literal, held for the next; a match split between
// pieces, at every place of the body and over three pieces, is replaced
// as in the whole body. Past max_resp_body_size the body is cut, as a held
// one is: a match the cut divides is not replaced, the rest is dropped.
func TestFiltersStreamed(t *testing.T) {
	const b = "x5678y56785678z55678"
	for _, scope := range []string{"global", "once"} {
		p := build(t, `{"filters":[{"regex":"5678","replace":"abcd","scope":"`+scope+`"}]}`)
		re := regexp.MustCompile("5678")
		want := re.ReplaceAllString(b, "abcd")
		if scope == "once" {
			want = strings.Replace(b, "5678", "abcd", 1)
		}
		for i := 0; i <= len(b); i++ {
			for j := i; j <= len(b); j++ {
				c := plugintest.NewCtx("GET", "/hello")
				if got := body(p, c, b[:i], b[i:j], b[j:], ""); got != want {
					t.Fatalf("%s over %q | %q | %q: %q, want %q", scope, b[:i], b[i:j], b[j:], got, want)
				}
			}
		}
	}
	p := build(t, `{"filters":[{"regex":"5678","replace":"abcd","scope":"global"}]}`)
	f := p.BodyFilter[0]
	c := plugintest.NewCtx("GET", "/hello")
	p.HeaderFilter[0].HeaderFilter(c)
	for _, step := range []struct{ in, out string }{
		{"x5678y5", "xabcdy"}, // "5" may begin a match: held
		{"6", ""},
		{"78z56", "abcdz"},
		{"", ""},
		{"7", ""},
	} {
		// The piece itself is left as it came: it may be a body
		// another plugin keeps.
		piece := []byte(step.in)
		if got := string(f.BodyFilter(c, piece, false)); got != step.out || string(piece) != step.in {
			t.Fatalf("piece %q: %q, want %q; the piece became %q", step.in, got, step.out, piece)
		}
	}
	if got := string(f.BodyFilter(c, nil, true)); got != "567" {
		t.Fatalf("last piece: %q, want the held 567", got)
	}
	p.Log[0].Log(c)

	cut := build(t, `{"max_resp_body_size":8,"filters":[{"regex":"5678","replace":"abcd","scope":"global"}]}`)
	for _, pieces := range [][]string{{"5678x5678", ""}, {"56", "78x56", "78", ""}, {"5678x567", "8 and more", "", ""}} {
		c := plugintest.NewCtx("GET", "/hello")
		if got := body(cut, c, pieces...); got != "abcdx567" {
			t.Fatalf("max_resp_body_size 8 over %q: %q, want abcdx567", pieces, got)
		}
	}
}

// TestFiltersSwept: a literal of four to eight bytes with no border,
// replaced globally by text as long, is rewritten a word at a time
// (sweep), through stretches of matches and the search by index between
// them: against strings.Replace (and regexp's ReplaceAll, the same for a
// literal) over bodies up to 3 KiB of a small alphabet, so that matches
// are dense, fall across words, pieces and the body's last bytes, with
// stretches without the literal long enough that the sweep stops and
// index finds the next; replacements that make the literal again with
// the bytes after them (which sweep must not read as a match), and
// literals with a border or shorter, which index finds one by one, as a
// check of the same bodies. Each body comes in one to four pieces.
func TestFiltersSwept(t *testing.T) {
	rng := rand.New(rand.NewPCG(40, 2))
	draw := func(n int, alphabet string) string {
		b := make([]byte, n)
		for i := range b {
			b[i] = alphabet[rng.IntN(len(alphabet))]
		}
		return string(b)
	}
	lits := []string{"5678", "abcd", "abcc", "abcde", "aabbc", "abcdefgh", "abcabcab", "abab", "ab", "abc", "abcdefghi"}
	for range 12 {
		lits = append(lits, draw(4+rng.IntN(5), "abc"))
	}
	swept := 0
	for _, lit := range lits {
		re := regexp.MustCompile(regexp.QuoteMeta(lit))
		for _, repl := range []string{
			strings.Repeat("Z", len(lit)),
			lit[len(lit)/2:] + lit[:len(lit)/2], // the literal again with what follows
			draw(len(lit), "abc"),
		} {
			global := build(t, fmt.Sprintf(`{"filters":[{"regex":%q,"replace":%q,"scope":"global"}]}`, lit, repl))
			if in, ok := global.BodyFilter[0].(*instance); !ok {
				t.Fatalf("%s: no instance", lit)
			} else if in.filters[0].swept {
				swept++
			}
			for range 30 {
				var b strings.Builder
				for b.Len() < rng.IntN(3000) {
					switch rng.IntN(4) {
					case 0:
						b.WriteString(strings.Repeat("x", rng.IntN(80)))
					case 1:
						b.WriteString(strings.Repeat(lit, rng.IntN(6)))
					default:
						b.WriteString(draw(rng.IntN(60), "abc"+lit[:1]))
					}
				}
				text := b.String()
				want := strings.ReplaceAll(text, lit, repl)
				if r := re.ReplaceAllLiteralString(text, repl); r != want {
					t.Fatalf("regexp and strings differ over %q", text)
				}
				pieces := []string{text}
				for range rng.IntN(4) {
					last := pieces[len(pieces)-1]
					cut := rng.IntN(len(last) + 1)
					pieces = append(pieces[:len(pieces)-1], last[:cut], last[cut:])
				}
				c := plugintest.NewCtx("GET", "/hello")
				if got := body(global, c, append(pieces, "")...); got != want {
					t.Fatalf("global %q → %q over %q in %d pieces: %q, want %q", lit, repl, text, len(pieces), got, want)
				}
			}
		}
	}
	if swept < 10 {
		t.Fatalf("%d of the configurations swept", swept)
	}
}

// FuzzFilterLiteral: a literal filter, once and global, with a
// replacement as long as the literal (made of the literal's bytes and a
// few others, so that it may make the literal again) and one of another
// length, against strings.Replace, and regexp's ReplaceAll where body and
// literal are UTF-8; the body comes in two pieces.
func FuzzFilterLiteral(f *testing.F) {
	f.Add("5678", "abcd", []byte(strings.Repeat("1234567890", 102)+"1234"), 512)
	f.Add("abcd", "cdab", []byte("abcdcdabcdabcdcd"+strings.Repeat("x", 40)+"abcdab"), 7)
	f.Add("aab", "x", []byte("aaab"+strings.Repeat("a", 40)+"b"), 3)
	f.Add("hello, world!", "hi", []byte(strings.Repeat("hello, world", 5)+"!"), 20)
	f.Fuzz(func(t *testing.T, lit, repl string, body []byte, cut int) {
		if lit == "" || len(lit) > 40 || !utf8.ValidString(lit) || !utf8.ValidString(repl) || strings.ContainsAny(repl, "$\\") {
			t.Skip()
		}
		same := make([]byte, len(lit))
		alphabet := lit + "xZ"
		for i := range same {
			c := byte(i)
			if i < len(repl) {
				c = repl[i]
			}
			same[i] = alphabet[int(c)%len(alphabet)]
		}
		if !utf8.Valid(same) {
			same = bytes.Repeat([]byte("Z"), len(lit))
		}
		cut = min(max(cut, 0), len(body))
		re := regexp.MustCompile(regexp.QuoteMeta(lit))
		for _, r := range []string{string(same), repl} {
			for _, scope := range []string{"global", "once"} {
				conf, err := json.Marshal(map[string]any{"filters": []any{map[string]string{"regex": regexp.QuoteMeta(lit), "replace": r, "scope": scope}}})
				if err != nil {
					t.Fatal(err)
				}
				p := build(t, string(conf))
				n := -1
				if scope == "once" {
					n = 1
				}
				want := strings.Replace(string(body), lit, r, n)
				if utf8.Valid(body) && scope == "global" && re.ReplaceAllLiteralString(string(body), r) != want {
					t.Fatalf("regexp and strings differ over %q", body)
				}
				c := plugintest.NewCtx("GET", "/hello")
				if got := body2(p, c, body[:cut], body[cut:]); got != want {
					t.Fatalf("%s %q → %q over %q | %q: %q, want %q", scope, lit, r, body[:cut], body[cut:], got, want)
				}
			}
		}
	})
}

// body2 is body for pieces of bytes, which may be any.
func body2(p *plugins.Phases, c *plugintest.Ctx, pieces ...[]byte) string {
	s := make([]string, 0, len(pieces)+1)
	for _, b := range pieces {
		s = append(s, string(b))
	}
	return body(p, c, append(s, "")...)
}
