package spec

import (
	"bytes"
	"encoding/json"
	"maps"
	"slices"
	"strconv"
	"sync"
)

// The checks below are those a JSON Schema cannot state, or that APISIX
// itself makes outside its schema with messages of their own; each says
// why it is here. Everything else is in schema/*.json.

// checkRouteTree checks a parsed route: the host/remote_addr pairs, the
// schema, then the nodes of its upstream.
func checkRouteTree(v *jval) error {
	// APISIX's Admin API (apisix/admin/routes.lua check_conf) refuses
	// these pairs before the schema, with its own message.
	if v.kind == jObject {
		if present(v, "host") && present(v, "hosts") {
			return &ValidationError{Field: "hosts", Msg: "only one of host or hosts is allowed"}
		}
		if present(v, "remote_addr") && present(v, "remote_addrs") {
			return &ValidationError{Field: "remote_addrs", Msg: "only one of remote_addr or remote_addrs is allowed"}
		}
	}
	if e := objectSchema(KindRoute).validateTree(v); e != nil {
		return e.prefixed("invalid configuration: ")
	}
	return checkUpstreamNodes(v.get("upstream"), "upstream")
}

func checkServiceTree(v *jval) error {
	if e := objectSchema(KindService).validateTree(v); e != nil {
		return e.prefixed("invalid configuration: ")
	}
	return checkUpstreamNodes(v.get("upstream"), "upstream")
}

func checkUpstreamTree(v *jval) error {
	if e := objectSchema(KindUpstream).validateTree(v); e != nil {
		return e.prefixed("invalid configuration: ")
	}
	return checkUpstreamNodes(v, "")
}

// checkUpstreamNodes applies checkNodes (nodes.go: the address syntax of
// map keys, bounds on weights) to the nodes of upstream u, if any.
func checkUpstreamNodes(u *jval, where string) error {
	if u == nil || u.kind != jObject {
		return nil
	}
	n := u.get("nodes")
	if n == nil {
		return nil
	}
	path := []string{"nodes"}
	if where != "" {
		path = []string{where, "nodes"}
	}
	if e := checkNodes(n, path); e != nil {
		return e
	}
	return nil
}

func present(v *jval, k string) bool {
	m := v.get(k)
	return m != nil && m.kind != jNull
}

// checkValues is what APISIX checks after the route schema: the upstream's
// check_upstream_conf, that each plugin config is an object, and the
// lua-resty-expr vars.
func (r *Route) checkValues() error {
	x := r.Rare()
	if e := refuseLua(x.FilterFunc, x.Script, !x.ScriptID.IsZero()); e != nil {
		return e
	}
	if r.Upstream != nil {
		if e := r.Upstream.checkConf(); e != nil {
			e.Field = "upstream." + e.Field
			return e
		}
	}
	if e := checkPlugins(r.Plugins); e != nil {
		return e
	}
	for _, p := range r.PluginList {
		if e := checkPlugin(p.Name, p.Raw); e != nil {
			return e
		}
	}
	// APISIX's IPv6/CIDR pattern (schema_def.lua ip_def) accepts strings
	// that name no prefix, such as ":/8" or "::/200"; a worker could not
	// match them, so they are refused here with the schema's own message.
	if x.RemoteAddr != "" && !ValidIPOrCIDR(x.RemoteAddr) {
		return &ValidationError{Field: "remote_addr", Detail: "not an IP address or CIDR prefix: " + strconv.Quote(x.RemoteAddr),
			Msg: `invalid configuration: property "remote_addr" validation failed: object matches none of the required`}
	}
	for i, a := range x.RemoteAddrs {
		if !ValidIPOrCIDR(a) {
			return &ValidationError{Field: "remote_addrs[" + strconv.Itoa(i) + "]", Detail: "not an IP address or CIDR prefix: " + strconv.Quote(a),
				Msg: `invalid configuration: property "remote_addrs" validation failed: failed to validate item ` + strconv.Itoa(i+1) + `: object matches none of the required`}
		}
	}
	// lua-resty-expr's grammar (operators, negation, regular expressions
	// and addresses compiled ahead) is code, not a schema: vars.go.
	if e := x.Vars.validate(); e != nil {
		return e
	}
	return nil
}

