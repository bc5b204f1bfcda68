package report

import (
	"bytes"
	"encoding/xml"
	"errors"
	"io"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestMedian(t *testing.T) {
	tests := []struct {
		name string
		in   []Sample
		want Sample
	}{
		{name: "empty", in: nil, want: Sample{}},
		{
			name: "odd",
			in:   []Sample{{QPS: 3, P99: 9, Requests: 30}, {QPS: 1, P99: 1, Requests: 10, Noisy: true, Redone: 1}, {QPS: 2, P99: 5, Requests: 20}},
			want: Sample{QPS: 2, P99: 5, Requests: 20, Noisy: true, Redone: 1},
		},
		{
			name: "even",
			in:   []Sample{{QPS: 1, CPUus: 10}, {QPS: 4, CPUus: 30}, {QPS: 2, CPUus: 20}, {QPS: 3, CPUus: 40}},
			want: Sample{QPS: 2.5, CPUus: 25},
		},
	}
	for _, tc := range tests {
		if d := cmp.Diff(tc.want, Median(tc.in)); d != "" {
			t.Errorf("%s (-want +got):\n%s", tc.name, d)
		}
	}
}

func sampleRun() *Run {
	row := func(scen, title, group, target string, routes, workers int, qps, p99, cpu float64) Row {
		s := Sample{QPS: qps, P50: p99 / 3, P95: p99 / 2, P99: p99, P999: p99 * 2, CPUus: cpu, RSSMiB: 12, PSSMiB: 9.5, LoadCPUus: 5, Procs: workers}
		return Row{Scenario: scen, Title: title, Group: group, Routes: routes, Workers: workers, Upstream: true,
			Target: target, Mode: "closed c16", Rounds: []Sample{s}, Median: s}
	}
	r := &Run{
		Started:   time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC),
		Machine:   Machine{Host: "h", CPU: "cpu", Cores: 2, MemGiB: 24, Kernel: "6.18", Go: "go1.26", Nginx: "nginx/1.22.1"},
		Placement: Placement{Gateway: "0", Load: "1", Upstream: "1", Scaling: "0-1"},
		Settings:  Settings{Rounds: 3, DurationS: 5, WarmupS: 1, Conns: 16, BodyBytes: 1024, Rate: 10000},
		Rows: []Row{
			row("no-plugin", "no plugins", "main", Coregate, 1, 1, 40000, 1.0, 20),
			row("no-plugin", "no plugins", "main", Nginx, 1, 1, 35000, 1.3, 26),
			row("no-plugin", "no plugins", "main", Direct, 1, 1, 48000, 0.3, 0),
			row("routes-5000", "5000 routes", "main", Coregate, 5000, 1, 39000, 1.1, 21),
			row("routes-5000", "5000 routes", "main", Nginx, 5000, 1, 34000, 1.4, 27),
			row("scaling", "worker scaling", "scaling", Coregate, 1, 1, 40000, 1, 20),
			row("scaling", "worker scaling", "scaling", Nginx, 1, 1, 35000, 1, 26),
			row("scaling", "worker scaling", "scaling", Coregate, 1, 2, 70000, 1, 20),
			row("scaling", "worker scaling", "scaling", Nginx, 1, 2, 60000, 1, 26),
			row("latency", "no plugins at 10000 req/s", "latency", Coregate, 1, 1, 10000, 0.5, 18),
			row("latency", "no plugins at 10000 req/s", "latency", Nginx, 1, 1, 10000, 1.0, 24),
		},
		Pending:  []Pending{{Scenario: "key-auth", Title: "key-auth", Routes: 1, Cons: 1, Upstream: true, Why: "later"}},
		WrkCheck: &WrkCheck{Target: "nginx no-plugin", Ours: []float64{35000}, Wrk: []float64{34000}, DiffPct: 2.94},
	}
	r.SetRatios()
	return r
}

func TestSetRatios(t *testing.T) {
	r := sampleRun()
	type ratios struct{ QPS, CPU, P99 float64 }
	var got []ratios
	for _, row := range r.Rows {
		got = append(got, ratios{row.QPSRatio, row.CPURatio, row.P99Ratio})
	}
	want := []ratios{
		{40000.0 / 35000, 20.0 / 26, 1.0 / 1.3}, {}, {48000.0 / 35000, 0, 0.3 / 1.3},
		{39000.0 / 34000, 21.0 / 27, 1.1 / 1.4}, {},
		{40000.0 / 35000, 20.0 / 26, 1}, {}, {70000.0 / 60000, 20.0 / 26, 1}, {},
		{1, 18.0 / 24, 0.5}, {},
	}
	approx := cmp.Comparer(func(a, b float64) bool { return math.Abs(a-b) < 1e-9 })
	if d := cmp.Diff(want, got, approx); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
}

