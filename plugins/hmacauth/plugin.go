package hmacauth

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	_ "embed"
	"encoding/base64"
	"encoding/json"
	"hash"
	"strconv"
	"unsafe"

	"coregate/httpvar"
	"coregate/plugins"
)

// Name is the plugin's wire name.
const Name = "hmac-auth"

var (
	//go:embed schema.json
	schema []byte
	//go:embed consumer_schema.json
	consumerSchema []byte
)

func init() { plugins.Register(Name, Plugin{}) }

// Plugin is hmac-auth's implementation; its zero value is ready.
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
// a credential's configuration, {"key_id": "...", "secret_key": "..."}.
func (Plugin) ConsumerSchema() []byte { return consumerSchema }

// Check implements plugins.Plugin: the schema says it all.
func (Plugin) Check(raw json.RawMessage) error {
	_, err := parse(raw)
	return err
}

// credential is a consumer's configuration.
type credential struct {
	KeyID     string `json:"key_id"`
	SecretKey string `json:"secret_key"`
}

// Credential implements plugins.CredentialPlugin: a consumer is found by
// its key_id.
func (Plugin) Credential(raw json.RawMessage) (string, error) {
	var c credential
	err := json.Unmarshal(raw, &c)
	return c.KeyID, err
}

// secret is a consumer's secret_key, as the request path signs with it.
type secret []byte

// CredentialData implements plugins.CredentialDataPlugin: the consumer's
// secret_key (a secret, read only).
func (Plugin) CredentialData(raw json.RawMessage) (any, error) {
	var c credential
	if err := json.Unmarshal(raw, &c); err != nil {
		return nil, err
	}
	return secret(c.SecretKey), nil
}

// conf is a route's configuration, with APISIX's defaults.
type conf struct {
	AllowedAlgorithms   []string `json:"allowed_algorithms"`
	ClockSkew           int64    `json:"clock_skew"`
	SignedHeaders       []string `json:"signed_headers"`
	ValidateRequestBody bool     `json:"validate_request_body"`
	MaxReqBodySize      int64    `json:"max_req_body_size"`
	HideCredentials     bool     `json:"hide_credentials"`
	Realm               string   `json:"realm"`
	AnonymousConsumer   string   `json:"anonymous_consumer"`
}

func parse(raw json.RawMessage) (conf, error) {
	c := conf{
		AllowedAlgorithms: []string{"hmac-sha1", "hmac-sha256", "hmac-sha512"},
		ClockSkew:         300,
		SignedHeaders:     []string{"date"},
		MaxReqBodySize:    64 << 20,
		Realm:             "hmac",
	}
	err := json.Unmarshal(raw, &c)
	return c, err
}

// The algorithms, as indexes of instance.hashes.
const (
	algSHA1 = iota
	algSHA256
	algSHA512
	numAlgs
)

var algNames = [numAlgs]string{"hmac-sha1", "hmac-sha256", "hmac-sha512"}

// Build implements plugins.Plugin. The instance keeps env.Consumers, the
// consumers of the snapshot it is built for.
func (Plugin) Build(raw json.RawMessage, env plugins.Env) (plugins.Instance, error) {
	c, err := parse(raw)
	if err != nil {
		return nil, err
	}
	in := &instance{
		skew:      c.ClockSkew,
		signed:    c.SignedHeaders,
		challenge: []byte(`hmac realm="` + c.Realm + `"`),
		hide:      c.HideCredentials,
		anonymous: c.AnonymousConsumer,
		consumers: env.Consumers,
		hashes:    [numAlgs]hash.Hash{sha1.New(), sha256.New(), sha512.New()},
		uri:       httpvar.Parse("request_uri"),
		signing:   make([]byte, 0, 256),
		headers:   make([][]byte, 0, 8),
	}
	for _, a := range c.AllowedAlgorithms {
		for i, n := range algNames {
			if a == n {
				in.allowed[i] = true
			}
		}
	}
	if c.ValidateRequestBody {
		in.bodyMax = c.MaxReqBodySize
		in.bodyHash = sha256.New()
		return &bodyInstance{in}, nil
	}
	return in, nil
}

// bodyInstance is a route's hmac-auth with validate_request_body: a
// plugins.BodyReader, so that the worker reads the body before the
// rewrite phase.
type bodyInstance struct{ *instance }

