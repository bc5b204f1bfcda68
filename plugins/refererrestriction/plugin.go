package refererrestriction

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"strings"

	"coregate/httpvar"
	"coregate/plugins"
	"coregate/plugins/internal/cjson"
)

// Name is the plugin's wire name.
const Name = "referer-restriction"

//go:embed schema.json
var schema []byte

func init() { plugins.Register(Name, Plugin{}) }

// Plugin is referer-restriction's implementation; its zero value is
// ready.
type Plugin struct{}

var (
	_ plugins.Plugin      = Plugin{}
	_ plugins.AccessPhase = (*instance)(nil)
)

// Schema implements plugins.Plugin.
func (Plugin) Schema() []byte { return schema }

// Check implements plugins.Plugin: the schema says it all.
func (Plugin) Check(json.RawMessage) error { return nil }

// conf is a configuration, with APISIX's defaults.
type conf struct {
	BypassMissing bool     `json:"bypass_missing"`
	Whitelist     []string `json:"whitelist"`
	Blacklist     []string `json:"blacklist"`
	Message       string   `json:"message"`
}

// Build implements plugins.Plugin: the list as a set of hosts and a list
// of suffixes.
func (Plugin) Build(raw json.RawMessage, _ plugins.Env) (plugins.Instance, error) {
	c := conf{Message: "Your referer host is not allowed"}
	if err := json.Unmarshal(raw, &c); err != nil {
		return nil, err
	}
	in := &instance{bypass: c.BypassMissing, hosts: map[string]bool{}}
	l := c.Blacklist
	if c.Whitelist != nil {
		l, in.allow = c.Whitelist, true
	}
	for _, h := range l {
		if s, ok := strings.CutPrefix(h, "*"); ok {
			in.suffixes = append(in.suffixes, []byte(s))
		} else {
			in.hosts[h] = true
		}
	}
	// core.response.exit encodes {message = ...} and adds "\n".
	body := append([]byte(`{"message":`), cjson.AppendString(nil, c.Message)...)
	in.body = append(body, "}\n"...)
	return in, nil
}

// instance is one configuration, built: read-only, shared by the requests
// of its routes.
type instance struct {
	hosts    map[string]bool // the list's hosts
	suffixes [][]byte        // and its "*" entries, without the '*'
	allow    bool            // the list is a whitelist
	bypass   bool
	body     []byte
}

var httpReferer = httpvar.Parse("http_referer")

// Access implements plugins.AccessPhase, as referer-restriction.lua's
// access: the Referer's host (none when the header is absent or is not
// an http(s) URL) is looked up in the list; a request without one is
// refused unless bypass_missing.
func (in *instance) Access(c plugins.Ctx) {
	host, ok := refererHost(c.Var(httpReferer))
	var block bool
	switch {
	case !ok:
		block = !in.bypass
	default:
		block = in.match(host) != in.allow
	}
	if block {
		c.Exit(403, in.body)
	}
}

// match reports whether host is in the list: one of its hosts, or ending
// with one of its suffixes, compared as written (case-sensitively).
func (in *instance) match(host []byte) bool {
	if in.hosts[string(host)] {
		return true
	}
	for _, s := range in.suffixes {
		if bytes.HasSuffix(host, s) {
			return true
		}
	}
	return false
}

// refererHost is the host of a Referer as lua-resty-http's parse_uri
// reads it: an optional "http:" or "https:" (lower case), "//", then a
// run of characters none of "[]:/?", or a bracketed IPv6 literal up to the
// value's last ']'. ok is false for an absent or malformed value. It does
// not allocate: host aliases ref.
func refererHost(ref []byte) (host []byte, ok bool) {
	if ref == nil {
		return nil, false
	}
	switch {
	case bytes.HasPrefix(ref, []byte("http:")):
		ref = ref[5:]
	case bytes.HasPrefix(ref, []byte("https:")):
		ref = ref[6:]
	}
	if !bytes.HasPrefix(ref, []byte("//")) {
		return nil, false
	}
	ref = ref[2:]
	if len(ref) > 0 && ref[0] == '[' {
		end := bytes.LastIndexByte(ref, ']')
		if end < 2 {
			return nil, false
		}
		return ref[:end+1], true
	}
	n := 0
	for n < len(ref) && !strings.ContainsRune("[]:/?", rune(ref[n])) {
		n++
	}
	if n == 0 {
		return nil, false
	}
	return ref[:n], true
}
