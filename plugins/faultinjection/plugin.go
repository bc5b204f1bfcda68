package faultinjection

import (
	_ "embed"
	"encoding/json"
	"errors"
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"

	"coregate/plugins"
	"coregate/plugins/internal/varexpr"
	"coregate/plugins/internal/vartpl"
)

// Name is the plugin's wire name.
const Name = "fault-injection"

//go:embed schema.json
var schema []byte

func init() { plugins.Register(Name, Plugin{}) }

// Plugin is fault-injection's implementation; its zero value is ready.
type Plugin struct{}

var (
	_ plugins.Plugin       = Plugin{}
	_ plugins.RewritePhase = (*instance)(nil)
)

// Schema implements plugins.Plugin.
func (Plugin) Schema() []byte { return schema }

// conf is a configuration as the schema lets it through.
type conf struct {
	Abort *struct {
		HTTPStatus int                        `json:"http_status"`
		Body       *string                    `json:"body"`
		Headers    map[string]json.RawMessage `json:"headers"`
		Percentage *int                       `json:"percentage"`
		Vars       json.RawMessage            `json:"vars"`
	} `json:"abort"`
	Delay *struct {
		Duration   float64         `json:"duration"`
		Percentage *int            `json:"percentage"`
		Vars       json.RawMessage `json:"vars"`
	} `json:"delay"`
}

// Check implements plugins.Plugin: the vars of abort and delay must be
// lua-resty-expr expressions, refused with its message ("rule should be
// wrapped inside brackets"); a header's name must not hold ':' (the
// schema lets such a name through with any value).
func (Plugin) Check(raw json.RawMessage) error {
	_, err := compile(raw)
	return err
}

// Build implements plugins.Plugin.
func (Plugin) Build(raw json.RawMessage, _ plugins.Env) (plugins.Instance, error) {
	return compile(raw)
}

func compile(raw json.RawMessage) (*instance, error) {
	var c conf
	if err := json.Unmarshal(raw, &c); err != nil {
		return nil, err
	}
	in := &instance{buf: make([]byte, 0, 64)}
	var err error
	if a := c.Abort; a != nil {
		in.abort, in.status, in.abortPct = true, a.HTTPStatus, pct(a.Percentage)
		if a.Body != nil {
			t := vartpl.Parse(*a.Body)
			in.body = &t
		}
		for _, name := range slices.Sorted(maps.Keys(a.Headers)) {
			h, err := header(name, a.Headers[name])
			if err != nil {
				return nil, err
			}
			in.headers = append(in.headers, h)
		}
		if a.Vars != nil {
			if in.abortVars, err = varexpr.CompileAny(a.Vars); err != nil {
				return nil, err
			}
			in.hasAbortVars = true
		}
	}
	if d := c.Delay; d != nil {
		in.delay, in.delayPct = true, pct(d.Percentage)
		in.duration = time.Duration(d.Duration * float64(time.Second))
		if d.Vars != nil {
			if in.delayVars, err = varexpr.CompileAny(d.Vars); err != nil {
				return nil, err
			}
			in.hasDelayVars = true
		}
	}
	return in, nil
}

// pct is a percentage, 100 when none is given (every request).
func pct(p *int) int {
	if p == nil {
		return 100
	}
	return *p
}

// header reads one of abort's headers: a string is a template of
// variables, a number its text as Lua's tostring writes it.
func header(name string, raw json.RawMessage) (hdr, error) {
	if strings.IndexByte(name, ':') >= 0 {
		return hdr{}, errors.New(`property "abort" validation failed: property "headers" validation failed: header name "` + name + `" contains ':'`)
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return hdr{name: name, tpl: vartpl.Parse(s)}, nil
	}
	var f float64
	if err := json.Unmarshal(raw, &f); err != nil {
		return hdr{}, errors.New(`property "abort" validation failed: property "headers" validation failed: header "` + name + `" is neither a string nor a number`)
	}
	return hdr{name: name, tpl: vartpl.Parse(strconv.FormatFloat(f, 'g', 14, 64))}, nil
}

// hdr is one of abort's response headers.
type hdr struct {
	name string
	tpl  vartpl.Template
}

// instance is one configuration, built: read-only but for buf, the
// answer's scratch, and ev, the vars' evaluator, which the requests of
// its one event loop take in turn (Exit and SetResponseHeader copy what they are given).
type instance struct {
	abort, delay bool

	status       int
	body         *vartpl.Template // nil: the gateway's page for status
	headers      []hdr
	abortPct     int
	abortVars    varexpr.Any
	hasAbortVars bool

	duration     time.Duration
	delayPct     int
	delayVars    varexpr.Any
	hasDelayVars bool

	ev varexpr.Evaluator

	buf []byte
}

// hit is APISIX's sample_hit: true for pct percent of the calls.
func hit(pct int) bool { return pct >= 100 || rand.IntN(100) < pct }

// Rewrite implements plugins.RewritePhase, as fault-injection.lua's
// rewrite: both vars are evaluated first; then a delay whose sample and
// vars hit holds the request back by duration, and an abort whose sample
// and vars hit sets its headers and ends the request with http_status and
// body, once the delay has passed.
func (in *instance) Rewrite(c plugins.Ctx) {
	abortOK := !in.hasAbortVars || in.ev.EvalAny(c, in.abortVars)
	delayOK := !in.hasDelayVars || in.ev.EvalAny(c, in.delayVars)
	if in.delay && hit(in.delayPct) && delayOK {
		c.Delay(in.duration)
	}
	if !in.abort || !hit(in.abortPct) || !abortOK {
		return
	}
	for i := range in.headers {
		h := &in.headers[i]
		in.buf, _ = h.tpl.Render(in.buf[:0], c)
		c.SetResponseHeader(h.name, in.buf)
	}
	if in.body == nil {
		c.Exit(in.status, nil)
		return
	}
	in.buf, _ = in.body.Render(in.buf[:0], c) // not nil: an empty body is one
	c.Exit(in.status, in.buf)
}