var (
	_ plugins.RewritePhase = (*bodyInstance)(nil)
	_ plugins.BodyReader   = (*bodyInstance)(nil)
)

// BodyLimit implements plugins.BodyReader: max_req_body_size.
func (in *bodyInstance) BodyLimit() int64 { return in.bodyMax }

// APISIX's answers (core.response.exit encodes a table and adds "\n").
var (
	missingAuth  = []byte(`{"message":"client request can't be validated: missing Authorization header"}` + "\n")
	notSignature = []byte(`{"message":"client request can't be validated: Authorization header does not start with 'Signature'"}` + "\n")
	notValidated = []byte(`{"message":"client request can't be validated"}` + "\n")
	invalidUser  = []byte(`{"message":"Invalid user authorization"}` + "\n")
)

// The request headers the plugin reads.
const (
	hdrAuthorization = "Authorization"
	hdrDate          = "Date"
	hdrDigest        = "Digest"
)

// digestPrefix begins the Digest header of a validated body:
// "SHA-256=" and the base64 SHA-256 of the body.
const digestPrefix = "SHA-256="

// instance is one route's hmac-auth. It runs on one event loop, one
// request at a time: its hashes and scratch buffers are reused by every
// request, their contents valid until the next Rewrite call (the Ctx
// copies what it is given), so that a request allocates nothing once
// they have grown.
type instance struct {
	allowed   [numAlgs]bool
	skew      int64 // seconds
	signed    []string
	challenge []byte // the WWW-Authenticate value
	hide      bool
	anonymous string
	consumers plugins.Consumers // nil: the snapshot has no consumers
	uri       httpvar.Var       // $request_uri

	hashes  [numAlgs]hash.Hash
	pad     [sha512.BlockSize]byte
	keySum  [sha512.Size]byte
	inner   [sha512.Size]byte
	outer   [sha512.Size]byte
	sig     [sha512.Size + 3]byte // the request's signature, decoded
	signing []byte                // the signing string
	headers [][]byte              // the Authorization header's headers="…"
	dashed  []byte                // a header name with '-' for '_' (header)
	user    []byte                // AttachConsumer's buffer

	// validate_request_body: bodyMax is max_req_body_size (0 when the
	// body is not validated), bodyHash the SHA-256 of the bodies and
	// digest the Digest value expected.
	bodyMax  int64
	bodyHash hash.Hash
	bodySum  [sha256.Size]byte
	digest   [len(digestPrefix) + (sha256.Size+2)/3*4]byte
}

