package proxymirror

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"strings"

	"coregate/httpvar"
	"coregate/plugins"
)

// Name is the plugin's wire name.
const Name = "proxy-mirror"

//go:embed schema.json
var schema []byte

func init() { plugins.Register(Name, Plugin{}) }

// Plugin is proxy-mirror's implementation; its zero value is ready.
type Plugin struct{}

var (
	_ plugins.Plugin       = Plugin{}
	_ plugins.RewritePhase = (*instance)(nil)
	_ plugins.LogPhase     = (*instance)(nil)
	_ plugins.BodyTee      = (*instance)(nil)
)

// Schema implements plugins.Plugin.
func (Plugin) Schema() []byte { return schema }

// ErrGRPC refuses a grpc:// or grpcs:// mirror, which the gateway cannot
// send yet: taken and ignored, the copies would be lost.
var ErrGRPC = errors.New("host: grpc:// and grpcs:// mirrors are not supported yet")

// conf is a configuration, with APISIX's defaults.
type conf struct {
	Host           string  `json:"host"`
	Path           *string `json:"path"`
	PathConcatMode string  `json:"path_concat_mode"`
	SampleRatio    float64 `json:"sample_ratio"`
}

func decode(raw json.RawMessage) (conf, error) {
	c := conf{PathConcatMode: "replace", SampleRatio: 1}
	err := json.Unmarshal(raw, &c)
	return c, err
}

// Check implements plugins.Plugin: the mirror's scheme.
func (Plugin) Check(raw json.RawMessage) error {
	c, err := decode(raw)
	if err != nil {
		return err
	}
	if strings.HasPrefix(c.Host, "grpc") {
		return ErrGRPC
	}
	return nil
}

// Build implements plugins.Plugin.
func (Plugin) Build(raw json.RawMessage, _ plugins.Env) (plugins.Instance, error) {
	c, err := decode(raw)
	if err != nil {
		return nil, err
	}
	in := &instance{
		origin: []byte(c.Host),
		prefix: c.PathConcatMode == "prefix",
		ratio:  c.SampleRatio,
		rnd:    rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64())),
		q:      defaultQueue(),
	}
	if c.Path != nil {
		in.path = []byte(*c.Path)
	}
	return in, nil
}

// The request's variables the mirror's target is made of.
var (
	varURI  = httpvar.Parse("uri")
	varArgs = httpvar.Parse("args")
	varHost = httpvar.Parse("host")
)

// instance is one built configuration. It belongs to one event loop (see
// plugins.Plugin): its random source is used without locks; the queue
// is the process's, safe for concurrent use.
type instance struct {
	origin []byte // scheme://host[:port]
	path   []byte // nil: the request's own
	prefix bool   // path_concat_mode "prefix"
	ratio  float64
	rnd    *rand.Rand
	q      *queue
}

// MaxBody is the longest request body, in bytes, a mirror's copy carries
// (nginx's default client_max_body_size, 1m): the worker copies the
// first MaxBody bytes of a body as it streams upstream, and a request
// whose body is longer is not mirrored. The request itself is not
// limited by it: its body goes upstream whole, whatever its length.
const MaxBody = 1 << 20

// TeeLimit implements plugins.BodyTee: the body is copied, up to MaxBody,
// as it goes upstream.
func (in *instance) TeeLimit() int64 { return MaxBody }

// Rewrite implements plugins.RewritePhase: a sampled request is copied
// (method, target, fields) into a job. A request whose body is known
// whole now (none, or one a BodyReader of the route read) is handed to
// the process's senders at once, with its body (not when that is over
// MaxBody, as in Log); any other waits for its
// body in the log phase (Log), the job kept for it with Ctx.Keep. The
// request itself goes on at once.
func (in *instance) Rewrite(c plugins.Ctx) {
	if in.ratio < 1 && in.rnd.Float64() >= in.ratio {
		return
	}
	j := in.q.take()
	if j == nil {
		return // every copy is in flight: this one is dropped
	}
	j.method = append(j.method[:0], c.Method()...)
	j.url = in.appendTarget(append(j.url[:0], in.origin...), c)
	j.fields = j.fields[:0]
	for i := 0; ; i++ {
		name, value, ok := c.RequestHeaderAt(i)
		if !ok {
			break
		}
		if hopByHop(name) || bytes.IndexByte(value, 0) >= 0 {
			continue // the connection's, or a value the copy cannot hold
		}
		j.fields = append(j.fields, name...)
		j.fields = append(j.fields, 0)
		j.fields = append(j.fields, value...)
		j.fields = append(j.fields, 0)
	}
	j.host = append(j.host[:0], c.Header("Host")...)
	if len(j.host) == 0 {
		j.host = append(j.host, c.Var(varHost)...)
	}
	if c.RequestBodyWhole() {
		if body := c.RequestBody(); len(body) <= MaxBody {
			in.q.sendWith(j, body)
		} else {
			in.q.unsent(j, true) // read whole for another plugin, past MaxBody
		}
		return
	}
	// The body goes upstream after the request phases: the copy waits
	// for it. Jobs of the request's other proxy-mirror instances (a
	// global rule's and the route's) wait with it, chained.
	if v, ok := c.Kept(in.q); ok && v != 0 {
		j.next = in.q.job(v)
	}
	if !c.Keep(in.q, j.id) {
		in.q.drop(j)
	}
}

// Log implements plugins.LogPhase: the copies that waited for the
// request's body (Rewrite) go with it when the worker copied it whole
// within MaxBody; otherwise they are not sent, and counted (a body over
// MaxBody is logged once, at warn level). The first proxy-mirror
// instance of the request to run its log phase sends them all.
func (in *instance) Log(c plugins.Ctx) {
	v, ok := c.Kept(in.q)
	if !ok || v == 0 {
		return
	}
	c.Keep(in.q, 0) // taken: a later instance finds none
	body := c.RequestBody()
	whole := c.RequestBodyWhole() && len(body) <= MaxBody
	for j := in.q.job(v); j != nil; {
		next := j.next
		j.next = nil
		if whole {
			in.q.sendWith(j, body)
		} else {
			in.q.unsent(j, len(body) >= MaxBody)
		}
		j = next
	}
}

// appendTarget appends the mirror's request target, as enable_mirror
// makes it: $uri and the query ($args, as a plugin before this one left
// them); path replaces the path (replace) or goes before it (prefix).
// APISIX takes $upstream_uri instead when a plugin before set it, which
// none of a higher priority does.
func (in *instance) appendTarget(b []byte, c plugins.Ctx) []byte {
	b = append(b, in.path...)
	if in.path == nil || in.prefix {
		b = append(b, c.Var(varURI)...)
	}
	if a := c.Var(varArgs); a != nil {
		b = append(b, '?')
		b = append(b, a...)
	}
	return b
}

// hopByHop reports the fields that are the connection's, not the
// request's, and Host, which the copy sets itself.
func hopByHop(name []byte) bool {
	switch len(name) {
	case 2:
		return httpvar.EqualFold(name, "te")
	case 4:
		return httpvar.EqualFold(name, "host")
	case 7:
		return httpvar.EqualFold(name, "upgrade") || httpvar.EqualFold(name, "trailer")
	case 10:
		return httpvar.EqualFold(name, "connection") || httpvar.EqualFold(name, "keep-alive")
	case 14:
		return httpvar.EqualFold(name, "content-length")
	case 16:
		return httpvar.EqualFold(name, "proxy-connection")
	case 17:
		return httpvar.EqualFold(name, "transfer-encoding")
	}
	return false
}
