package basicauth

import (
	"crypto/sha256"
	"crypto/subtle"
	_ "embed"
	"encoding/base64"
	"encoding/json"

	"coregate/plugins"
)

// Name is the plugin's wire name.
const Name = "basic-auth"

var (
	//go:embed schema.json
	schema []byte
	//go:embed consumer_schema.json
	consumerSchema []byte
)

func init() { plugins.Register(Name, Plugin{}) }

// Plugin is basic-auth's implementation; its zero value is ready.
type Plugin struct{}

var (
	_ plugins.Plugin               = Plugin{}
	_ plugins.ConsumerSchemaPlugin = Plugin{}
	_ plugins.CredentialDataPlugin = Plugin{}
	_ plugins.RewritePhase         = (*instance)(nil)
)

// Schema implements plugins.Plugin: the route's configuration.
func (Plugin) Schema() []byte { return schema }

// ConsumerSchema implements plugins.ConsumerSchemaPlugin: a consumer's or
// a credential's configuration, {"username": "...", "password": "..."}.
func (Plugin) ConsumerSchema() []byte { return consumerSchema }

// Check implements plugins.Plugin: the schema says it all.
func (Plugin) Check(json.RawMessage) error { return nil }

// credential is a consumer's configuration.
type credential struct {
	Username string `json:"username"`
	Password string `json:"password"`
}

// Credential implements plugins.CredentialPlugin: a consumer is found by
// its username.
func (Plugin) Credential(raw json.RawMessage) (string, error) {
	var c credential
	err := json.Unmarshal(raw, &c)
	return c.Username, err
}

// digest is a consumer's password as the request path compares it: its
// SHA-256, so that the comparison takes the same time whatever the
// lengths and contents of the two passwords.
type digest [sha256.Size]byte

// CredentialData implements plugins.CredentialDataPlugin: the digest of
// the consumer's password (a *digest, read only).
func (Plugin) CredentialData(raw json.RawMessage) (any, error) {
	var c credential
	if err := json.Unmarshal(raw, &c); err != nil {
		return nil, err
	}
	d := digest(sha256.Sum256([]byte(c.Password)))
	return &d, nil
}

// conf is a route's configuration, with APISIX's defaults.
type conf struct {
	HideCredentials   bool   `json:"hide_credentials"`
	Realm             string `json:"realm"`
	AnonymousConsumer string `json:"anonymous_consumer"`
}

// Build implements plugins.Plugin. The instance keeps env.Consumers, the
// consumers of the snapshot it is built for.
func (Plugin) Build(raw json.RawMessage, env plugins.Env) (plugins.Instance, error) {
	c := conf{Realm: "basic"}
	if err := json.Unmarshal(raw, &c); err != nil {
		return nil, err
	}
	return &instance{
		challenge: []byte(`Basic realm="` + c.Realm + `"`),
		hide:      c.HideCredentials,
		anonymous: c.AnonymousConsumer,
		consumers: env.Consumers,
		decoded:   make([]byte, 0, 128),
	}, nil
}

// APISIX's answers (core.response.exit encodes a table and adds "\n").
var (
	missingAuth = []byte(`{"message":"Missing authorization in request"}` + "\n")
	invalidAuth = []byte(`{"message":"Invalid authorization in request"}` + "\n")
	invalidUser = []byte(`{"message":"Invalid user authorization"}` + "\n")
)

const hdrAuthorization = "Authorization"

// instance is one route's basic-auth. It runs on one event loop, one
// request at a time; decoded and user are scratch buffers whose contents
// live until the next Rewrite call (the Ctx copies what it is given),
// reused so that a request allocates nothing once they have grown.
type instance struct {
	challenge []byte // the WWW-Authenticate value
	hide      bool
	anonymous string
	consumers plugins.Consumers // nil: the snapshot has no consumers

	decoded []byte // the Authorization header's credentials, decoded
	user    []byte // AttachConsumer's buffer
}

// Rewrite implements plugins.RewritePhase, as basic-auth.lua's rewrite.
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
		if in.consumers != nil {
			k = in.consumers.ByName(in.anonymous)
		}
		if k == nil {
			c.SetResponseHeader("WWW-Authenticate", in.challenge)
			c.Exit(401, invalidUser)
			return
		}
	}
	if in.hide {
		c.SetRequestHeader(hdrAuthorization, nil)
	}
	// attach_consumer: the upstream learns who the consumer is, by which
	// credential object, and its custom_id (an anonymous consumer's is
	// not told, as in APISIX); a client cannot claim any of them.
	in.user = plugins.AttachConsumer(c, k, f.CredentialID, customID, in.user)
}

