package consumerrestriction

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"unsafe"

	"coregate/httpvar"
	"coregate/plugins"
)

// Name is the plugin's wire name.
const Name = "consumer-restriction"

//go:embed schema.json
var schema []byte

func init() { plugins.Register(Name, Plugin{}) }

// Plugin is consumer-restriction's implementation; its zero value is
// ready.
type Plugin struct{}

var (
	_ plugins.Plugin      = Plugin{}
	_ plugins.AccessPhase = (*instance)(nil)
)

// Schema implements plugins.Plugin.
func (Plugin) Schema() []byte { return schema }

// conf is a configuration, with APISIX's defaults.
type conf struct {
	Type             string   `json:"type"`
	Blacklist        []string `json:"blacklist"`
	Whitelist        []string `json:"whitelist"`
	AllowedByMethods []struct {
		User    *string  `json:"user"`
		Methods []string `json:"methods"`
	} `json:"allowed_by_methods"`
	RejectedCode int     `json:"rejected_code"`
	RejectedMsg  *string `json:"rejected_msg"`
}

func parse(raw json.RawMessage) (conf, error) {
	c := conf{Type: "consumer_name", RejectedCode: 403}
	err := json.Unmarshal(raw, &c)
	return c, err
}

// Check implements plugins.Plugin: the schema says it all.
func (Plugin) Check(raw json.RawMessage) error {
	_, err := parse(raw)
	return err
}

// Build implements plugins.Plugin.
func (Plugin) Build(raw json.RawMessage, _ plugins.Env) (plugins.Instance, error) {
	c, err := parse(raw)
	if err != nil {
		return nil, err
	}
	in := &instance{
		group:     c.Type == "consumer_group_id",
		value:     httpvar.Parse(c.Type),
		blacklist: set(c.Blacklist),
		whitelist: set(c.Whitelist),
		code:      c.RejectedCode,
		unknown:   message("The request is rejected, please check the " + c.Type + " for this request"),
	}
	if c.RejectedMsg != nil {
		in.rejected = message(*c.RejectedMsg)
	} else {
		in.rejected = message("The " + c.Type + " is forbidden.")
	}
	for _, m := range c.AllowedByMethods {
		if m.User == nil {
			// APISIX compares a missing user (nil) with the request's
			// value, never nil: such an entry never applies.
			continue
		}
		methods := make([][]byte, len(m.Methods))
		for i, s := range m.Methods {
			methods[i] = []byte(s)
		}
		in.methods = append(in.methods, userMethods{*m.User, methods})
	}
	in.byMethods = len(c.AllowedByMethods) > 0
	return in, nil
}

// message is the body of core.response.exit(code, {message = msg}):
// the JSON object and a newline.
func message(msg string) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(struct {
		Message string `json:"message"`
	}{msg})
	return b.Bytes()
}

// userMethods is one allowed_by_methods entry with a user.
type userMethods struct {
	user    string
	methods [][]byte
}

// instance is one configuration, built once and only read afterwards:
// safe for concurrent use. A request allocates nothing.
type instance struct {
	group     bool                // consumer_group_id: the attached consumer's GroupID
	value     httpvar.Var         // otherwise $consumer_name, $service_id or $route_id
	blacklist map[string]struct{} // nil when none
	whitelist map[string]struct{} // nil when none
	methods   []userMethods
	byMethods bool // allowed_by_methods is set, even without a user
	code      int
	rejected  []byte // the rejected_code's body
	unknown   []byte // the 401's, when the request has no value
}

// Access implements plugins.AccessPhase, as consumer-restriction.lua's
// access: the blacklist refuses, then a value the whitelist does not hold
// is refused unless, for a consumer allowed_by_methods names, the method
// is one of its methods. The type consumer_group_id reads the group of
// the consumer an authentication plugin attached (APISIX's
// ctx.consumer_group_id, set by attach_consumer).
func (in *instance) Access(c plugins.Ctx) {
	var v []byte
	if in.group {
		if k := c.Consumer(); k != nil {
			v = readOnly(k.GroupID)
		}
	} else {
		v = c.Var(in.value)
	}
	if len(v) == 0 {
		c.Exit(401, in.unknown)
		return
	}
	if includes(in.blacklist, v) {
		c.Exit(in.code, in.rejected)
		return
	}
	block, whitelisted := false, false
	if len(in.whitelist) > 0 {
		whitelisted = includes(in.whitelist, v)
		block = !whitelisted
	}
	if in.byMethods && !whitelisted && !in.methodAllowed(v, c.Method()) {
		block = true
	}
	if block {
		c.Exit(in.code, in.rejected)
	}
}

// readOnly is s's bytes without a copy, for lookups and comparisons
// only: the slice must never be written.
func readOnly(s string) []byte {
	return unsafe.Slice(unsafe.StringData(s), len(s))
}

// set is a list's values, for lookups whatever its length; nil for
// none.
func set(list []string) map[string]struct{} {
	if len(list) == 0 {
		return nil
	}
	m := make(map[string]struct{}, len(list))
	for _, s := range list {
		m[s] = struct{}{}
	}
	return m
}

// includes reports whether the set holds v.
func includes(set map[string]struct{}, v []byte) bool {
	_, ok := set[string(v)]
	return ok
}

// methodAllowed is is_method_allowed: the first entry of user v decides;
// a user no entry names is allowed.
func (in *instance) methodAllowed(v, method []byte) bool {
	for i := range in.methods {
		m := &in.methods[i]
		if m.user != string(v) {
			continue
		}
		for _, allowed := range m.methods {
			if bytes.Equal(allowed, method) {
				return true
			}
		}
		return false
	}
	return true
}
