package jwtauth

import (
	_ "embed"
	"encoding/json"
	"errors"
	"strings"

	"coregate/httpvar"
	"coregate/plugins"
	"coregate/plugins/internal/uriargs"
)

// Name is the plugin's wire name.
const Name = "jwt-auth"

var (
	//go:embed schema.json
	schema []byte
	//go:embed consumer_schema.json
	consumerSchema []byte
)

func init() { plugins.Register(Name, Plugin{}) }

// Plugin is jwt-auth's implementation; its zero value is ready.
type Plugin struct{}

var (
	_ plugins.Plugin               = Plugin{}
	_ plugins.ConsumerCheckPlugin  = Plugin{}
	_ plugins.CredentialDataPlugin = Plugin{}
	_ plugins.RewritePhase         = (*instance)(nil)
)

// Schema implements plugins.Plugin: the route's configuration.
func (Plugin) Schema() []byte { return schema }

// ConsumerSchema implements plugins.ConsumerSchemaPlugin: a consumer's or
// a credential's configuration.
func (Plugin) ConsumerSchema() []byte { return consumerSchema }

// Check implements plugins.Plugin: the schema says it all.
func (Plugin) Check(json.RawMessage) error { return nil }

// CheckConsumer implements plugins.ConsumerCheckPlugin, as jwt-auth.lua's
// check_schema for a consumer: an HS algorithm needs the secret, a
// base64_secret must decode, the others need the public key.
func (Plugin) CheckConsumer(raw json.RawMessage) error {
	c, err := decodeConsumer(raw)
	if err != nil {
		return err
	}
	hs := isHS(c.Algorithm)
	if hs && c.Secret == "" {
		return errors.New(`property "secret" is required when using HS based algorithms`)
	}
	if c.Base64Secret && c.Secret != "" {
		if _, ok := decodeSecret(c.Secret); !ok {
			return errors.New("base64_secret required but the secret is not in base64 format")
		}
	}
	if !hs && c.PublicKey == "" {
		return errors.New("missing valid public key")
	}
	return nil
}

// Credential implements plugins.CredentialPlugin: a consumer is found by
// its key, the value of a token's key claim.
func (Plugin) Credential(raw json.RawMessage) (string, error) {
	c, err := decodeConsumer(raw)
	return c.Key, err
}

// CredentialData implements plugins.CredentialDataPlugin: the consumer's
// algorithm and its verification key, prepared (a *credential).
func (Plugin) CredentialData(raw json.RawMessage) (any, error) {
	c, err := decodeConsumer(raw)
	if err != nil {
		return nil, err
	}
	return newCredential(c)
}

// conf is a route's configuration, with APISIX's defaults.
type conf struct {
	Header            string   `json:"header"`
	Query             string   `json:"query"`
	Cookie            string   `json:"cookie"`
	HideCredentials   bool     `json:"hide_credentials"`
	KeyClaimName      string   `json:"key_claim_name"`
	StoreInCtx        bool     `json:"store_in_ctx"`
	Realm             string   `json:"realm"`
	AnonymousConsumer string   `json:"anonymous_consumer"`
	ClaimsToVerify    []string `json:"claims_to_verify"`
}

// Build implements plugins.Plugin. The instance keeps env.Consumers, the
// consumers of the snapshot it is built for, and the worker's token cache,
// env.Loop's (tokenCache): Build takes its pointer only, and the event
// loop alone reads and writes it.
func (Plugin) Build(raw json.RawMessage, env plugins.Env) (plugins.Instance, error) {
	c := conf{Header: "authorization", Query: "jwt", Cookie: "jwt", KeyClaimName: "key", Realm: "jwt"}
	if err := json.Unmarshal(raw, &c); err != nil {
		return nil, err
	}
	in := &instance{
		// The header is looked up as ngx.req.get_headers() finds it:
		// case-insensitively, '_' standing for '-'.
		header:    strings.ReplaceAll(c.Header, "_", "-"),
		query:     c.Query,
		cookie:    c.Cookie,
		cookieVar: httpvar.Parse("cookie_" + c.Cookie),
		keyClaim:  c.KeyClaimName,
		challenge: []byte(`Bearer realm="` + c.Realm + `"`),
		hide:      c.HideCredentials,
		anonymous: c.AnonymousConsumer,
		consumers: env.Consumers,
	}
	if env.Loop != nil {
		in.cache = env.Loop.Value(Name, func() any { return newTokenCache() }).(*tokenCache)
	} else {
		in.cache = newTokenCache()
	}
	for _, name := range c.ClaimsToVerify {
		switch name {
		case "exp":
			in.requireExp = true
		case "nbf":
			in.requireNbf = true
		}
	}
	return in, nil
}