func TestMarkdown(t *testing.T) {
	md := sampleRun().Markdown()
	for _, want := range []string{
		"| scenario | routes / consumers | upstream | gateway | QPS | P99 ms | P95 ms | CPU µs/req | RSS / PSS MiB | QPS ÷ nginx | CPU/req ÷ nginx |",
		"| no plugins | 1 / 0 | yes | coregate | 40.0k | 1.00 | 0.50 | 20.0 | 12.0 / 9.5 | 1.14× | 0.77× |",
		"| 5000 routes | 5000 / 0 | yes | nginx | 34.0k | 1.40 | 0.70 | 27.0 | 12.0 / 9.5 | – | – |",
		"| no plugins | 1 / 0 | yes | upstream direct | 48.0k | 0.30 | 0.15 | – | – | 1.37× | – |",
		"| 2 | coregate | 70.0k |",
		"| coregate | 10.0k | 0.167 | 0.250 | 0.500 | 1.000 | 18.0 | 0.50× | 0.75× |",
		"Placement: gateway on cpu 0, load generator on cpu 1, upstream on cpu 1",
		"Pending scenarios (their plugins do not exist yet): key-auth (1 / 1).",
		"difference +2.9 %",
		"Load generator cost: 5.0 µs",
		"coregate, 5000 routes ÷ 1 route: QPS 0.97×, CPU/req 1.05×.",
		"coregate against 1 worker, 2 workers: CPU/req 1.00×, QPS 1.75× (88 % of linear).",
		"nginx against 1 worker, 2 workers: CPU/req 1.00×, QPS 1.71× (86 % of linear).",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q\n%s", want, md)
		}
	}
}

