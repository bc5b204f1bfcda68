package echo

import (
	_ "embed"
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"strconv"

	"coregate/plugins"
)

// Name is the plugin's wire name.
const Name = "echo"

//go:embed schema.json
var schema []byte

func init() { plugins.Register(Name, Plugin{}) }

// Plugin is echo's implementation; its zero value is ready.
type Plugin struct{}

var (
	_ plugins.Plugin            = Plugin{}
	_ plugins.HeaderFilterPhase = (*instance)(nil)
	_ plugins.BodyFilterPhase   = (*instance)(nil)
)

// Schema implements plugins.Plugin.
func (Plugin) Schema() []byte { return schema }

// conf is a configuration as the schema lets it through.
type conf struct {
	BeforeBody *string                    `json:"before_body"`
	Body       *string                    `json:"body"`
	AfterBody  *string                    `json:"after_body"`
	Headers    map[string]json.RawMessage `json:"headers"`
}

// Check implements plugins.Plugin: a header's name must not be empty and
// its value must be a string or a number, with the messages of echo.lua's
// header_filter (which meets them per request, and then sets no header).
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
	in := &instance{}
	if c.BeforeBody != nil {
		in.before, in.hasBefore = []byte(*c.BeforeBody), true
	}
	if c.Body != nil {
		in.body, in.hasBody = []byte(*c.Body), true
	}
	if c.AfterBody != nil {
		in.after, in.hasAfter = []byte(*c.AfterBody), true
	}
	for _, name := range slices.Sorted(maps.Keys(c.Headers)) {
		if name == "" {
			return nil, errors.New("invalid field length in header")
		}
		v, err := headerValue(c.Headers[name])
		if err != nil {
			return nil, err
		}
		in.headers = append(in.headers, header{name, v})
	}
	return in, nil
}

// headerValue is a header's value: a string as it is, a number as Lua's
// tostring writes it.
func headerValue(raw json.RawMessage) ([]byte, error) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return []byte(s), nil
	}
	var f float64
	if json.Unmarshal(raw, &f) == nil {
		return strconv.AppendFloat(nil, f, 'g', 14, 64), nil
	}
	return nil, errors.New("invalid type as header value")
}

type header struct {
	name  string
	value []byte
}

// instance is one configuration, built: read-only but for buf, the
// scratch in which body_filter joins before_body or after_body to a
// piece of the body. buf is shared by the requests of its one event
// loop: what BodyFilter returns is valid until its next call for any
// request, and the worker copies it before making another (its
// appendFiltered and filterLocal).
type instance struct {
	before, body, after          []byte
	hasBefore, hasBody, hasAfter bool
	headers                      []header

	buf []byte
}

// The request's state in body_filter, kept with Ctx.Keep.
const (
	beforeSent = 1 << iota // before_body went out (APISIX's plugin_echo_body_set)
	bodyDone               // body replaced the body: it has ended
)

// HeaderFilter implements plugins.HeaderFilterPhase, as echo.lua's
// header_filter: the headers set. A body changed is framed anew by the
// worker (its Content-Length goes), as clear_header_as_body_modified.
func (in *instance) HeaderFilter(c plugins.Ctx) {
	for i := range in.headers {
		c.SetResponseHeader(in.headers[i].name, in.headers[i].value)
	}
}

// BodyFilter implements plugins.BodyFilterPhase, as echo.lua's
// body_filter: body replaces the whole body (its first piece, the rest
// dropped), before_body goes before the first piece, after_body after the
// last.
func (in *instance) BodyFilter(c plugins.Ctx, chunk []byte, eof bool) []byte {
	if !in.hasBody && !in.hasBefore && !in.hasAfter {
		return chunk
	}
	state, _ := c.Kept(in)
	if state&bodyDone != 0 {
		return nil // the body ended with body
	}
	if in.hasBody {
		chunk, eof = in.body, true
		state |= bodyDone
	}
	out, inBuf := chunk, false
	if in.hasBefore && state&beforeSent == 0 {
		out, inBuf = append(append(in.buf[:0], in.before...), chunk...), true
		state |= beforeSent
	}
	if eof && in.hasAfter {
		if !inBuf {
			out, inBuf = append(in.buf[:0], out...), true
		}
		out = append(out, in.after...)
	}
	if inBuf {
		in.buf = out
	}
	c.Keep(in, state)
	return out
}
