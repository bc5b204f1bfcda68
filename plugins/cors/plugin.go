package cors

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"errors"
	"regexp"
	"strconv"
	"strings"

	"coregate/plugins"
)

// Name is the plugin's wire name.
const Name = "cors"

var (
	//go:embed schema.json
	schema []byte
	//go:embed metadata_schema.json
	metadataSchema []byte
)

func init() { plugins.Register(Name, Plugin{}) }

// Plugin is cors's implementation; its zero value is ready.
type Plugin struct{}

var (
	_ plugins.Plugin               = Plugin{}
	_ plugins.MetadataSchemaPlugin = Plugin{}
	_ plugins.RewritePhase         = (*instance)(nil)
	_ plugins.HeaderFilterPhase    = (*instance)(nil)
)

// Schema implements plugins.Plugin.
func (Plugin) Schema() []byte { return schema }

// MetadataSchema implements plugins.MetadataSchemaPlugin: APISIX's
// metadata_schema, named origin lists.
func (Plugin) MetadataSchema() []byte { return metadataSchema }

// ErrCredentialWildcard is APISIX's refusal of a "*" beside
// allow_credential, its text as APISIX writes it.
var ErrCredentialWildcard = errors.New("you can not set '*' for other option when 'allow_credential' is true")

// conf is a configuration, with APISIX's defaults.
type conf struct {
	AllowOrigins              string   `json:"allow_origins"`
	AllowMethods              string   `json:"allow_methods"`
	AllowHeaders              string   `json:"allow_headers"`
	ExposeHeaders             *string  `json:"expose_headers"`
	MaxAge                    int64    `json:"max_age"`
	AllowCredential           bool     `json:"allow_credential"`
	AllowOriginsByRegex       []string `json:"allow_origins_by_regex"`
	AllowOriginsByMetadata    []string `json:"allow_origins_by_metadata"`
	TimingAllowOrigins        *string  `json:"timing_allow_origins"`
	TimingAllowOriginsByRegex []string `json:"timing_allow_origins_by_regex"`
}

func decode(raw json.RawMessage) (conf, error) {
	c := conf{AllowOrigins: "*", AllowMethods: "*", AllowHeaders: "*", MaxAge: 5}
	err := json.Unmarshal(raw, &c)
	return c, err
}

// Check implements plugins.Plugin: APISIX's refusal of "*" with
// allow_credential, and the regular expressions, which must compile.
func (Plugin) Check(raw json.RawMessage) error {
	c, err := decode(raw)
	if err != nil {
		return err
	}
	if c.AllowCredential && (c.AllowOrigins == "*" || c.AllowMethods == "*" || c.AllowHeaders == "*" ||
		c.ExposeHeaders != nil && *c.ExposeHeaders == "*" || c.TimingAllowOrigins != nil && *c.TimingAllowOrigins == "*") {
		return ErrCredentialWildcard
	}
	if _, err := compileRules(c.AllowOriginsByRegex); err != nil {
		return err
	}
	_, err = compileRules(c.TimingAllowOriginsByRegex)
	return err
}

// compileRules compiles regular expressions as one alternation, as APISIX
// joins them with "|"; nil for none. Each must compile on its own.
func compileRules(rules []string) (*regexp.Regexp, error) {
	if len(rules) == 0 {
		return nil, nil
	}
	var all strings.Builder
	for i, r := range rules {
		if _, err := regexp.Compile(r); err != nil {
			return nil, err
		}
		if i > 0 {
			all.WriteByte('|')
		}
		all.WriteString("(?:" + r + ")")
	}
	return regexp.Compile(all.String())
}

// origins is an allow_origins (or timing_allow_origins) value, compiled:
// "**", a list of several (set), or one value (one, "*" included).
type origins struct {
	force bool
	set   map[string]bool
	one   []byte
}

func compileOrigins(s string) origins {
	switch {
	case s == "**":
		return origins{force: true}
	case strings.IndexByte(s, ',') >= 0:
		o := origins{set: map[string]bool{}}
		for _, v := range strings.Split(s, ",") {
			if v != "" {
				o.set[v] = true
			}
		}
		return o
	}
	return origins{one: []byte(s)}
}

var star = []byte("*")

// allow is process_with_allow_origins: the origin to allow for a request
// whose Origin is req (has: the request has one), ok false for none. A
// "**" allows the request's origin (or "*" without one), a list the
// request's origin when it is in the list, one value that value.
func (o *origins) allow(req []byte, has bool) ([]byte, bool) {
	switch {
	case o.force:
		if !has {
			return star, true
		}
		if bytes.IndexByte(req, ',') >= 0 {
			// "**" stands for the request's origin, which is then a
			// list that holds no origin of its own text.
			return nil, false
		}
		return req, true
	case o.set != nil:
		if has && o.set[string(req)] {
			return req, true
		}
		return nil, false
	}
	return o.one, true
}

// matches is match_origins: the allowed origin is the request's or "*";
// with none on either side it matches too, as Lua's nil == nil.
func matches(req []byte, has bool, allowed []byte, ok bool) bool {
	if !ok {
		return !has
	}
	return has && bytes.Equal(req, allowed) || bytes.Equal(allowed, star)
}

// allMethods is what allow_methods "**" stands for.
var allMethods = []byte("GET,POST,PUT,DELETE,PATCH,HEAD,OPTIONS,CONNECT,TRACE")

