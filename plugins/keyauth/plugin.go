package keyauth

import (
	_ "embed"
	"encoding/json"
	"strings"

	"coregate/plugins"
	"coregate/plugins/internal/uriargs"
)

// Name is the plugin's wire name.
const Name = "key-auth"

var (
	//go:embed schema.json
	schema []byte
	//go:embed consumer_schema.json
	consumerSchema []byte
)

func init() { plugins.Register(Name, Plugin{}) }

// Plugin is key-auth's implementation; its zero value is ready.
type Plugin struct{}

var (
	_ plugins.Plugin               = Plugin{}
	_ plugins.ConsumerSchemaPlugin = Plugin{}
	_ plugins.CredentialPlugin     = Plugin{}
	_ plugins.RewritePhase         = (*instance)(nil)
)

// Schema implements plugins.Plugin: the route's configuration.
func (Plugin) Schema() []byte { return schema }

// ConsumerSchema implements plugins.ConsumerSchemaPlugin: a consumer's or
// a credential's configuration, {"key": "..."}.
func (Plugin) ConsumerSchema() []byte { return consumerSchema }

// Check implements plugins.Plugin: the schema says it all.
func (Plugin) Check(json.RawMessage) error { return nil }

// Credential implements plugins.CredentialPlugin: a consumer's key.
func (Plugin) Credential(raw json.RawMessage) (string, error) {
	var c struct {
		Key string `json:"key"`
	}
	err := json.Unmarshal(raw, &c)
	return c.Key, err
}

// conf is a route's configuration, with APISIX's defaults.
type conf struct {
	Header            string `json:"header"`
	Query             string `json:"query"`
	Realm             string `json:"realm"`
	HideCredentials   bool   `json:"hide_credentials"`
	AnonymousConsumer string `json:"anonymous_consumer"`
}

// Build implements plugins.Plugin. The instance keeps env.Consumers, the
// consumers of the snapshot it is built for.
func (Plugin) Build(raw json.RawMessage, env plugins.Env) (plugins.Instance, error) {
	c := conf{Header: "apikey", Query: "apikey", Realm: "key"}
	if err := json.Unmarshal(raw, &c); err != nil {
		return nil, err
	}
	return &instance{
		// The header is looked up as ngx.req.get_headers() finds it:
		// case-insensitively, '_' standing for '-'.
		header:    strings.ReplaceAll(c.Header, "_", "-"),
		query:     c.Query,
		challenge: []byte(`apikey realm="` + c.Realm + `"`),
		hide:      c.HideCredentials,
		anonymous: c.AnonymousConsumer,
		consumers: env.Consumers,
	}, nil
}

// APISIX's answers (core.response.exit encodes a table and adds "\n").
var (
	missingKey  = []byte(`{"message":"Missing API key in request"}` + "\n")
	invalidKey  = []byte(`{"message":"Invalid API key in request"}` + "\n")
	invalidUser = []byte(`{"message":"Invalid user authorization"}` + "\n")
)

// instance is one route's key-auth. It runs on one event loop, one
// request at a time; args and user are scratch buffers whose contents
// live until the next Rewrite call (the Ctx copies what it is given),
// reused so that a request allocates nothing once they have grown.
type instance struct {
	header    string
	query     string
	challenge []byte // the WWW-Authenticate value
	hide      bool
	anonymous string
	consumers plugins.Consumers // nil: the snapshot has no consumers

	args uriargs.Scratch // the query argument's value, the target without it
	user []byte          // AttachConsumer's buffer
}

// Rewrite implements plugins.RewritePhase, as key-auth.lua's rewrite.
func (in *instance) Rewrite(c plugins.Ctx) {
	f, msg := in.find(c)
	k, customID := f.Consumer, ""
	if k != nil {
		customID = k.CustomID
	} else {
		if in.anonymous == "" {
			c.SetResponseHeader("WWW-Authenticate", in.challenge)
			c.Exit(401, msg)
			return
		}
		// A credential that failed does not go upstream with the
		// anonymous consumer's request either, wherever it was.
		if in.hide {
			if c.Header(in.header) != nil {
				c.SetRequestHeader(in.header, nil)
			}
			if n, _ := in.arg(c.Query()); n > 0 {
				in.dropArg(c)
			}
		}
		if in.consumers != nil {
			k = in.consumers.ByName(in.anonymous)
		}
		if k == nil {
			c.SetResponseHeader("WWW-Authenticate", in.challenge)
			c.Exit(401, invalidUser)
			return
		}
	}
	// attach_consumer: the upstream learns who the consumer is, by which
	// credential object, and its custom_id (an anonymous consumer's is
	// not told, as in APISIX); a client cannot claim any of them.
	in.user = plugins.AttachConsumer(c, k, f.CredentialID, customID, in.user)
}

// find is key-auth.lua's find_consumer: the consumer of the request's key,
// or no consumer and the message to answer with.
func (in *instance) find(c plugins.Ctx) (plugins.Found, []byte) {
	key := c.Header(in.header)
	fromHeader := key != nil
	if !fromHeader {
		n, v := in.arg(c.Query())
		switch {
		case n == 0:
			return plugins.Found{}, missingKey
		case n > 1 || v == nil:
			// ngx.req.get_uri_args gives a table for a repeated
			// argument and true for one without '=': no consumer has
			// either as its key.
			return plugins.Found{}, invalidKey
		}
		key = v
	}
	// An empty key ("apikey:", "?apikey=") is a key no consumer has: the
	// consumer schema refuses one, and none is looked up.
	if len(key) == 0 || in.consumers == nil {
		return plugins.Found{}, invalidKey
	}
	f := in.consumers.Find(Name, key)
	if f.Consumer == nil {
		return plugins.Found{}, invalidKey
	}
	if in.hide {
		if fromHeader {
			c.SetRequestHeader(in.header, nil)
		} else {
			in.dropArg(c)
		}
	}
	return f, nil
}

// arg finds the query argument in.query as ngx.req.get_uri_args does
// (uriargs.Scratch.Arg): n is how many times it occurs, v the last
// occurrence's value, valid until the next call, nil when it has no '='.
func (in *instance) arg(q []byte) (n int, v []byte) { return in.args.Arg(q, in.query) }

// dropArg sends the request upstream without the query argument in.query,
// every occurrence of it; the other arguments keep their bytes and order.
func (in *instance) dropArg(c plugins.Ctx) {
	c.SetUpstreamURI(in.args.Without(c.Path(), c.Query(), in.query))
}