// find is basic-auth.lua's find_consumer: the consumer of the request's
// Authorization header, or no consumer and the message to answer with.
func (in *instance) find(c plugins.Ctx) (plugins.Found, []byte) {
	auth := c.Header(hdrAuthorization)
	if auth == nil {
		return plugins.Found{}, missingAuth
	}
	user, pass, ok := in.extract(auth)
	if !ok {
		return plugins.Found{}, invalidAuth
	}
	var f plugins.Found
	if in.consumers != nil {
		f = in.consumers.Find(Name, user)
	}
	want, _ := f.Data.(*digest)
	// The password is hashed whether or not the user exists, so that
	// the answer takes as long either way.
	got := sha256.Sum256(pass)
	if f.Consumer == nil || want == nil || subtle.ConstantTimeCompare(got[:], want[:]) != 1 {
		return plugins.Found{}, invalidUser
	}
	return f, nil
}

// extract is basic-auth.lua's extract_auth_header: the username and the
// password of an Authorization header, in in.decoded (valid until the next
// call), false when the header is not one APISIX reads. As APISIX's:
//   - the credentials follow the first "basic" (any case) that is followed
//     by a white space and at least one byte, anywhere in the header
//     (ngx.re.match "(?i:basic)\s(.+)", not anchored);
//   - they decode as ngx.decode_base64 does: the standard alphabet up to
//     the first '=', whatever follows it ignored;
//   - the decoded bytes split at each ':', an empty last field dropped
//     (ngx.re.split), and need two fields: the first is the username, the
//     second the password (a password's own ':' and what follows it are
//     lost, as in APISIX), each with its white space removed.
func (in *instance) extract(auth []byte) (user, pass []byte, ok bool) {
	cred := afterScheme(auth)
	if cred == nil {
		return nil, nil, false
	}
	for i, b := range cred {
		if b == '=' {
			cred = cred[:i]
			break
		}
		if !isBase64(b) {
			return nil, nil, false
		}
	}
	if len(cred)%4 == 1 {
		return nil, nil, false
	}
	n := base64.RawStdEncoding.DecodedLen(len(cred))
	if cap(in.decoded) < n {
		in.decoded = make([]byte, 0, n)
	}
	d := in.decoded[:n]
	n, err := base64.RawStdEncoding.Decode(d, cred)
	if err != nil {
		return nil, nil, false
	}
	d = d[:n]
	// The fields: the first two, and whether there are two.
	first, rest, found := cut(d, ':')
	if !found {
		return nil, nil, false
	}
	second, _, found := cut(rest, ':')
	if len(second) == 0 && !found {
		// "user:" is {"user"}: the empty last field is dropped.
		return nil, nil, false
	}
	return stripSpace(first), stripSpace(second), true
}

// afterScheme returns what follows the first case-insensitive "basic" of
// auth that a white space and at least one more byte follow; nil when
// none does.
func afterScheme(auth []byte) []byte {
	const scheme = "basic"
	for i := 0; i+len(scheme)+2 <= len(auth); i++ {
		if isSpace(auth[i+len(scheme)]) && equalFold(auth[i:i+len(scheme)], scheme) {
			return auth[i+len(scheme)+1:]
		}
	}
	return nil
}

// equalFold reports whether b is lower, ASCII letters compared in any
// case.
func equalFold(b []byte, lower string) bool {
	for i := range b {
		if b[i]|0x20 != lower[i] {
			return false
		}
	}
	return true
}

// isSpace is PCRE's \s.
func isSpace(b byte) bool {
	return b == ' ' || b == '\t' || b == '\n' || b == '\v' || b == '\f' || b == '\r'
}

func isBase64(b byte) bool {
	return 'A' <= b && b <= 'Z' || 'a' <= b && b <= 'z' || '0' <= b && b <= '9' || b == '+' || b == '/'
}

// cut splits b at the first sep.
func cut(b []byte, sep byte) (before, after []byte, found bool) {
	for i, ch := range b {
		if ch == sep {
			return b[:i], b[i+1:], true
		}
	}
	return b, nil, false
}

// stripSpace removes every white space byte of b, in place.
func stripSpace(b []byte) []byte {
	out := b[:0]
	for _, ch := range b {
		if !isSpace(ch) {
			out = append(out, ch)
		}
	}
	return out
}
