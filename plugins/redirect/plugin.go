package redirect

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"coregate/httpvar"
	"coregate/plugins"
	"coregate/plugins/internal/resub"
)

// Name is the plugin's wire name.
const Name = "redirect"

//go:embed schema.json
var schema []byte

func init() { plugins.Register(Name, Plugin{}) }

// Plugin is redirect's implementation; its zero value is ready.
type Plugin struct{}

var (
	_ plugins.Plugin       = Plugin{}
	_ plugins.RewritePhase = (*instance)(nil)
)

// Schema implements plugins.Plugin.
func (Plugin) Schema() []byte { return schema }

// ErrHTTPSAndQuery is APISIX's refusal of http_to_https beside
// append_query_string, its text as APISIX writes it.
//
//lint:ignore ST1005 APISIX's message, which clients match on
var ErrHTTPSAndQuery = errors.New("only one of `http_to_https` and `append_query_string` can be configured.")

// conf is a configuration, with APISIX's defaults.
type conf struct {
	RetCode           int      `json:"ret_code"`
	URI               *string  `json:"uri"`
	RegexURI          []string `json:"regex_uri"`
	HTTPToHTTPS       bool     `json:"http_to_https"`
	EncodeURI         bool     `json:"encode_uri"`
	AppendQueryString bool     `json:"append_query_string"`
}

func decode(raw json.RawMessage) (conf, error) {
	c := conf{RetCode: 302}
	err := json.Unmarshal(raw, &c)
	return c, err
}

// Check implements plugins.Plugin, as redirect.lua's check_schema: the
// regex_uri pattern and template must compile, and http_to_https does
// not go with append_query_string. Beyond APISIX, the pattern must be one
// Go's RE2 compiles.
func (Plugin) Check(raw json.RawMessage) error {
	c, err := decode(raw)
	if err != nil {
		return err
	}
	if _, err := compileRule(c.RegexURI); err != nil {
		return err
	}
	if c.HTTPToHTTPS && c.AppendQueryString {
		return ErrHTTPSAndQuery
	}
	return nil
}

func compileRule(pair []string) (*resub.Rule, error) {
	if len(pair) != 2 {
		return nil, nil // the schema wants two, or none
	}
	r, err := resub.Compile(pair[0], pair[1])
	if err != nil {
		return nil, fmt.Errorf("invalid regex_uri (%s, %s), err:%v", pair[0], pair[1], err)
	}
	return r, nil
}

// attr is plugin_attr.redirect.
type attr struct {
	HTTPSPort *int `json:"https_port"`
}

// Build implements plugins.Plugin. The port of http_to_https's target is
// plugin_attr.redirect.https_port, else the node's first HTTPS listener's
// (Env.HTTPSPort); none, 443, or one out of range leaves it out.
func (Plugin) Build(raw json.RawMessage, env plugins.Env) (plugins.Instance, error) {
	c, err := decode(raw)
	if err != nil {
		return nil, err
	}
	in := &instance{retCode: c.RetCode, encode: c.EncodeURI, appendQuery: c.AppendQueryString}
	if c.URI != nil {
		in.uri = parseURI(*c.URI)
	}
	if in.rule, err = compileRule(c.RegexURI); err != nil {
		return nil, err
	}
	if c.HTTPToHTTPS {
		port := env.HTTPSPort
		if a := env.Attr.Of(Name); a != nil {
			var at attr
			if err := json.Unmarshal(a, &at); err != nil {
				return nil, fmt.Errorf("redirect: plugin_attr.redirect: %v", err)
			}
			if at.HTTPSPort != nil {
				port = *at.HTTPSPort
			}
		}
		target := "https://$host$request_uri"
		if port > 0 && port != 443 && port <= 65535 {
			target = "https://$host:" + strconv.Itoa(port) + "$request_uri"
		}
		in.https = parseURI(target)
	}
	in.buf, in.work = make([]byte, 0, 128), make([]byte, 0, 128)
	return in, nil
}

// seg is one piece of a uri template: a literal, or a variable when lit
// is nil.
type seg struct {
	lit []byte
	v   httpvar.Var
}

func isNameByte(c byte) bool {
	return c == '_' || '0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
}