// Rewrite implements plugins.RewritePhase, as hmac-auth.lua's rewrite.
func (in *instance) Rewrite(c plugins.Ctx) {
	f, msg, status := in.find(c)
	if status != 0 {
		// A definite status (413: the body is over max_req_body_size),
		// answered as it is, before any anonymous consumer.
		c.Exit(status, msg)
		return
	}
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

// params are the Authorization header's fields (nil: absent), slices of
// the header.
type params struct {
	keyID, algorithm, signature []byte
}

// find is hmac-auth.lua's find_consumer and validate: the consumer whose
// secret signed the request, or no consumer and the message to answer
// with, and a status other than 0 when it is not 401's. The checks run in
// APISIX's order; the reasons APISIX logs are not told to the client, as
// in APISIX.
func (in *instance) find(c plugins.Ctx) (plugins.Found, []byte, int) {
	f, msg := in.validate(c)
	if f.Consumer == nil || in.bodyMax == 0 {
		return f, msg, 0
	}
	// validate_request_body, once the signature is good.
	digest := c.Header(hdrDigest)
	if digest == nil {
		return plugins.Found{}, notValidated, 0 // "Invalid digest"
	}
	body := c.RequestBody()
	if n := int64(len(body)); n > in.bodyMax {
		return plugins.Found{}, tooLarge(n, in.bodyMax), 413
	}
	if !bytes.Equal(digest, in.bodyDigest(body)) {
		return plugins.Found{}, notValidated, 0 // "Invalid digest"
	}
	return f, nil, 0
}

// tooLarge is get_body's refusal of a body over max_req_body_size, as
// hmac-auth answers it. It allocates: a body that large is refused once.
func tooLarge(n, max int64) []byte {
	return []byte(`{"message":"request size ` + strconv.FormatInt(n, 10) + ` is greater than the maximum size ` +
		strconv.FormatInt(max, 10) + ` allowed"}` + "\n")
}

// bodyDigest is the Digest header body signs as: "SHA-256=" and the
// base64 SHA-256 of body, in in.digest, valid until the next call.
func (in *instance) bodyDigest(body []byte) []byte {
	h := in.bodyHash
	h.Reset()
	h.Write(body)
	sum := h.Sum(in.bodySum[:0])
	d := in.digest[:]
	copy(d, digestPrefix)
	base64.StdEncoding.Encode(d[len(digestPrefix):], sum)
	return d
}

// validate is find without validate_request_body.
func (in *instance) validate(c plugins.Ctx) (plugins.Found, []byte) {
	auth := c.Header(hdrAuthorization)
	if auth == nil {
		return plugins.Found{}, missingAuth
	}
	const scheme = "Signature"
	if len(auth) < len(scheme) || string(auth[:len(scheme)]) != scheme {
		return plugins.Found{}, notSignature
	}
	p := in.fields(auth[len(scheme):])
	if p.keyID == nil || p.signature == nil || p.algorithm == nil {
		return plugins.Found{}, notValidated
	}
	var f plugins.Found
	if in.consumers != nil {
		f = in.consumers.Find(Name, p.keyID)
	}
	key, _ := f.Data.(secret)
	if f.Consumer == nil {
		return plugins.Found{}, notValidated // "Invalid key_id"
	}
	alg := -1
	for i, n := range algNames {
		if in.allowed[i] && string(p.algorithm) == n {
			alg = i
		}
	}
	if alg < 0 {
		return plugins.Found{}, notValidated // "Invalid algorithm"
	}
	date := c.Header(hdrDate)
	if date == nil {
		return plugins.Found{}, notValidated // "Date header missing. failed to validate clock skew"
	}
	t, ok := parseHTTPTime(date)
	if !ok {
		return plugins.Found{}, notValidated // "Invalid GMT format time"
	}
	if d := c.Now()/1e9 - t; d > in.skew || -d > in.skew {
		return plugins.Found{}, notValidated // "Clock skew exceeded"
	}
	for _, h := range in.signed {
		if !in.listed(h) {
			return plugins.Found{}, notValidated // `expected header "h" missing in signing`
		}
	}
	got, ok := in.decodeSignature(p.signature)
	if !ok || !hmac.Equal(got, in.sign(c, alg, key, p.keyID)) {
		return plugins.Found{}, notValidated // "Invalid signature"
	}
	return f, nil
}

// listed reports whether the headers="…" field names h, exactly.
func (in *instance) listed(h string) bool {
	for _, l := range in.headers {
		if string(l) == h {
			return true
		}
	}
	return false
}

// fields is retrieve_hmac_fields: the Authorization header's fields after
// its scheme, split at each ',', each read as Lua's unanchored
// `%s*(%w+)="(.-)"`; keyId, algorithm, signature and headers are kept (a
// later one of a name replaces an earlier), headers split at each ' '
// into in.headers. The result points into auth.
func (in *instance) fields(auth []byte) params {
	var p params
	in.headers = in.headers[:0]
	for len(auth) > 0 {
		field := auth
		if i := bytes.IndexByte(auth, ','); i >= 0 {
			field, auth = auth[:i], auth[i+1:]
		} else {
			auth = nil
		}
		key, value, ok := matchField(field)
		if !ok {
			continue
		}
		switch string(key) {
		case "keyId":
			p.keyID = value
		case "algorithm":
			p.algorithm = value
		case "signature":
			p.signature = value
		case "headers":
			in.headers = in.headers[:0]
			for {
				i := bytes.IndexByte(value, ' ')
				if i < 0 {
					in.headers = append(in.headers, value)
					break
				}
				in.headers = append(in.headers, value[:i])
				value = value[i+1:]
			}
		}
	}
	return p
}

// matchField is string.match(field, '%s*(%w+)="(.-)"'): the first
// position from which white space, a run of letters and digits, '="',
// and bytes up to the next '"' follow. value is never nil when ok.
//
// It takes time linear in len(field), where the pattern tried from each
// position in turn takes quadratic time on a run of letters or of white
// space: a start within the run that failed ends the same run at the same
// place and fails too, so the next try starts after it; and once no '"'
// closes a value, none will from a later start.
func matchField(field []byte) (key, value []byte, ok bool) {
	for start := 0; start < len(field); {
		i := start
		for i < len(field) && isSpace(field[i]) {
			i++
		}
		j := i
		for j < len(field) && isAlnum(field[j]) {
			j++
		}
		if j == i || j+1 >= len(field) || field[j] != '=' || field[j+1] != '"' {
			start = max(start+1, j)
			continue
		}
		q := bytes.IndexByte(field[j+2:], '"')
		if q < 0 {
			break
		}
		return field[i:j], field[j+2 : j+2+q : j+2+q], true
	}
	return nil, nil, false
}

// decodeSignature is ngx.decode_base64 of the signature into in.sig: the
// standard alphabet up to the first '=', what follows ignored; false when
// it does not decode or is longer than any HMAC.
func (in *instance) decodeSignature(s []byte) ([]byte, bool) {
	for i, b := range s {
		if b == '=' {
			s = s[:i]
			break
		}
		if !isBase64(b) {
			return nil, false
		}
	}
	if len(s)%4 == 1 || base64.RawStdEncoding.DecodedLen(len(s)) > len(in.sig) {
		return nil, false
	}
	n, err := base64.RawStdEncoding.Decode(in.sig[:], s)
	if err != nil {
		return nil, false
	}
	return in.sig[:n], true
}

// sign is generate_signature: the HMAC, with the consumer's key, of the
// signing string: the keyId, then for each header the request has of the
// headers="…" field "name: value" (its first value), or for
// "@request-target" that the request lacks "METHOD request_uri", each
// followed by "\n". The result is in.outer, valid until the next call.
func (in *instance) sign(c plugins.Ctx, alg int, key, keyID []byte) []byte {
	s := append(in.signing[:0], keyID...)
	s = append(s, '\n')
	for _, h := range in.headers {
		if len(h) == 0 {
			continue
		}
		if v := in.header(c, h); v != nil {
			s = append(s, h...)
			s = append(s, ": "...)
			s = append(s, v...)
			s = append(s, '\n')
		} else if string(h) == "@request-target" {
			uri := c.Var(in.uri)
			if len(uri) == 0 {
				uri = slash
			}
			s = append(s, c.Method()...)
			s = append(s, ' ')
			s = append(s, uri...)
			s = append(s, '\n')
		}
	}
	in.signing = s
	return in.mac(alg, key, s)
}

var slash = []byte("/")

// header is core.request.header(ctx, h): the request header h, compared
// case-insensitively, or else, as ngx.req.get_headers() finds a name with
// '_', the header whose name has '-' in their place; nil when neither.
func (in *instance) header(c plugins.Ctx, h []byte) []byte {
	// Header does not keep its argument: the string is only compared,
	// and h and in.dashed outlive the call.
	if v := c.Header(unsafe.String(&h[0], len(h))); v != nil || bytes.IndexByte(h, '_') < 0 {
		return v
	}
	in.dashed = append(in.dashed[:0], h...)
	for i, b := range in.dashed {
		if b == '_' {
			in.dashed[i] = '-'
		}
	}
	return c.Header(unsafe.String(&in.dashed[0], len(in.dashed)))
}

// mac is HMAC (RFC 2104) with the instance's hash of alg, written out so
// that the hash and its buffers are reused: crypto/hmac allocates a new
// one for each key.
func (in *instance) mac(alg int, key, msg []byte) []byte {
	h := in.hashes[alg]
	bs := h.BlockSize()
	if len(key) > bs {
		h.Reset()
		h.Write(key)
		key = h.Sum(in.keySum[:0])
	}
	pad := in.pad[:bs]
	clear(pad)
	copy(pad, key)
	for i := range pad {
		pad[i] ^= 0x36
	}
	h.Reset()
	h.Write(pad)
	h.Write(msg)
	inner := h.Sum(in.inner[:0])
	for i := range pad {
		pad[i] ^= 0x36 ^ 0x5c
	}
	h.Reset()
	h.Write(pad)
	h.Write(inner)
	return h.Sum(in.outer[:0])
}

// isSpace is Lua's %s (C's isspace).
func isSpace(b byte) bool {
	return b == ' ' || b == '\t' || b == '\n' || b == '\v' || b == '\f' || b == '\r'
}

// isAlnum is Lua's %w (C's isalnum).
func isAlnum(b byte) bool {
	return 'A' <= b && b <= 'Z' || 'a' <= b && b <= 'z' || '0' <= b && b <= '9'
}

func isBase64(b byte) bool {
	return isAlnum(b) || b == '+' || b == '/'
}
