package report

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"text/template"
)

// Series is one named line or bar colour of a chart.
type Series struct {
	Name   string
	Values []float64 // one per category (bars) or per X (lines); NaN for none
}

// Chart is a bar chart (X nil: one group of bars per category) or a line
// chart (X set: one point per X value).
type Chart struct {
	Title      string
	YLabel     string
	XLabel     string
	Categories []string  // bar charts
	X          []float64 // line charts
	Series     []Series
}

var palette = []string{"#d62728", "#1f77b4", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b"}

const (
	svgW, svgH               = 960, 480
	padL, padR, padT, padB   = 80, 30, 70, 90
	plotW, plotH             = svgW - padL - padR, svgH - padT - padB
	barFill, barLabelMinPxls = 0.8, 14
)

type svgText struct {
	X, Y   float64
	Anchor string
	Size   int
	Text   string
	Rotate bool
}

type svgRect struct {
	X, Y, W, H float64
	Fill       string
	Tip        string
}

type svgLine struct {
	X1, Y1, X2, Y2 float64
	Stroke         string
	Width          float64
	Dash           bool
}

type svgPath struct {
	Points string
	Stroke string
}

type svgDot struct {
	X, Y float64
	Fill string
	Tip  string
}

type svgDoc struct {
	W, H  int
	Rects []svgRect
	Lines []svgLine
	Paths []svgPath
	Dots  []svgDot
	Texts []svgText
}

var svgTmpl = template.Must(template.New("svg").Parse(`<svg xmlns="http://www.w3.org/2000/svg" width="{{.W}}" height="{{.H}}" viewBox="0 0 {{.W}} {{.H}}" font-family="Helvetica, Arial, sans-serif">
<rect x="0" y="0" width="{{.W}}" height="{{.H}}" fill="#ffffff"/>
{{range .Lines}}<line x1="{{printf "%.1f" .X1}}" y1="{{printf "%.1f" .Y1}}" x2="{{printf "%.1f" .X2}}" y2="{{printf "%.1f" .Y2}}" stroke="{{.Stroke}}" stroke-width="{{.Width}}"{{if .Dash}} stroke-dasharray="4 3"{{end}}/>
{{end}}{{range .Rects}}<rect x="{{printf "%.1f" .X}}" y="{{printf "%.1f" .Y}}" width="{{printf "%.1f" .W}}" height="{{printf "%.1f" .H}}" fill="{{.Fill}}"><title>{{.Tip}}</title></rect>
{{end}}{{range .Paths}}<polyline points="{{.Points}}" fill="none" stroke="{{.Stroke}}" stroke-width="2.5"/>
{{end}}{{range .Dots}}<circle cx="{{printf "%.1f" .X}}" cy="{{printf "%.1f" .Y}}" r="4" fill="{{.Fill}}"><title>{{.Tip}}</title></circle>
{{end}}{{range .Texts}}<text x="{{printf "%.1f" .X}}" y="{{printf "%.1f" .Y}}" text-anchor="{{.Anchor}}" font-size="{{.Size}}"{{if .Rotate}} transform="rotate(-90 {{printf "%.1f" .X}} {{printf "%.1f" .Y}})"{{end}}>{{.Text}}</text>
{{end}}</svg>
`))

// niceMax rounds v up to 1, 2 or 5 times a power of ten.
func niceMax(v float64) float64 {
	if v <= 0 || math.IsNaN(v) {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if m*p >= v {
			return m * p
		}
	}
	return 10 * p
}

func fmtNum(v float64) string {
	switch {
	case v >= 10000:
		return fmt.Sprintf("%.1fk", v/1000)
	case v >= 100:
		return fmt.Sprintf("%.0f", v)
	case v >= 10:
		return fmt.Sprintf("%.1f", v)
	default:
		return fmt.Sprintf("%.2f", v)
	}
}

// WriteSVG renders the chart.
func (c Chart) WriteSVG(w io.Writer) error {
	if len(c.Series) == 0 || (len(c.Categories) == 0 && len(c.X) == 0) {
		return ErrEmpty
	}
	d := svgDoc{W: svgW, H: svgH}
	top := 0.0
	for _, s := range c.Series {
		for _, v := range s.Values {
			if !math.IsNaN(v) && v > top {
				top = v
			}
		}
	}
	top = niceMax(top * 1.08)
	y := func(v float64) float64 { return padT + plotH - v/top*plotH }
	// Title, axes, grid.
	d.Texts = append(d.Texts,
		svgText{X: svgW / 2, Y: 28, Anchor: "middle", Size: 18, Text: c.Title},
		svgText{X: 22, Y: padT + plotH/2, Anchor: "middle", Size: 13, Text: c.YLabel, Rotate: true})
	for i := 0; i <= 5; i++ {
		v := top * float64(i) / 5
		d.Lines = append(d.Lines, svgLine{X1: padL, Y1: y(v), X2: padL + plotW, Y2: y(v), Stroke: "#dddddd", Width: 1})
		d.Texts = append(d.Texts, svgText{X: padL - 8, Y: y(v) + 4, Anchor: "end", Size: 12, Text: fmtNum(v)})
	}
	d.Lines = append(d.Lines,
		svgLine{X1: padL, Y1: padT, X2: padL, Y2: padT + plotH, Stroke: "#333333", Width: 1},
		svgLine{X1: padL, Y1: padT + plotH, X2: padL + plotW, Y2: padT + plotH, Stroke: "#333333", Width: 1})
	// Legend.
	for i, s := range c.Series {
		lx := float64(padL + 10 + i*170)
		d.Rects = append(d.Rects, svgRect{X: lx, Y: 42, W: 14, H: 14, Fill: palette[i%len(palette)], Tip: s.Name})
		d.Texts = append(d.Texts, svgText{X: lx + 20, Y: 54, Anchor: "start", Size: 13, Text: s.Name})
	}
	if c.X == nil {
		c.bars(&d, y)
	} else {
		c.lines(&d, y)
	}
	for i := range d.Texts {
		d.Texts[i].Text = escape(d.Texts[i].Text)
	}
	for i := range d.Rects {
		d.Rects[i].Tip = escape(d.Rects[i].Tip)
	}
	for i := range d.Dots {
		d.Dots[i].Tip = escape(d.Dots[i].Tip)
	}
	return svgTmpl.Execute(w, d)
}

func (c Chart) bars(d *svgDoc, y func(float64) float64) {
	groupW := float64(plotW) / float64(len(c.Categories))
	barW := groupW * barFill / float64(len(c.Series))
	for gi, cat := range c.Categories {
		gx := padL + groupW*float64(gi) + groupW*(1-barFill)/2
		for si, s := range c.Series {
			if gi >= len(s.Values) || math.IsNaN(s.Values[gi]) {
				continue
			}
			v := s.Values[gi]
			x := gx + barW*float64(si)
			d.Rects = append(d.Rects, svgRect{X: x, Y: y(v), W: barW - 2, H: y(0) - y(v), Fill: palette[si%len(palette)],
				Tip: fmt.Sprintf("%s, %s: %s", cat, s.Name, fmtNum(v))})
			if barW >= barLabelMinPxls {
				d.Texts = append(d.Texts, svgText{X: x + barW/2 - 1, Y: y(v) - 4, Anchor: "middle", Size: 11, Text: fmtNum(v)})
			}
		}
		for li, line := range wrap(cat, int(groupW/7)) {
			d.Texts = append(d.Texts, svgText{X: padL + groupW*(float64(gi)+0.5), Y: padT + plotH + 18 + float64(li)*15,
				Anchor: "middle", Size: 12, Text: line})
		}
	}
	if c.XLabel != "" {
		d.Texts = append(d.Texts, svgText{X: padL + plotW/2, Y: svgH - 12, Anchor: "middle", Size: 13, Text: c.XLabel})
	}
}

func (c Chart) lines(d *svgDoc, y func(float64) float64) {
	lo, hi := c.X[0], c.X[0]
	for _, v := range c.X {
		lo, hi = min(lo, v), max(hi, v)
	}
	if hi == lo {
		lo, hi = lo-1, hi+1
	}
	x := func(v float64) float64 { return padL + 30 + (v-lo)/(hi-lo)*(plotW-60) }
	for _, v := range c.X {
		d.Texts = append(d.Texts, svgText{X: x(v), Y: padT + plotH + 18, Anchor: "middle", Size: 12, Text: fmtNum(v)})
	}
	d.Texts = append(d.Texts, svgText{X: padL + plotW/2, Y: padT + plotH + 42, Anchor: "middle", Size: 13, Text: c.XLabel})
	for si, s := range c.Series {
		col := palette[si%len(palette)]
		var pts []string
		for i, v := range s.Values {
			if i >= len(c.X) || math.IsNaN(v) {
				continue
			}
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(c.X[i]), y(v)))
			d.Dots = append(d.Dots, svgDot{X: x(c.X[i]), Y: y(v), Fill: col, Tip: fmt.Sprintf("%s at %s: %s", s.Name, fmtNum(c.X[i]), fmtNum(v))})
			d.Texts = append(d.Texts, svgText{X: x(c.X[i]), Y: y(v) - 9, Anchor: "middle", Size: 11, Text: fmtNum(v)})
		}
		d.Paths = append(d.Paths, svgPath{Points: strings.Join(pts, " "), Stroke: col})
	}
}