// parseURI reads a uri template as redirect.lua's parse_uri does, its
// pattern's alternatives tried in turn at each position: \$name stays as
// written (the backslash too), ${name} and $name are variables (names of
// letters, digits and '_'), a '$' otherwise is itself, and a run of
// other bytes but '\' is itself; a '\' none of these takes is dropped, as
// ngx.re.gmatch skips what its pattern does not match.
func parseURI(s string) []seg {
	var segs []seg
	lit := func(b string) {
		if n := len(segs); n > 0 && segs[n-1].lit != nil {
			segs[n-1].lit = append(segs[n-1].lit, b...)
			return
		}
		segs = append(segs, seg{lit: []byte(b)})
	}
	name := func(i int) int { // the end of a name at i
		for i < len(s) && isNameByte(s[i]) {
			i++
		}
		return i
	}
	for i := 0; i < len(s); {
		switch {
		case s[i] == '\\' && i+1 < len(s) && s[i+1] == '$' && name(i+2) > i+2:
			e := name(i + 2)
			lit(s[i:e])
			i = e
		case s[i] == '\\':
			i++
		case s[i] == '$' && i+1 < len(s) && s[i+1] == '{' && name(i+2) > i+2 && name(i+2) < len(s) && s[name(i+2)] == '}':
			e := name(i + 2)
			segs = append(segs, seg{v: httpvar.Parse(s[i+2 : e])})
			i = e + 1
		case s[i] == '$' && name(i+1) > i+1:
			e := name(i + 1)
			segs = append(segs, seg{v: httpvar.Parse(s[i+1 : e])})
			i = e
		case s[i] == '$':
			lit("$")
			i++
		default:
			e := i
			for e < len(s) && s[e] != '$' && s[e] != '\\' {
				e++
			}
			lit(s[i:e])
			i = e
		}
	}
	return segs
}

// render appends the template with c's variables; an unset one is
// nothing.
func render(dst []byte, segs []seg, c plugins.Ctx) []byte {
	for i := range segs {
		if g := &segs[i]; g.lit != nil {
			dst = append(dst, g.lit...)
		} else {
			dst = append(dst, c.Var(g.v)...)
		}
	}
	return dst
}

// instance is one configuration of redirect, built. It runs on one event
// loop, one request at a time: buf and work are scratch space whose
// contents live until the next Rewrite call (SetResponseHeader copies the
// Location it is given), reused so that a request allocates nothing once
// they have grown; the rule's cache of matches is bounded (resub.Rule).
type instance struct {
	retCode     int
	uri         []seg // nil: no uri
	rule        *resub.Rule
	https       []seg // nil: no http_to_https
	encode      bool
	appendQuery bool

	buf, work []byte
}

var (
	forwardedProto = "X-Forwarded-Proto"
	varURI         = httpvar.Var{Kind: httpvar.URI}
	varScheme      = httpvar.Var{Kind: httpvar.Scheme}
	varArgs        = httpvar.Var{Kind: httpvar.Args}
)

// Rewrite implements plugins.RewritePhase, as redirect.lua's rewrite: a
// request the configuration redirects is answered ret_code (301 or 308
// for http_to_https) with its Location and the gateway's page for the
// status; another goes on.
func (in *instance) Rewrite(c plugins.Ctx) {
	code, tpl := in.retCode, in.uri
	if in.https != nil {
		scheme := c.Header(forwardedProto)
		if scheme == nil {
			scheme = c.Var(varScheme)
		}
		if string(scheme) != "https" {
			tpl = in.https
			if m := c.Method(); string(m) == "GET" || string(m) == "HEAD" {
				code = 301
			} else {
				code = 308
			}
		}
	}
	var out []byte
	switch {
	case tpl != nil:
		out = render(in.buf[:0], tpl, c)
	case in.rule != nil:
		src := c.Var(varURI)
		if src == nil {
			src = c.Path()
		}
		caps := in.rule.Match(src)
		if caps == nil {
			return
		}
		out = in.rule.Expand(in.buf[:0], src, caps)
	default:
		return
	}
	in.buf = out
	index := bytes.IndexByte(out, '?')
	if in.encode {
		w := in.work[:0]
		if index >= 0 {
			w = append(escapeURI(w, out[:index]), out[index:]...)
		} else {
			w = escapeURI(w, out)
		}
		in.work, out = w, w
	}
	if in.appendQuery {
		// is_args is "?": the arguments are not empty.
		if args := c.Var(varArgs); len(args) > 0 {
			sep := byte('?')
			if index >= 0 {
				sep = '&'
			}
			out = append(append(out, sep), args...)
			if in.encode {
				in.work = out
			} else {
				in.buf = out
			}
		}
	}
	c.SetResponseHeader("Location", out)
	c.Exit(code, nil)
}

const upperHex = "0123456789ABCDEF"

// escapeURI appends s escaped as core.utils.uri_safe_encode escapes it
// (ngx_escape_uri's NGX_ESCAPE_URI): space, '#', '%', '?', control
// characters and bytes above '~'.
func escapeURI(dst, s []byte) []byte {
	for _, b := range s {
		if b <= ' ' || b == '#' || b == '%' || b == '?' || b >= 0x7f {
			dst = append(dst, '%', upperHex[b>>4], upperHex[b&15])
		} else {
			dst = append(dst, b)
		}
	}
	return dst
}
