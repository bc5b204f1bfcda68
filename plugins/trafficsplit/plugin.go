package trafficsplit

import (
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"

	"coregate/admin/spec"
	"coregate/plugins"
	"coregate/plugins/internal/varexpr"
)

// Name is the plugin's wire name.
const Name = "traffic-split"

//go:embed schema.json
var schema []byte

func init() { plugins.Register(Name, Plugin{}) }

// Plugin is traffic-split's implementation; its zero value is ready.
type Plugin struct{}

var (
	_ plugins.Plugin      = Plugin{}
	_ plugins.AccessPhase = (*instance)(nil)
)

// Schema implements plugins.Plugin.
func (Plugin) Schema() []byte { return schema }

// conf is a configuration. A weighted upstream's weight defaults to 1, and
// a rule's weighted_upstreams to one entry of weight 1 without upstream
// (the route's), as the schema's defaults in APISIX.
type conf struct {
	Rules []struct {
		Match *[]struct {
			Vars json.RawMessage `json:"vars"`
		} `json:"match"`
		WeightedUpstreams []weighted `json:"weighted_upstreams"`
	} `json:"rules"`
}

type weighted struct {
	UpstreamID spec.ID         `json:"upstream_id"`
	Upstream   json.RawMessage `json:"upstream"`
	Weight     *int            `json:"weight"`
}

func decode(raw json.RawMessage) (conf, error) {
	var c conf
	err := json.Unmarshal(raw, &c)
	return c, err
}

// Check implements plugins.Plugin: each match's vars, as a route's, with
// APISIX's message ("failed to validate the 'vars' expression: invalid
// operator '123'"); and each inline upstream as the Admin API checks an
// upstream object, which APISIX does only when a request chooses it.
func (Plugin) Check(raw json.RawMessage) error {
	c, err := decode(raw)
	if err != nil {
		return err
	}
	for _, r := range c.Rules {
		if r.Match != nil {
			for _, m := range *r.Match {
				if _, err := compileVars(m.Vars); err != nil {
					return err
				}
			}
		}
		for _, w := range r.WeightedUpstreams {
			if len(w.Upstream) > 0 {
				if _, err := spec.DecodeUpstream(w.Upstream); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// compileVars reads a match's vars: checked as a route's, compiled for
// the request path. Absent or null vars hold for every request.
func compileVars(raw json.RawMessage) (varexpr.Expr, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return varexpr.Expr{}, nil
	}
	var vs spec.Vars
	if err := json.Unmarshal(raw, &vs); err != nil {
		return varexpr.Expr{}, err
	}
	if err := vs.Check(); err != nil {
		return varexpr.Expr{}, err
	}
	return varexpr.CompileVars(vs)
}

// ErrNoUpstreams: the plugin was built where requests have no upstreams
// to go to (an Env without Upstreams).
var ErrNoUpstreams = errors.New("traffic-split: no upstreams to choose from here")

// Build implements plugins.Plugin: the rules' conditions compiled, their
// upstreams taken from env.Upstreams (an upstream_id the snapshot lacks
// answers the requests its rule sees 500, as in APISIX).
func (Plugin) Build(raw json.RawMessage, env plugins.Env) (plugins.Instance, error) {
	c, err := decode(raw)
	if err != nil {
		return nil, err
	}
	in := &instance{}
	for _, cr := range c.Rules {
		var r rule
		if cr.Match != nil {
			r.matched = true
			r.match = make(varexpr.Any, 0, len(*cr.Match))
			for _, m := range *cr.Match {
				e, err := compileVars(m.Vars)
				if err != nil {
					return nil, err
				}
				r.match = append(r.match, e)
			}
		}
		ws := cr.WeightedUpstreams
		if ws == nil {
			ws = []weighted{{}}
		}
		weights := make([]int, 0, len(ws))
		for _, w := range ws {
			var up plugins.Upstream
			switch {
			case !w.UpstreamID.IsZero():
				id := w.UpstreamID.String()
				if env.Upstreams == nil {
					return nil, ErrNoUpstreams
				}
				up, err = env.Upstreams.ByID(id)
				if errors.Is(err, plugins.ErrNoUpstream) {
					if r.missing == nil {
						r.missing = []byte("failed to fetch upstream info by upstream id: " + id)
					}
					err = nil
				}
			case len(w.Upstream) > 0:
				if env.Upstreams == nil {
					return nil, ErrNoUpstreams
				}
				up, err = env.Upstreams.Inline(w.Upstream)
			}
			if err != nil {
				return nil, fmt.Errorf("traffic-split: %w", err)
			}
			weight := 1
			if w.Weight != nil {
				weight = *w.Weight
			}
			r.ups = append(r.ups, up)
			weights = append(weights, weight)
		}
		r.rr = newRoundRobin(weights)
		in.rules = append(in.rules, r)
	}
	return in, nil
}

// rule is one rule, built.
type rule struct {
	// matched: the rule has a match list (an empty one holds as the rule
	// before it did, as in APISIX); match are its items' conditions, any
	// of which holding passes the rule.
	matched bool
	match   varexpr.Any
	// ups are the weighted upstreams (nil: the route's own), chosen by rr.
	ups []plugins.Upstream
	rr  roundRobin
	// missing is the 500's body when an upstream_id is not in the
	// snapshot; nil when all are.
	missing []byte
}

// instance is one configuration, built. It is used by one event loop: its
// round robins' positions and the match's evaluator (ev) are its own,
// the evaluator set for each request and cleared after it.
type instance struct {
	rules []rule
	ev    varexpr.Evaluator
}

// Access implements plugins.AccessPhase: the first rule whose match holds
// (or that has none) chooses one of its weighted upstreams by weighted
// round robin for the request; no rule holding leaves the route's.
func (in *instance) Access(c plugins.Ctx) {
	passed := true
	var chosen *rule
	for i := range in.rules {
		r := &in.rules[i]
		if r.missing != nil {
			c.Exit(500, r.missing)
			return
		}
		if !r.matched {
			chosen = r
			break
		}
		if len(r.match) > 0 {
			passed = in.ev.EvalAny(c, r.match)
		}
		if passed {
			chosen = r
			break
		}
	}
	if chosen == nil {
		return
	}
	if k := chosen.rr.next(); k >= 0 {
		c.SetUpstream(chosen.ups[k])
	}
}

// roundRobin is lua-resty-balancer's roundrobin, which APISIX's
// traffic-split uses: interleaved weighted round robin, by the greatest
// common divisor of the weights, over the entries in their configured
// order (APISIX's follow a Lua table's). Entries of weight 0 are never
// chosen.
type roundRobin struct {
	idx, w   []int // the entries of weight > 0: index and weight
	gcd, max int
	cw, last int
}

func newRoundRobin(weights []int) roundRobin {
	r := roundRobin{last: -1}
	for i, w := range weights {
		if w <= 0 {
			continue
		}
		r.idx, r.w = append(r.idx, i), append(r.w, w)
		r.gcd = gcd(r.gcd, w)
		r.max = max(r.max, w)
	}
	r.cw = r.max
	return r
}

func gcd(a, b int) int {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// next is the index of the entry chosen, -1 when none can be.
func (r *roundRobin) next() int {
	if len(r.idx) == 0 {
		return -1
	}
	for {
		for r.last+1 < len(r.idx) {
			r.last++
			if r.w[r.last] >= r.cw {
				return r.idx[r.last]
			}
		}
		r.last = -1
		if r.cw -= r.gcd; r.cw <= 0 {
			r.cw = r.max
		}
	}
}