// refuseLua refuses what APISIX runs as Lua and coregate cannot: a
// route's filter_func (an extra condition of the match: ignored, the
// route would match requests it was written to leave out) and a route's
// or service's script or script_id (which runs instead of the plugins:
// ignored, the plugins it replaced, or none, would run). Both would
// change what the gateway lets through, so they are refused rather than
// stored; a route's condition is written as vars instead.
func refuseLua(filterFunc, script string, scriptID bool) *ValidationError {
	switch {
	case filterFunc != "":
		return &ValidationError{Field: "filter_func", Detail: "a Lua function; write the condition as vars",
			Msg: `invalid configuration: property "filter_func" is not supported: coregate runs no Lua; write the condition as "vars"`}
	case script != "":
		return &ValidationError{Field: "script", Detail: "a Lua script",
			Msg: `invalid configuration: property "script" is not supported: coregate runs no Lua`}
	case scriptID:
		return &ValidationError{Field: "script_id", Detail: "a Lua script",
			Msg: `invalid configuration: property "script_id" is not supported: coregate runs no Lua`}
	}
	return nil
}

func (s *Service) checkValues() error {
	if e := refuseLua("", s.Script, false); e != nil {
		return e
	}
	if s.Upstream != nil {
		if e := s.Upstream.checkConf(); e != nil {
			e.Field = "upstream." + e.Field
			return e
		}
	}
	if e := checkPlugins(s.Plugins); e != nil {
		return e
	}
	return nil
}

// Schemas APISIX's check_upstream_conf picks by hash_on for a chash key
// (apisix/schema_def.lua upstream_hash_vars_schema and
// upstream_hash_header_schema).
var (
	hashVarsSchema   = mustCompile("upstream_hash_vars", `{"type":"string","pattern":"^((uri|server_name|server_addr|request_uri|remote_port|remote_addr|query_string|host|hostname|mqtt_client_id)|arg_[0-9a-zA-z_-]+)$"}`)
	hashHeaderSchema = mustCompile("upstream_hash_header", `{"type":"string","pattern":"^[a-zA-Z0-9-_]+$"}`)
)

func mustCompile(name, doc string) func() *Schema {
	return sync.OnceValue(func() *Schema {
		s, err := CompileSchema(name, []byte(doc))
		if err != nil {
			panic("spec: " + err.Error())
		}
		return s
	})
}

func (u *Upstream) checkValues() error {
	if e := u.checkConf(); e != nil {
		return e
	}
	return nil
}

// checkConf is APISIX's check_upstream_conf after the schema: a rule
// between two fields' values (pass_host rewrite needs upstream_host) and
// a chash key checked against a schema that hash_on chooses, neither of
// which APISIX states in the upstream schema.
func (u *Upstream) checkConf() *ValidationError {
	if u.Rare().PassHost == "rewrite" && u.Rare().UpstreamHost == "" {
		return &ValidationError{Field: "upstream_host", Msg: "`upstream_host` can't be empty when `pass_host` is `rewrite`"}
	}
	if u.Type != "chash" {
		return nil
	}
	hashOn := u.Rare().HashOn
	if hashOn == "" {
		hashOn = "vars"
	}
	if hashOn != "consumer" && u.Rare().Key == "" {
		return &ValidationError{Field: "key", Msg: "missing key"}
	}
	var s *Schema
	switch hashOn {
	case "vars":
		s = hashVarsSchema()
	case "header", "cookie":
		s = hashHeaderSchema()
	}
	if s != nil {
		if e := s.validateTree(&jval{kind: jString, s: u.Rare().Key}); e != nil {
			e.Field = "key"
			return e.prefixed("invalid configuration: ")
		}
	}
	return nil
}

// checkPlugins checks that every plugin config is a JSON object, as each
// plugin's schema requires; the configs themselves are the plugin layer's
// to check, each against its own schema (CompileSchema).
func checkPlugins(plugins map[string]json.RawMessage) *ValidationError {
	for _, name := range slices.Sorted(maps.Keys(plugins)) {
		if e := checkPlugin(name, plugins[name]); e != nil {
			return e
		}
	}
	return nil
}

// checkPlugin is checkPlugins' check of one plugin's configuration.
func checkPlugin(name string, raw json.RawMessage) *ValidationError {
	raw = bytes.TrimLeft(raw, " \t\r\n")
	if len(raw) > 0 && raw[0] == '{' {
		return nil // a stored RawMessage is well-formed JSON
	}
	got := "userdata"
	if v, err := parseJSON(raw); err == nil {
		got = v.luaType()
	}
	return &ValidationError{
		Field: "plugins." + name,
		Msg:   "failed to check the configuration of plugin " + name + " err: wrong type: expected object, got " + got,
	}
}