// Build implements plugins.Plugin: the values, the regular expressions
// and the metadata's origin lists the configuration names, compiled.
func (Plugin) Build(raw json.RawMessage, env plugins.Env) (plugins.Instance, error) {
	c, err := decode(raw)
	if err != nil {
		return nil, err
	}
	in := &instance{
		origins:      compileOrigins(c.AllowOrigins),
		vary:         c.AllowOrigins != "*",
		methods:      []byte(c.AllowMethods),
		headers:      []byte(c.AllowHeaders),
		forceHeaders: c.AllowHeaders == "**",
		maxAge:       strconv.AppendInt(nil, c.MaxAge, 10),
		credential:   c.AllowCredential,
		byMetadata:   c.AllowOriginsByMetadata != nil,
	}
	if c.AllowMethods == "**" {
		in.methods = allMethods
	}
	if c.ExposeHeaders != nil && *c.ExposeHeaders != "" {
		in.expose = []byte(*c.ExposeHeaders)
	}
	if in.regex, err = compileRules(c.AllowOriginsByRegex); err != nil {
		return nil, err
	}
	if in.timingRegex, err = compileRules(c.TimingAllowOriginsByRegex); err != nil {
		return nil, err
	}
	if c.TimingAllowOrigins != nil {
		t := compileOrigins(*c.TimingAllowOrigins)
		in.timing = &t
	}
	if in.byMetadata {
		var md struct {
			AllowOrigins map[string]string `json:"allow_origins"`
		}
		if raw := env.Metadata.Of(Name); raw != nil {
			if err := json.Unmarshal(raw, &md); err != nil {
				return nil, err
			}
		}
		for _, k := range c.AllowOriginsByMetadata {
			if v, ok := md.AllowOrigins[k]; ok {
				in.metadata = append(in.metadata, compileOrigins(v))
			}
		}
	}
	return in, nil
}

// instance is one configuration, built; it is only read on the request
// path, and safe for use by every event loop.
type instance struct {
	origins      origins
	vary         bool // allow_origins is not "*": Vary: Origin
	methods      []byte
	headers      []byte
	forceHeaders bool // allow_headers "**": the request's own
	expose       []byte
	maxAge       []byte
	credential   bool
	regex        *regexp.Regexp // allow_origins_by_regex; nil for none
	byMetadata   bool
	metadata     []origins // the metadata's lists allow_origins_by_metadata names, in its order
	timing       *origins  // timing_allow_origins; nil for none
	timingRegex  *regexp.Regexp
}

var (
	methodOptions = []byte("OPTIONS")
	empty         = []byte{}
	originVary    = []byte("Origin")
	credTrue      = []byte("true")
)

// Rewrite implements plugins.RewritePhase: a preflight (any OPTIONS
// request) is answered 200 with an empty body, the headers added by
// HeaderFilter.
func (in *instance) Rewrite(c plugins.Ctx) {
	if bytes.Equal(c.Method(), methodOptions) {
		c.Exit(200, empty)
	}
}

// byRegex is process_with_allow_origins_by_regex: the request's origin
// when re matches it.
func byRegex(re *regexp.Regexp, req []byte, has bool) ([]byte, bool) {
	if has && re.Match(req) {
		return req, true
	}
	return nil, false
}

// fromMetadata is process_with_allow_origins_by_metadata: the request's
// origin when one of the metadata's lists allows it.
func (in *instance) fromMetadata(req []byte, has bool) ([]byte, bool) {
	if !in.byMetadata {
		return nil, false
	}
	for i := range in.metadata {
		if a, ok := in.metadata[i].allow(req, has); matches(req, has, a, ok) {
			return req, has
		}
	}
	return nil, false
}

// HeaderFilter implements plugins.HeaderFilterPhase: the CORS headers, on
// every response of the route (the upstream's, the preflight's, another
// plugin's answer), when the request's origin is allowed, in cors.lua's
// order of precedence: the metadata's lists, then allow_origins_by_regex
// or else allow_origins, then the metadata's lists again.
func (in *instance) HeaderFilter(c plugins.Ctx) {
	req := c.Header("Origin")
	has := req != nil
	var allowed []byte
	ok, local := false, true
	if in.byMetadata {
		allowed, ok = in.fromMetadata(req, has)
		local = !matches(req, has, allowed, ok) && in.vary
	}
	if local {
		if in.regex == nil {
			allowed, ok = in.origins.allow(req, has)
		} else {
			allowed, ok = byRegex(in.regex, req, has)
		}
	}
	if !matches(req, has, allowed, ok) {
		allowed, ok = in.fromMetadata(req, has)
	}
	if in.vary {
		c.AddResponseHeader("Vary", originVary)
	}
	if ok {
		c.SetResponseHeader("Access-Control-Allow-Origin", allowed)
		c.SetResponseHeader("Access-Control-Allow-Methods", in.methods)
		c.SetResponseHeader("Access-Control-Max-Age", in.maxAge)
		if in.expose != nil {
			c.SetResponseHeader("Access-Control-Expose-Headers", in.expose)
		}
		switch {
		case !in.forceHeaders:
			c.SetResponseHeader("Access-Control-Allow-Headers", in.headers)
		default:
			if h := c.Header("Access-Control-Request-Headers"); h != nil {
				c.SetResponseHeader("Access-Control-Allow-Headers", h)
			}
		}
		if in.credential {
			c.SetResponseHeader("Access-Control-Allow-Credentials", credTrue)
		}
	}
	var timing []byte
	tok := false
	switch {
	case in.timingRegex != nil:
		timing, tok = byRegex(in.timingRegex, req, has)
	case in.timing != nil:
		timing, tok = in.timing.allow(req, has)
	}
	if tok && matches(req, has, timing, tok) {
		c.SetResponseHeader("Timing-Allow-Origin", timing)
	}
}