// wrap splits s into lines of at most width runes at spaces.
func wrap(s string, width int) []string {
	width = max(width, 8)
	var out []string
	line := ""
	for _, w := range strings.Fields(s) {
		if line != "" && len([]rune(line))+1+len([]rune(w)) > width {
			out = append(out, line)
			line = w
			continue
		}
		if line != "" {
			line += " "
		}
		line += w
	}
	return append(out, line)
}

func escape(s string) string {
	r := strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;")
	return r.Replace(s)
}

// Charts builds the run's charts by file name: qps.svg and cpu.svg (per
// scenario), scaling.svg (QPS against workers) and latency.svg (fixed-rate
// percentiles). Charts without data are left out.
func (r *Run) Charts() map[string]Chart {
	out := map[string]Chart{}
	targets := func(rows []Row, skipDirect bool) []string {
		var t []string
		for _, row := range rows {
			if skipDirect && row.Target == Direct {
				continue
			}
			if !slices.Contains(t, row.Target) {
				t = append(t, row.Target)
			}
		}
		return t
	}
	if rows := r.rowsIn("main"); len(rows) > 0 {
		var cats, keys []string
		for _, row := range rows {
			k := row.Scenario
			if !slices.Contains(keys, k) {
				keys = append(keys, k)
				cats = append(cats, fmt.Sprintf("%s %d/%d", row.Title, row.Routes, row.Consumers))
			}
		}
		mk := func(skipDirect bool, get func(Sample) float64) []Series {
			var ss []Series
			for _, t := range targets(rows, skipDirect) {
				s := Series{Name: t, Values: nanSlice(len(keys))}
				for _, row := range rows {
					if row.Target == t {
						s.Values[slices.Index(keys, row.Scenario)] = get(row.Median)
					}
				}
				ss = append(ss, s)
			}
			return ss
		}
		out["qps.svg"] = Chart{Title: "Requests per second by scenario (1 worker, closed loop)", YLabel: "req/s",
			XLabel: "scenario routes/consumers", Categories: cats, Series: mk(false, func(s Sample) float64 { return s.QPS })}
		out["cpu.svg"] = Chart{Title: "Gateway CPU per request by scenario (lower is better)", YLabel: "CPU µs / request",
			XLabel: "scenario routes/consumers", Categories: cats, Series: mk(true, func(s Sample) float64 { return s.CPUus })}
	}
	if rows := r.rowsIn("scaling"); len(rows) > 0 {
		var xs []float64
		for _, row := range rows {
			if !slices.Contains(xs, float64(row.Workers)) {
				xs = append(xs, float64(row.Workers))
			}
		}
		var ss []Series
		for _, t := range targets(rows, true) {
			s := Series{Name: t, Values: nanSlice(len(xs))}
			for _, row := range rows {
				if row.Target == t {
					for i, x := range xs {
						if x == float64(row.Workers) {
							s.Values[i] = row.Median.QPS
						}
					}
				}
			}
			ss = append(ss, s)
		}
		out["scaling.svg"] = Chart{Title: "Worker scaling: requests per second", YLabel: "req/s", XLabel: "workers", X: xs, Series: ss}
	}
	if rows := r.rowsIn("latency"); len(rows) > 0 {
		var ss []Series
		for _, row := range rows {
			md := row.Median
			ss = append(ss, Series{Name: row.Target, Values: []float64{md.P50, md.P95, md.P99, md.P999}})
		}
		out["latency.svg"] = Chart{Title: fmt.Sprintf("Latency at %.0f req/s fixed rate", r.Settings.Rate), YLabel: "ms",
			XLabel: "percentile", Categories: []string{"p50", "p95", "p99", "p99.9"}, Series: ss}
	}
	return out
}

func nanSlice(n int) []float64 {
	s := make([]float64, n)
	for i := range s {
		s[i] = math.NaN()
	}
	return s
}
