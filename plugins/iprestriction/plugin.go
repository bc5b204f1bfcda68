package iprestriction

import (
	_ "embed"
	"encoding/json"
	"errors"
	"net/netip"

	"coregate/admin/spec"
	"coregate/httpvar"
	"coregate/plugins"
	"coregate/plugins/internal/cjson"
)

// Name is the plugin's wire name.
const Name = "ip-restriction"

//go:embed schema.json
var schema []byte

func init() { plugins.Register(Name, Plugin{}) }

// Plugin is ip-restriction's implementation; its zero value is ready.
type Plugin struct{}

var (
	_ plugins.Plugin      = Plugin{}
	_ plugins.AccessPhase = (*instance)(nil)
)

// Schema implements plugins.Plugin.
func (Plugin) Schema() []byte { return schema }

// conf is a configuration, with APISIX's defaults.
type conf struct {
	Message      string   `json:"message"`
	ResponseCode int      `json:"response_code"`
	Whitelist    []string `json:"whitelist"`
	Blacklist    []string `json:"blacklist"`
}

func decode(raw json.RawMessage) (conf, error) {
	c := conf{Message: "Your IP address is not allowed", ResponseCode: 403}
	err := json.Unmarshal(raw, &c)
	return c, err
}

// Check implements plugins.Plugin: every entry must parse as an address
// or a CIDR, which the schema's patterns do not ensure ("::1/129"), with
// APISIX's message.
func (Plugin) Check(raw json.RawMessage) error {
	c, err := decode(raw)
	if err != nil {
		return err
	}
	for _, l := range [][]string{c.Whitelist, c.Blacklist} {
		if _, err := parseList(l); err != nil {
			return err
		}
	}
	return nil
}

// parseList parses a whitelist or a blacklist.
func parseList(l []string) ([]netip.Prefix, error) {
	ps := make([]netip.Prefix, 0, len(l))
	for _, s := range l {
		p, ok := spec.ParseIPOrCIDR(s)
		if !ok {
			return nil, errors.New("invalid ip address: " + s)
		}
		ps = append(ps, p)
	}
	return ps, nil
}

// remoteAddr is the variable the client's address is read from.
var remoteAddr = httpvar.Parse("remote_addr")

// Build implements plugins.Plugin: the list, parsed into a Set.
func (Plugin) Build(raw json.RawMessage, _ plugins.Env) (plugins.Instance, error) {
	c, err := decode(raw)
	if err != nil {
		return nil, err
	}
	in := &instance{status: c.ResponseCode}
	l := c.Blacklist
	if c.Whitelist != nil {
		// The schema's oneOf allows one list; were both given, the
		// whitelist decides, as in ip-restriction.lua.
		l, in.allow = c.Whitelist, true
	}
	ps, err := parseList(l)
	if err != nil {
		return nil, err
	}
	in.set = NewSet(ps)
	// core.response.exit encodes {message = ...} and adds "\n".
	body := append([]byte(`{"message":`), cjson.AppendString(nil, c.Message)...)
	in.body = append(body, "}\n"...)
	return in, nil
}

// instance is one configuration, built: read-only, shared by the requests
// of its routes.
type instance struct {
	set    *Set
	allow  bool // set is a whitelist
	status int
	body   []byte
}

// Access implements plugins.AccessPhase, as ip-restriction's restrict:
// the request is refused when its address is on the blacklist, or not on
// the whitelist. An address that does not parse is on no list.
func (in *instance) Access(c plugins.Ctx) {
	if in.allowed(c.Var(remoteAddr)) {
		return
	}
	c.Exit(in.status, in.body)
}

// allowed reports whether the client address addr (its text, as
// $remote_addr) passes the list. It does not allocate.
func (in *instance) allowed(addr []byte) bool {
	a, ok := spec.ParseIP(addr)
	listed := ok && in.set.Contains(a)
	return listed == in.allow
}
