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
	_ plugins.BodyReader   = (*instance)(nil)
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

// MaxBody is the longest request body, in bytes, a route with
// proxy-mirror takes (nginx's default client_max_body_size, 1m): the
// worker reads the body whole for the copy, and answers 413 to a longer
// one, as nginx past client_max_body_size. The node's
// client_max_body_size, when set and smaller, is the limit instead.
const MaxBody = 1 << 20

// BodyLimit implements plugins.BodyReader: the body is read, whole, for
// the copy.
func (in *instance) BodyLimit() int64 { return MaxBody }

// Rewrite implements plugins.RewritePhase: a sampled request is copied
// (method, target, fields, body) and handed to the process's senders; the
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
	body := c.RequestBody()
	j.body = append(j.body[:0], body...)
	j.hasBody = body != nil
	j.host = append(j.host[:0], c.Header("Host")...)
	if len(j.host) == 0 {
		j.host = append(j.host, c.Var(varHost)...)
	}
	in.q.send(j)
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
