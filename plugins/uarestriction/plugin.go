package uarestriction

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"regexp"

	"coregate/plugins"
	"coregate/plugins/internal/cjson"
	"coregate/plugins/internal/pcre"
)

// Name is the plugin's wire name.
const Name = "ua-restriction"

//go:embed schema.json
var schema []byte

func init() { plugins.Register(Name, Plugin{}) }

// Plugin is ua-restriction's implementation; its zero value is ready.
type Plugin struct{}

var (
	_ plugins.Plugin      = Plugin{}
	_ plugins.AccessPhase = (*instance)(nil)
)

// Schema implements plugins.Plugin.
func (Plugin) Schema() []byte { return schema }

// conf is a configuration, with APISIX's defaults.
type conf struct {
	BypassMissing bool     `json:"bypass_missing"`
	Allowlist     []string `json:"allowlist"`
	Denylist      []string `json:"denylist"`
	Message       string   `json:"message"`
}

func decode(raw json.RawMessage) (conf, error) {
	c := conf{Message: "Not allowed"}
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
	for _, l := range [][]string{c.Allowlist, c.Denylist} {
		for _, r := range l {
			if err := pcre.Check(r); err != nil {
				return err
			}
		}
	}
	return nil
}

// Build implements plugins.Plugin: the list's rules, joined into one
// expression.
func (Plugin) Build(raw json.RawMessage, _ plugins.Env) (plugins.Instance, error) {
	c, err := decode(raw)
	if err != nil {
		return nil, err
	}
	in := &instance{bypass: c.BypassMissing}
	l := c.Denylist
	if c.Allowlist != nil {
		l, in.allow = c.Allowlist, true
	}
	if in.re, err = pcre.Any(l, false); err != nil {
		return nil, err
	}
	// core.response.exit encodes {message = ...} and adds "\n".
	body := append([]byte(`{"message":`), cjson.AppendString(nil, c.Message)...)
	in.body = append(body, "}\n"...)
	return in, nil
}

// instance is one configuration, built: read-only, shared by the requests
// of its routes (a Regexp is safe for concurrent use).
type instance struct {
	re     *regexp.Regexp
	allow  bool // re is the allowlist's
	bypass bool
	body   []byte
}

// Access implements plugins.AccessPhase, as ua-restriction.lua's access:
// a request without a User-Agent is refused unless bypass_missing; one
// with is refused when, each value's surrounding white space trimmed, no
// value matches an allowlist rule, or a value matches a denylist rule.
func (in *instance) Access(c plugins.Ctx) {
	for i := 0; ; i++ {
		ua, ok := c.HeaderAt("User-Agent", i)
		if !ok {
			if i == 0 && in.bypass {
				return // missing, let through
			}
			// Missing, or no value in the allowlist; or none denied.
			if i == 0 || in.allow {
				c.Exit(403, in.body)
			}
			return
		}
		if in.re.Match(bytes.TrimSpace(ua)) {
			if !in.allow {
				c.Exit(403, in.body)
			}
			return // allowed, or refused
		}
	}
}