// APISIX's answers (core.response.exit encodes a table and adds "\n").
var (
	missingToken = []byte(`{"message":"Missing JWT token in request"}` + "\n")
	invalidToken = []byte(`{"message":"JWT token invalid"}` + "\n")
	missingKey   = []byte(`{"message":"missing user key in JWT token"}` + "\n")
	invalidKey   = []byte(`{"message":"Invalid user key in JWT token"}` + "\n")
	failedVerify = []byte(`{"message":"failed to verify jwt"}` + "\n")
	invalidUser  = []byte(`{"message":"Invalid user authorization"}` + "\n")
)

const hdrCookie = "Cookie"

// instance is one route's jwt-auth. It runs on one event loop, one
// request at a time; its scratch buffers (args, tok, vf, cookies, user)
// hold their contents until the next Rewrite call (the Ctx copies what it
// is given), reused so that a request allocates nothing once they have
// grown, HMAC verification included (RSA, ECDSA and EdDSA allocate in
// crypto/*). Its cache of verified tokens (tokenCache) is the worker's,
// shared with the worker's other instances, all run by its one loop.
type instance struct {
	header     string
	query      string
	cookie     string
	cookieVar  httpvar.Var
	keyClaim   string
	challenge  []byte // the WWW-Authenticate value
	hide       bool
	anonymous  string
	requireExp bool // claims_to_verify
	requireNbf bool
	consumers  plugins.Consumers // nil: the snapshot has no consumers

	args    uriargs.Scratch
	tok     scratch
	parsed  token
	vf      verifier
	cookies []byte // the Cookie header without the token's cookie
	user    []byte // AttachConsumer's buffer

	// cache is the tokens that verified (tokenCache), the worker's
	// (Env.Loop's), or the instance's own when built without one;
	// noCache turns it off, for the tests and benchmarks of the uncached
	// path.
	cache   *tokenCache
	noCache bool
}

// Rewrite implements plugins.RewritePhase, as jwt-auth.lua's rewrite.
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
	// attach_consumer: the upstream learns who the consumer is, by which
	// credential object, and its custom_id (an anonymous consumer's is
	// not told, as in APISIX); a client cannot claim any of them.
	in.user = plugins.AttachConsumer(c, k, f.CredentialID, customID, in.user)
}

// find is jwt-auth.lua's find_consumer: the consumer of the request's
// token, or no consumer and the message to answer with. A token that
// verified before, on this route or another of the worker's, is found in
// the cache (tokenCache) when it would verify here as it did there, its
// claims checked against the clock and the instance's claims_to_verify as
// a verification checks them; one that verifies now is kept there.
func (in *instance) find(c plugins.Ctx) (plugins.Found, []byte) {
	tok, ok := in.fetch(c)
	if tok == nil {
		return plugins.Found{}, missingToken
	}
	if !ok {
		return plugins.Found{}, invalidToken
	}
	var h uint64 // tok's hash
	cache := !in.noCache && len(tok) <= cacheMaxToken
	if cache {
		h = in.cache.hash(tok)
		if e := in.cache.get(h, tok, in.keyClaim); e != nil {
			if f, ok := in.current(e); ok {
				if !in.claimsValid(&e.times, e.cr, c.Now()/1e9) {
					// Verified again, it would be refused the
					// same way. The entry stays: another route's
					// claims_to_verify, or a clock set back, may
					// take it.
					return plugins.Found{}, failedVerify
				}
				return f, nil
			}
			// Not what this instance's consumers find: verified
			// against others (an older snapshot's), for good.
			e.drop()
		}
	}
	t := &in.parsed
	if !in.tok.parse(tok, in.keyClaim, t) {
		return plugins.Found{}, invalidToken
	}
	switch t.keyState {
	case absent:
		return plugins.Found{}, missingKey
	case isString:
	default:
		return plugins.Found{}, invalidKey
	}
	var f plugins.Found
	if in.consumers != nil {
		f = in.consumers.Find(Name, t.key)
	}
	cr, _ := f.Data.(*credential)
	if f.Consumer == nil || cr == nil {
		return plugins.Found{}, invalidKey
	}
	// The token's "alg" must be the consumer's algorithm.
	if !t.hasAlg || t.alg == nil || string(t.alg) != cr.alg {
		return plugins.Found{}, failedVerify
	}
	if !in.vf.verify(cr, t.signed, t.sig) {
		return plugins.Found{}, failedVerify
	}
	if !in.claimsValid(&t.times, cr, c.Now()/1e9) {
		return plugins.Found{}, failedVerify
	}
	if cache {
		in.cache.put(h, tok, in.keyClaim, t, f, cr)
	}
	return f, nil
}

