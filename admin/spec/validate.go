package spec

import (
	"encoding/json"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"
)

// Patterns of apisix/schema_def.lua, as APISIX writes them (the text goes
// into error messages); Go's regexp reads them the same way.
const (
	hostPatternSrc      = `^\*$|^\*?[0-9a-zA-Z-._\[\]:]+$`
	labelPatternSrc     = `^\S+$`
	filterFuncSrc       = `^function`
	hashVarsPatternSrc  = `^((uri|server_name|server_addr|request_uri|remote_port|remote_addr|query_string|host|hostname|mqtt_client_id)|arg_[0-9a-zA-z_-]+)$`
	hashHeaderPatternSr = `^[a-zA-Z0-9-_]+$`
)

var (
	hostPattern       = regexp.MustCompile(hostPatternSrc)
	labelPattern      = regexp.MustCompile(labelPatternSrc)
	filterFuncPattern = regexp.MustCompile(filterFuncSrc)
	hashVarsPattern   = regexp.MustCompile(hashVarsPatternSrc)
	hashHeaderPattern = regexp.MustCompile(hashHeaderPatternSr)
)

// Enumerations of the schema.
var (
	// methods are the HTTP methods a route may list.
	methods       = []string{"GET", "POST", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS", "CONNECT", "TRACE", "PURGE"}
	upstreamTypes = []string{"roundrobin", "chash", "ewma", "least_conn"}
	schemes       = []string{"grpc", "grpcs", "http", "https", "tcp", "tls", "udp", "kafka"}
	passHosts     = []string{"pass", "node", "rewrite"}
	hashOns       = []string{"vars", "header", "cookie", "consumer", "vars_combinations"}
)

const (
	errAnyOf    = "object matches none of the required"
	errEnum     = "matches none of the enum values"
	errOneOf0   = "value should match only one schema, but matches none"
	errOneOf12  = "value should match only one schema, but matches both schemas 1 and 2"
	errNotSch   = "value wasn't supposed to match schema"
	routeAnyOf  = `object matches none of the required: ["plugins","uri"] or ["upstream","uri"] or ["upstream_id","uri"] or ["service_id","uri"] or ["plugins","uris"] or ["upstream","uris"] or ["upstream_id","uris"] or ["service_id","uris"] or ["script","uri"] or ["script","uris"]`
	checksAnyOf = `object matches none of the required: ["active"] or ["active","passive"]`
)

// strRule checks a string and returns APISIX's failure text, "" if it
// passes.
type strRule func(s string) string

func lenRule(minLen, maxLen int) strRule {
	return func(s string) string {
		n := utf8.RuneCountInString(s)
		if n < minLen {
			return fmt.Sprintf("string too short, expected at least %d, got %d", minLen, n)
		}
		if maxLen >= 0 && n > maxLen {
			return fmt.Sprintf("string too long, expected at most %d, got %d", maxLen, n)
		}
		return ""
	}
}

func patRule(re *regexp.Regexp, src string) strRule {
	return func(s string) string {
		if re.MatchString(s) {
			return ""
		}
		return "failed to match pattern " + luaQuote(src) + " with " + luaQuote(s)
	}
}

func enumRule(vals []string) strRule {
	return func(s string) string {
		if slices.Contains(vals, s) {
			return ""
		}
		return errEnum
	}
}

func ipRule(s string) string {
	if ValidIPOrCIDR(s) {
		return ""
	}
	return errAnyOf
}

func allRules(rules ...strRule) strRule {
	return func(s string) string {
		for _, r := range rules {
			if m := r(s); m != "" {
				return m
			}
		}
		return ""
	}
}

// luaQuote quotes s as Lua's %q does, which is how APISIX's schema messages
// show patterns and values.
func luaQuote(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '"', '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case '\n':
			b.WriteString("\\\n")
		case '\r':
			b.WriteString(`\r`)
		case 0:
			b.WriteString(`\0`)
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('"')
	return b.String()
}

var (
	nameRule   = lenRule(1, 256)
	descRule   = lenRule(0, 256)
	hostRule   = patRule(hostPattern, hostPatternSrc)
	scriptRule = lenRule(10, 102400)
)

var strRules = map[reflect.Type]map[string]strRule{
	reflect.TypeFor[Route](): {
		"name":        nameRule,
		"desc":        descRule,
		"uri":         lenRule(1, 4096),
		"host":        hostRule,
		"remote_addr": ipRule,
		"filter_func": allRules(lenRule(10, -1), patRule(filterFuncPattern, filterFuncSrc)),
		"script":      scriptRule,
	},
	reflect.TypeFor[Service](): {
		"name":   nameRule,
		"desc":   descRule,
		"script": scriptRule,
	},
	reflect.TypeFor[Upstream](): {
		"name":          nameRule,
		"desc":          descRule,
		"type":          enumRule(upstreamTypes),
		"scheme":        enumRule(schemes),
		"pass_host":     enumRule(passHosts),
		"upstream_host": hostRule,
		"hash_on":       enumRule(hashOns),
		"service_name":  nameRule,
	},
}

// emptyStringRule is the failure text for an explicit "" in the string
// field name of owner (a Go struct keeps "" and absent alike, so the
// decoder asks before the difference is lost).
func emptyStringRule(owner reflect.Type, name string) string {
	if r := strRules[owner][name]; r != nil {
		return r("")
	}
	return ""
}

// checkStr applies the rule of field name of owner to a non-empty value.
func checkStr(owner reflect.Type, name, s string) *problem {
	if s == "" {
		return nil
	}
	if msg := strRules[owner][name](s); msg != "" {
		return (&problem{msg: msg}).in(name)
	}
	return nil
}

func checkID(name string, id ID) *problem {
	if id.IsZero() || id.valid() {
		return nil
	}
	return (&problem{msg: errAnyOf}).in(name)
}

func checkLabels(labels map[string]string) *problem {
	rule := allRules(lenRule(1, 256), patRule(labelPattern, labelPatternSrc))
	for _, k := range sortedKeys(labels) {
		if msg := rule(labels[k]); msg != "" {
			return (&problem{msg: msg}).key(k).in("labels")
		}
	}
	return nil
}

// checkStrList checks an array property: minItems, each item, uniqueItems.
func checkStrList(name string, list []string, minItems int, item strRule) *problem {
	if list == nil {
		return nil
	}
	if len(list) < minItems {
		return (&problem{msg: fmt.Sprintf("expect array to have at least %d items", minItems)}).in(name)
	}
	if item != nil {
		for i, s := range list {
			if msg := item(s); msg != "" {
				return (&problem{msg: msg}).item(i).in(name)
			}
		}
	}
	seen := make(map[string]int, len(list))
	for i, s := range list {
		if j, dup := seen[s]; dup {
			return (&problem{msg: fmt.Sprintf("expected unique items but items %d and %d are equal", j+1, i+1)}).in(name)
		}
		seen[s] = i
	}
	return nil
}

func checkTimeout(t *Timeout) *problem {
	if t == nil {
		return nil
	}
	for _, f := range []struct {
		name string
		v    float64
	}{{"connect", t.Connect}, {"send", t.Send}, {"read", t.Read}} {
		if !(f.v > 0) {
			return (&problem{msg: "expected " + luaNum(f.v) + " to be greater than 0"}).in(f.name).in("timeout")
		}
	}
	return nil
}

func atLeast(name string, v, limit float64) *problem {
	if v < limit {
		return (&problem{msg: "expected " + luaNum(v) + " to be at least " + luaNum(limit)}).in(name)
	}
	return nil
}

var (
	typeRoute    = reflect.TypeFor[Route]()
	typeService  = reflect.TypeFor[Service]()
	typeUpstream = reflect.TypeFor[Upstream]()
)

// Validate checks the route against APISIX's route schema and the Admin
// API's route checks, in APISIX's order. The error is a *ValidationError
// whose text is APISIX's. It does not look at other objects (Spec.Check
// does) nor inside plugin configs (beyond each being an object).
func (r *Route) Validate() error {
	if r.Host != "" && r.Hosts != nil {
		return &ValidationError{Field: "hosts", Msg: "only one of host or hosts is allowed"}
	}
	if r.RemoteAddr != "" && r.RemoteAddrs != nil {
		return &ValidationError{Field: "remote_addrs", Msg: "only one of remote_addr or remote_addrs is allowed"}
	}
	if p := r.schema(); p != nil {
		return p.schemaErr()
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
	if e := r.Vars.validate(); e != nil {
		return e
	}
	return nil
}

func (r *Route) schema() *problem {
	t := typeRoute
	if p := checkID("id", r.ID); p != nil {
		return p
	}
	for _, f := range []struct{ name, v string }{{"name", r.Name}, {"desc", r.Desc}, {"uri", r.URI}} {
		if p := checkStr(t, f.name, f.v); p != nil {
			return p
		}
	}
	if p := checkLabels(r.Labels); p != nil {
		return p
	}
	if p := checkStrList("uris", r.URIs, 1, nil); p != nil {
		return p
	}
	if p := checkStrList("methods", r.Methods, 0, enumRule(methods)); p != nil {
		return p
	}
	if p := checkStr(t, "host", r.Host); p != nil {
		return p
	}
	if p := checkStrList("hosts", r.Hosts, 1, hostRule); p != nil {
		return p
	}
	if p := checkStr(t, "remote_addr", r.RemoteAddr); p != nil {
		return p
	}
	if p := checkStrList("remote_addrs", r.RemoteAddrs, 1, ipRule); p != nil {
		return p
	}
	if p := checkStr(t, "filter_func", r.FilterFunc); p != nil {
		return p
	}
	if p := checkID("plugin_config_id", r.PluginConfigID); p != nil {
		return p
	}
	if r.Upstream != nil {
		if p := r.Upstream.schema(); p != nil {
			return p.in("upstream")
		}
	}
	for _, f := range []struct {
		name string
		id   ID
	}{{"upstream_id", r.UpstreamID}, {"service_id", r.ServiceID}, {"script_id", r.ScriptID}} {
		if p := checkID(f.name, f.id); p != nil {
			return p
		}
	}
	if p := checkStr(t, "script", r.Script); p != nil {
		return p
	}
	if p := checkTimeout(r.Timeout); p != nil {
		return p
	}
	if r.Status != nil && *r.Status != 0 && *r.Status != 1 {
		return (&problem{msg: errEnum}).in("status")
	}
	// allOf 1: exactly one of uri and uris.
	hasURI, hasURIs := r.URI != "", r.URIs != nil
	switch {
	case hasURI && hasURIs:
		return &problem{msg: "allOf 1 failed: " + errOneOf12}
	case !hasURI && !hasURIs:
		return &problem{msg: "allOf 1 failed: " + errOneOf0}
	}
	if r.Plugins == nil && r.Upstream == nil && r.UpstreamID.IsZero() && r.ServiceID.IsZero() && r.Script == "" {
		return &problem{msg: routeAnyOf}
	}
	if r.Script != "" && (r.Plugins != nil || !r.PluginConfigID.IsZero()) {
		return &problem{msg: errNotSch}
	}
	return nil
}

// Validate checks the service against APISIX's service schema and the
// Admin API's service checks.
func (s *Service) Validate() error {
	if p := s.schema(); p != nil {
		return p.schemaErr()
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

func (s *Service) schema() *problem {
	t := typeService
	if p := checkID("id", s.ID); p != nil {
		return p
	}
	for _, f := range []struct{ name, v string }{{"name", s.Name}, {"desc", s.Desc}} {
		if p := checkStr(t, f.name, f.v); p != nil {
			return p
		}
	}
	if p := checkLabels(s.Labels); p != nil {
		return p
	}
	if s.Upstream != nil {
		if p := s.Upstream.schema(); p != nil {
			return p.in("upstream")
		}
	}
	if p := checkID("upstream_id", s.UpstreamID); p != nil {
		return p
	}
	if p := checkStr(t, "script", s.Script); p != nil {
		return p
	}
	return checkStrList("hosts", s.Hosts, 1, hostRule)
}

// Validate checks the upstream against APISIX's upstream schema and
// check_upstream_conf (pass_host rewrite needs upstream_host; chash needs a
// key that suits hash_on).
func (u *Upstream) Validate() error {
	if p := u.schema(); p != nil {
		return p.schemaErr()
	}
	if e := u.checkConf(); e != nil {
		return e
	}
	return nil
}

func (u *Upstream) schema() *problem {
	t := typeUpstream
	if p := checkID("id", u.ID); p != nil {
		return p
	}
	for _, f := range []struct{ name, v string }{{"name", u.Name}, {"desc", u.Desc}, {"type", u.Type}} {
		if p := checkStr(t, f.name, f.v); p != nil {
			return p
		}
	}
	if p := checkLabels(u.Labels); p != nil {
		return p
	}
	for _, n := range u.Nodes.List {
		if !validNode(n) {
			return (&problem{msg: errNodes}).in("nodes")
		}
	}
	if u.Retries != nil {
		if p := atLeast("retries", float64(*u.Retries), 0); p != nil {
			return p
		}
	}
	if u.RetryTimeout != nil {
		if p := atLeast("retry_timeout", *u.RetryTimeout, 0); p != nil {
			return p
		}
	}
	if p := checkTimeout(u.Timeout); p != nil {
		return p
	}
	for _, f := range []struct{ name, v string }{
		{"scheme", u.Scheme}, {"pass_host", u.PassHost}, {"upstream_host", u.UpstreamHost},
		{"hash_on", u.HashOn}, {"service_name", u.ServiceName},
	} {
		if p := checkStr(t, f.name, f.v); p != nil {
			return p
		}
	}
	if k := u.KeepalivePool; k != nil {
		if k.Size != nil {
			if p := atLeast("size", float64(*k.Size), 1); p != nil {
				return p.in("keepalive_pool")
			}
		}
		if k.IdleTimeout != nil {
			if p := atLeast("idle_timeout", *k.IdleTimeout, 0); p != nil {
				return p.in("keepalive_pool")
			}
		}
		if k.Requests != nil {
			if p := atLeast("requests", float64(*k.Requests), 1); p != nil {
				return p.in("keepalive_pool")
			}
		}
	}
	if u.Checks != nil {
		v, err := parseJSON(u.Checks)
		if err != nil || v.kind != jObject {
			return (&problem{msg: "wrong type: expected object"}).in("checks")
		}
		if v.get("active") == nil {
			return (&problem{msg: checksAnyOf}).in("checks")
		}
	}
	// oneOf: nodes, or service_name with discovery_type.
	byNodes := !u.Nodes.IsZero()
	byDiscovery := u.ServiceName != "" && u.DiscoveryType != ""
	switch {
	case byNodes && byDiscovery:
		return &problem{msg: errOneOf12}
	case !byNodes && !byDiscovery:
		return &problem{msg: errOneOf0}
	}
	return nil
}

// checkConf is APISIX's check_upstream_conf after the schema.
func (u *Upstream) checkConf() *ValidationError {
	if u.PassHost == "rewrite" && u.UpstreamHost == "" {
		return &ValidationError{Field: "upstream_host", Msg: "`upstream_host` can't be empty when `pass_host` is `rewrite`"}
	}
	if u.Type != "chash" {
		return nil
	}
	hashOn := u.HashOn
	if hashOn == "" {
		hashOn = "vars"
	}
	if hashOn != "consumer" && u.Key == "" {
		return &ValidationError{Field: "key", Msg: "missing key"}
	}
	var rule strRule
	switch hashOn {
	case "vars":
		rule = patRule(hashVarsPattern, hashVarsPatternSrc)
	case "header", "cookie":
		rule = patRule(hashHeaderPattern, hashHeaderPatternSr)
	}
	if rule != nil {
		if msg := rule(u.Key); msg != "" {
			return &ValidationError{Field: "key", Msg: "invalid configuration: " + msg}
		}
	}
	return nil
}

// checkPlugins checks that every plugin config is a JSON object, as each
// plugin's schema requires; the configs themselves are the plugins' to
// check.
func checkPlugins(plugins map[string]json.RawMessage) *ValidationError {
	for _, name := range sortedKeys(plugins) {
		v, err := parseJSON(plugins[name])
		if err == nil && v.kind == jObject {
			continue
		}
		got := "userdata"
		if err == nil {
			got = v.luaType()
		}
		return &ValidationError{
			Field: "plugins." + name,
			Msg:   "failed to check the configuration of plugin " + name + " err: wrong type: expected object, got " + got,
		}
	}
	return nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
