package uriblocker

import (
	_ "embed"
	"encoding/json"
	"regexp"

	"coregate/httpvar"
	"coregate/plugins"
	"coregate/plugins/internal/cjson"
	"coregate/plugins/internal/pcre"
)

// Name is the plugin's wire name.
const Name = "uri-blocker"

//go:embed schema.json
var schema []byte

func init() { plugins.Register(Name, Plugin{}) }

// Plugin is uri-blocker's implementation; its zero value is ready.
type Plugin struct{}

var (
	_ plugins.Plugin       = Plugin{}
	_ plugins.RewritePhase = (*instance)(nil)
)

// Schema implements plugins.Plugin.
func (Plugin) Schema() []byte { return schema }

// conf is a configuration, with APISIX's defaults.
type conf struct {
	BlockRules      []string `json:"block_rules"`
	RejectedCode    int      `json:"rejected_code"`
	RejectedMsg     *string  `json:"rejected_msg"`
	CaseInsensitive bool     `json:"case_insensitive"`
}

func decode(raw json.RawMessage) (conf, error) {
	c := conf{RejectedCode: 403}
	err := json.Unmarshal(raw, &c)
	return c, err
}

// Check implements plugins.Plugin: every rule must compile, with
// APISIX's message (pcre.Check).
func (Plugin) Check(raw json.RawMessage) error {
	c, err := decode(raw)
	if err != nil {
		return err
	}
	for _, r := range c.BlockRules {
		if err := pcre.Check(r); err != nil {
			return err
		}
	}
	return nil
}

// Build implements plugins.Plugin: the rules joined into one expression,
// as uri-blocker.lua joins them with "|" behind "(?i)" when
// case_insensitive.
func (Plugin) Build(raw json.RawMessage, _ plugins.Env) (plugins.Instance, error) {
	c, err := decode(raw)
	if err != nil {
		return nil, err
	}
	in := &instance{status: c.RejectedCode, target: make([]byte, 0, 256)}
	if in.re, err = pcre.Any(c.BlockRules, c.CaseInsensitive); err != nil {
		return nil, err
	}
	if c.RejectedMsg != nil {
		// core.response.exit encodes {error_msg = ...} and adds "\n".
		body := append([]byte(`{"error_msg":`), cjson.AppendString(nil, *c.RejectedMsg)...)
		in.body = append(body, "}\n"...)
	}
	return in, nil
}

// instance is one configuration, built, used by one event loop: target
// is its scratch buffer, reused from one request to the next; the rest is
// read-only (a Regexp is safe for concurrent use).
type instance struct {
	re     *regexp.Regexp
	status int
	body   []byte // nil: the gateway's page for status
	target []byte // the request's $uri?$args
}

var (
	uriVar  = httpvar.Parse("uri")
	argsVar = httpvar.Parse("args")
)

// Rewrite implements plugins.RewritePhase, as uri-blocker.lua's rewrite:
// a request whose target a rule matches anywhere is answered
// rejected_code, with {"error_msg": rejected_msg} when it is set. The
// target is APISIX's $request_uri, which it makes of the normalised path
// ($uri: "/./a/../b" is "/b", so that a rule anchored at "^/b" is not
// bypassed) and the query as sent ($args, after '?' when there is one).
func (in *instance) Rewrite(c plugins.Ctx) {
	t := append(in.target[:0], c.Var(uriVar)...)
	if args := c.Var(argsVar); len(args) > 0 {
		t = append(t, '?')
		t = append(t, args...)
	}
	in.target = t
	if in.re.Match(t) {
		c.Exit(in.status, in.body)
	}
}