// current is what the instance's consumers find now for a cached token's
// key: ok only when it is the consumer and the credential its
// verification found.
func (in *instance) current(e *cacheEntry) (plugins.Found, bool) {
	if in.consumers == nil {
		return plugins.Found{}, false
	}
	f := in.consumers.Find(Name, e.key())
	cr, _ := f.Data.(*credential)
	return f, cr == e.cr && f.Consumer == e.consumer && f.CredentialID == e.credID
}

// claimsValid is the parser's verify_claims: without claims_to_verify,
// exp and nbf are checked when the token has them; with it, those listed
// must be there. Both must be numbers, exp after now and nbf before it,
// give or take the consumer's lifetime_grace_period.
func (in *instance) claimsValid(t *times, cr *credential, now int64) bool {
	check := func(st claim, required bool) bool {
		switch {
		case st == absent:
			return !required
		case st != isNumber:
			return false
		}
		return true
	}
	requireAny := in.requireExp || in.requireNbf
	checkExp := !requireAny || in.requireExp
	checkNbf := !requireAny || in.requireNbf
	if checkExp {
		if !check(t.expState, in.requireExp) {
			return false
		}
		if t.expState == isNumber && !(t.exp > float64(now-cr.grace)) {
			return false
		}
	}
	if checkNbf {
		if !check(t.nbfState, in.requireNbf) {
			return false
		}
		if t.nbfState == isNumber && !(t.nbf < float64(now+cr.grace)) {
			return false
		}
	}
	return true
}

// fetch is jwt-auth.lua's fetch_jwt_token: the token of the header (a
// "Bearer " or "bearer " prefix removed), else of the query argument, else
// of the cookie, taking it out of the request with hide_credentials; nil
// when there is none. ok is false for a query argument given twice or
// without '=', which APISIX cannot read as a token.
func (in *instance) fetch(c plugins.Ctx) (tok []byte, ok bool) {
	if h := c.Header(in.header); h != nil {
		if in.hide {
			c.SetRequestHeader(in.header, nil)
		}
		if len(h) >= 7 && (string(h[:7]) == "Bearer " || string(h[:7]) == "bearer ") {
			h = h[7:]
		}
		return h, true
	}
	if n, v := in.args.Arg(c.Query(), in.query); n > 0 {
		if in.hide {
			c.SetUpstreamURI(in.args.Without(c.Path(), c.Query(), in.query))
		}
		if n > 1 || v == nil {
			return v, false
		}
		return v, true
	}
	v := c.Var(in.cookieVar)
	if v == nil {
		return nil, false
	}
	if in.hide {
		in.cookies = withoutCookie(in.cookies[:0], c.Header(hdrCookie), in.cookie)
		c.SetRequestHeader(hdrCookie, in.cookies)
	}
	return v, true
}

// withoutCookie appends to dst the Cookie header h without the cookie
// name, as jwt-auth.lua's remove_specified_cookie: every name=value whose
// name is of [a-zA-Z0-9-_]* and value of [a-zA-Z0-9-._]*, in order,
// joined with "; ", but those named name; whatever else h holds is lost.
func withoutCookie(dst, h []byte, name string) []byte {
	first := true
	for p := 0; p < len(h); {
		q := p
		for q < len(h) && isCookieName(h[q]) {
			q++
		}
		if q == len(h) || h[q] != '=' {
			p = q + 1
			continue
		}
		e := q + 1
		for e < len(h) && (isCookieName(h[e]) || h[e] == '.') {
			e++
		}
		if string(h[p:q]) != name {
			if !first {
				dst = append(dst, "; "...)
			}
			dst = append(dst, h[p:e]...)
			first = false
		}
		p = e
	}
	return dst
}

func isCookieName(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_'
}