func TestJSONRoundTrip(t *testing.T) {
	r := sampleRun()
	var buf bytes.Buffer
	if err := r.WriteJSON(&buf); err != nil {
		t.Fatal(err)
	}
	back, err := ReadJSON(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(r, back); d != "" {
		t.Errorf("(-wrote +read):\n%s", d)
	}
	if _, err := ReadJSON(strings.NewReader("{")); err == nil {
		t.Error("truncated JSON accepted")
	}
}

func TestCharts(t *testing.T) {
	charts := sampleRun().Charts()
	var names []string
	for n := range charts {
		names = append(names, n)
	}
	if d := cmp.Diff([]string{"cpu.svg", "latency.svg", "qps.svg", "scaling.svg"}, slices.Sorted(slices.Values(names))); d != "" {
		t.Fatalf("charts (-want +got):\n%s", d)
	}
	wantTexts := map[string][]string{
		"qps.svg":     {"40.0k", "35.0k", "48.0k", "5000 routes 5000/0"},
		"cpu.svg":     {"20.0", "26.0"},
		"scaling.svg": {"70.0k", "60.0k", "workers"},
		"latency.svg": {"p99.9", "0.50", "2.00"},
	}
	for name, c := range charts {
		var buf bytes.Buffer
		if err := c.WriteSVG(&buf); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		texts, err := svgTexts(buf.Bytes())
		if err != nil {
			t.Fatalf("%s is not well-formed XML: %v", name, err)
		}
		for _, w := range wantTexts[name] {
			if !strings.Contains(strings.Join(texts, "|"), w) {
				t.Errorf("%s lacks text %q; has %v", name, w, texts)
			}
		}
	}
	if err := (Chart{Title: "x"}).WriteSVG(io.Discard); !errors.Is(err, ErrEmpty) {
		t.Errorf("empty chart error = %v, want ErrEmpty", err)
	}
}

// svgTexts parses an SVG document and returns the contents of its text
// elements.
func svgTexts(b []byte) ([]string, error) {
	d := xml.NewDecoder(bytes.NewReader(b))
	var out []string
	in := false
	for {
		tok, err := d.Token()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		switch v := tok.(type) {
		case xml.StartElement:
			in = v.Name.Local == "text"
		case xml.CharData:
			if in {
				out = append(out, string(v))
			}
		case xml.EndElement:
			in = false
		}
	}
}

func TestNiceMax(t *testing.T) {
	got := []float64{niceMax(0), niceMax(0.7), niceMax(37000), niceMax(41000), niceMax(99)}
	if d := cmp.Diff([]float64{1, 1, 50000, 50000, 100}, got); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
}

// TestPluginRatios: a plugin row is compared with nginx doing the same
// job (its own scenario) and with nginx proxying without plugins (its
// baseline), and the second table shows both.
func TestPluginRatios(t *testing.T) {
	r := sampleRun()
	mk := func(target string, qps, cpu float64) Row {
		s := Sample{QPS: qps, P99: 1, CPUus: cpu}
		return Row{Scenario: "key-auth", Title: "key-auth", Group: "main", Routes: 1, Consumers: 1, Workers: 1, Target: target,
			Rounds: []Sample{s}, Median: s, Equivalent: "map of API keys", Baseline: "no-plugin"}
	}
	r.Rows = append(r.Rows, mk(Coregate, 38000, 21), mk(Nginx, 33000, 28))
	r.SetRatios()
	got := r.Rows[len(r.Rows)-2]
	if math.Abs(got.BaseQPSRatio-38000.0/35000) > 1e-9 || math.Abs(got.BaseCPURatio-21.0/26) > 1e-9 ||
		math.Abs(got.QPSRatio-38000.0/33000) > 1e-9 {
		t.Errorf("ratios: base %.3f %.3f, same job %.3f", got.BaseQPSRatio, got.BaseCPURatio, got.QPSRatio)
	}
	if r.Rows[len(r.Rows)-1].BaseQPSRatio != 0 || r.Rows[0].BaseQPSRatio != 0 {
		t.Error("base ratios set on nginx or no-plugin rows")
	}
	md := r.Markdown()
	if !strings.Contains(md, "| key-auth | 1 / 1 | map of API keys | 1.09× | 0.81× | 1.15× | 0.75× |") {
		t.Errorf("plugin table missing or wrong:\n%s", md)
	}
}

// TestMarkdownTLS: the TLS rows get their own table with the handshakes
// and the ratios to nginx, a scenario run without coregate is listed with
// its reason apart from the pending ones, and the handshake counts are
// medians like the rest.
func TestMarkdownTLS(t *testing.T) {
	tls := func(target string, qps, p99, cpu float64, hs, resumed uint64) Row {
		s := Sample{QPS: qps, P50: p99 / 4, P99: p99, CPUus: cpu, Requests: uint64(qps), Handshakes: hs, Resumed: resumed}
		return Row{Scenario: "tls-handshake-resumed", Title: "TLS 1.3 resumed", Group: "tls", Routes: 1, Upstream: true, Workers: 1,
			Target: target, Mode: "closed c16", Rounds: []Sample{s}, Median: s}
	}
	r := &Run{
		Rows: []Row{tls(Coregate, 5000, 4, 180, 15000, 14984), tls(Nginx, 4000, 5, 200, 12000, 11984)},
		Pending: []Pending{
			{Scenario: "key-auth", Title: "key-auth", Routes: 1, Cons: 1, Why: PendingPlugins},
			{Scenario: "tls-mtls", Title: "TLS 1.3 mTLS", Routes: 1, Why: "harness: coregate does not serve TLS: refused", LeftOut: true},
		},
	}
	r.SetRatios()
	md := r.Markdown()
	for _, want := range []string{
		"| TLS 1.3 resumed | coregate | closed c16 | 5.0k | 1.000 | 4.000 | 180.0 | 15000 (14984) | 1.25× | 0.80× | 0.90× |",
		"| TLS 1.3 resumed | nginx | closed c16 | 4.0k | 1.250 | 5.000 | 200.0 | 12000 (11984) | – | – | – |",
		"Pending scenarios (their plugins do not exist yet): key-auth (1 / 1).",
		"Not measured on coregate: TLS 1.3 mTLS (tls-mtls): harness: coregate does not serve TLS: refused.",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q\n%s", want, md)
		}
	}
	if strings.Contains(md, "mTLS (1 / 0)") {
		t.Errorf("a scenario run without coregate is listed as pending:\n%s", md)
	}
	m := Median([]Sample{{Handshakes: 10, Resumed: 1, Background: 5}, {Handshakes: 30, Resumed: 3, Background: 7}, {Handshakes: 20, Resumed: 2, Background: 6}})
	if m.Handshakes != 20 || m.Resumed != 2 || m.Background != 6 {
		t.Errorf("median handshakes %d resumed %d background %d; want 20 2 6", m.Handshakes, m.Resumed, m.Background)
	}
}
