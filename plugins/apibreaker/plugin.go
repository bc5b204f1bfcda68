package apibreaker

import (
	_ "embed"
	"encoding/json"
	"slices"

	"coregate/httpvar"
	"coregate/plugins"
	"coregate/plugins/internal/vartpl"
)

// Name is the plugin's wire name.
const Name = "api-breaker"

//go:embed schema.json
var schema []byte

func init() { plugins.Register(Name, Plugin{}) }

// Plugin is api-breaker's implementation; its zero value is ready.
type Plugin struct{}

var (
	_ plugins.Plugin      = Plugin{}
	_ plugins.AccessPhase = (*instance)(nil)
	_ plugins.LogPhase    = (*instance)(nil)
)

// Schema implements plugins.Plugin.
func (Plugin) Schema() []byte { return schema }

// Check implements plugins.Plugin: the schema says it all.
func (Plugin) Check(raw json.RawMessage) error {
	_, err := decode(raw)
	return err
}

// conf is a configuration, with APISIX's defaults.
type conf struct {
	BreakResponseCode    int     `json:"break_response_code"`
	BreakResponseBody    *string `json:"break_response_body"`
	BreakResponseHeaders []struct {
		Key   string `json:"key"`
		Value string `json:"value"`
	} `json:"break_response_headers"`
	MaxBreakerSec int64 `json:"max_breaker_sec"`
	Unhealthy     struct {
		HTTPStatuses []int `json:"http_statuses"`
		Failures     int64 `json:"failures"`
	} `json:"unhealthy"`
	Healthy struct {
		HTTPStatuses []int `json:"http_statuses"`
		Successes    int64 `json:"successes"`
	} `json:"healthy"`
}

func decode(raw json.RawMessage) (conf, error) {
	var c conf
	c.MaxBreakerSec = 300
	c.Unhealthy.HTTPStatuses, c.Unhealthy.Failures = []int{500}, 3
	c.Healthy.HTTPStatuses, c.Healthy.Successes = []int{200}, 3
	err := json.Unmarshal(raw, &c)
	return c, err
}

// MaxStates bounds the (host, uri) pairs one instance tracks, as APISIX's
// shared dictionary is bounded: past it, a pair in no breaker state makes
// room, and a new pair is not tracked while none does.
const MaxStates = 4096

// Build implements plugins.Plugin.
func (Plugin) Build(raw json.RawMessage, _ plugins.Env) (plugins.Instance, error) {
	c, err := decode(raw)
	if err != nil {
		return nil, err
	}
	in := &instance{
		code:      c.BreakResponseCode,
		maxSec:    c.MaxBreakerSec,
		bad:       c.Unhealthy.HTTPStatuses,
		failures:  c.Unhealthy.Failures,
		good:      c.Healthy.HTTPStatuses,
		successes: c.Healthy.Successes,
		host:      httpvar.Parse("host"),
		uri:       httpvar.Parse("uri"),
		key:       make([]byte, 0, 256),
		states:    map[string]*state{},
	}
	if c.BreakResponseBody != nil {
		in.body = []byte(*c.BreakResponseBody)
		for _, h := range c.BreakResponseHeaders {
			in.headers = append(in.headers, header{name: h.Key, value: vartpl.Parse(h.Value)})
		}
	}
	return in, nil
}

type header struct {
	name  string
	value vartpl.Template
}

// state is one (host, uri) pair's breaker, as APISIX's three keys of its
// shared dictionary: a field at zero is a key that is not set.
type state struct {
	// unhealthy counts the unhealthy answers since the pair was last
	// healthy; healthy the healthy ones since the last unhealthy one.
	unhealthy, healthy int64
	// opened is when (Unix seconds) unhealthy last reached a multiple of
	// failures: the breaker is open from then for breakTime.
	opened int64
}

// instance is one configuration, built. It and its states are used by one
// event loop (see the package doc): no locks.
type instance struct {
	code    int
	body    []byte // nil: the gateway's page for code
	headers []header
	maxSec  int64

	bad, good           []int
	failures, successes int64
	host, uri           httpvar.Var

	key    []byte // the request's key, rebuilt by each phase call
	hval   []byte // a header value rendered
	states map[string]*state
}

// breakTime is how long the breaker stays open after the failures'th
// multiple of failures: 2^n seconds, n at least 1, up to maxSec.
func breakTime(n, maxSec int64) int64 {
	if n < 1 {
		n = 1
	}
	if n >= 62 || int64(1)<<n > maxSec {
		return maxSec
	}
	return int64(1) << n
}

// state returns the request's state, nil when the pair has none; the key
// stays in in.key until the next call.
func (in *instance) state(c plugins.Ctx) *state {
	in.key = append(append(in.key[:0], c.Var(in.host)...), c.Var(in.uri)...)
	return in.states[string(in.key)]
}

// Access implements plugins.AccessPhase: while the request's breaker is
// open, the request is answered break_response_code (with the body and
// headers when break_response_body is set) and the upstream is not
// contacted.
func (in *instance) Access(c plugins.Ctx) {
	s := in.state(c)
	if s == nil || s.unhealthy == 0 || s.opened == 0 {
		return
	}
	if s.opened+breakTime(s.unhealthy/in.failures, in.maxSec) < c.Now()/1e9 {
		return
	}
	if in.body == nil {
		c.Exit(in.code, nil)
		return
	}
	for i := range in.headers {
		h := &in.headers[i]
		in.hval, _ = h.value.Render(in.hval[:0], c)
		c.SetResponseHeader(h.name, in.hval)
	}
	c.Exit(in.code, in.body)
}

// Log implements plugins.LogPhase: the upstream's status counts towards
// the breaker, as APISIX's log phase counts it. A response the gateway
// made (a plugin's, the breaker's own, a failed connection's) does not
// count.
func (in *instance) Log(c plugins.Ctx) {
	if c.Exited() || !c.Exchange().Upstreamed {
		return
	}
	status := c.Status()
	s := in.state(c)
	if slices.Contains(in.bad, status) {
		if s == nil {
			if s = in.add(c.Now() / 1e9); s == nil {
				return
			}
		}
		s.unhealthy++
		s.healthy = 0
		if s.unhealthy%in.failures == 0 {
			s.opened = c.Now() / 1e9
		}
		return
	}
	if s == nil || s.unhealthy == 0 || !slices.Contains(in.good, status) {
		return
	}
	if s.healthy++; s.healthy >= in.successes {
		*s = state{}
	}
}

// add makes in.key's state, making room when MaxStates are held: nil
// when there is none. It allocates, once per pair.
func (in *instance) add(now int64) *state {
	if len(in.states) >= MaxStates {
		for k, s := range in.states {
			if s.unhealthy == 0 || s.opened+in.maxSec < now {
				delete(in.states, k)
			}
		}
		if len(in.states) >= MaxStates {
			return nil
		}
	}
	s := new(state)
	in.states[string(in.key)] = s
	return s
}
