package spec

import (
	"encoding/json"
	"fmt"
	"time"
)

// Checks is an upstream's checks (APISIX's health_checker) with APISIX's
// defaults filled in. Built once per configuration (ParseChecks) and read
// only afterwards: safe for concurrent readers.
type Checks struct {
	Active  ActiveCheck
	Passive *PassiveCheck // nil: no passive checks
}

// ActiveCheck is checks.active: the probes the supervisor sends.
type ActiveCheck struct {
	Type        string // http, https or tcp
	Timeout     time.Duration
	Concurrency int
	HTTPPath    string
	Method      string // http_method: GET unless written
	ReqBody     string // http_req_body, sent with its Content-Length
	Host        string
	Port        int // 0: the node's
	VerifyCert  bool
	ReqHeaders  []string // "Name: value" lines
	Healthy     Thresholds
	Unhealthy   Thresholds
}

// PassiveCheck is checks.passive: what the workers count of their
// traffic.
type PassiveCheck struct {
	Type      string // http or tcp
	Healthy   Thresholds
	Unhealthy Thresholds
}

// Thresholds are a healthy or unhealthy section: the probe interval
// (active only), the statuses that count, and how many reports of each
// kind flip the node (0: the kind is not counted).
type Thresholds struct {
	Interval     time.Duration
	HTTPStatuses []int
	Successes    int
	HTTPFailures int
	TCPFailures  int
	Timeouts     int
}

// HasStatus reports whether status is one of t's HTTPStatuses. It does
// not allocate.
func (t *Thresholds) HasStatus(status int) bool {
	for _, s := range t.HTTPStatuses {
		if s == status {
			return true
		}
	}
	return false
}

type rawThresholds struct {
	Interval     *float64 `json:"interval"`
	HTTPStatuses []int    `json:"http_statuses"`
	Successes    *int     `json:"successes"`
	HTTPFailures *int     `json:"http_failures"`
	TCPFailures  *int     `json:"tcp_failures"`
	Timeouts     *int     `json:"timeouts"`
}

func (r *rawThresholds) fill(d Thresholds) Thresholds {
	if r == nil {
		return d
	}
	if r.Interval != nil {
		d.Interval = time.Duration(*r.Interval * float64(time.Second))
	}
	if r.HTTPStatuses != nil {
		d.HTTPStatuses = r.HTTPStatuses
	}
	for _, p := range []struct {
		v *int
		d *int
	}{{r.Successes, &d.Successes}, {r.HTTPFailures, &d.HTTPFailures}, {r.TCPFailures, &d.TCPFailures}, {r.Timeouts, &d.Timeouts}} {
		if p.v != nil {
			*p.d = *p.v
		}
	}
	return d
}

// ParseChecks reads an upstream's checks, which passed the schema, with
// APISIX's defaults (schema_def.lua health_checker); nil for none.
func ParseChecks(raw json.RawMessage) (*Checks, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var r struct {
		Active *struct {
			Type        string         `json:"type"`
			Timeout     *float64       `json:"timeout"`
			Concurrency *int           `json:"concurrency"`
			HTTPPath    *string        `json:"http_path"`
			Method      string         `json:"http_method"`
			ReqBody     string         `json:"http_req_body"`
			Host        string         `json:"host"`
			Port        int            `json:"port"`
			VerifyCert  *bool          `json:"https_verify_certificate"`
			ReqHeaders  []string       `json:"req_headers"`
			Healthy     *rawThresholds `json:"healthy"`
			Unhealthy   *rawThresholds `json:"unhealthy"`
		} `json:"active"`
		Passive *struct {
			Type      string         `json:"type"`
			Healthy   *rawThresholds `json:"healthy"`
			Unhealthy *rawThresholds `json:"unhealthy"`
		} `json:"passive"`
	}
	if err := json.Unmarshal(raw, &r); err != nil {
		return nil, fmt.Errorf("checks: %w", err)
	}
	if r.Active == nil {
		return nil, fmt.Errorf("checks: active is required")
	}
	a := r.Active
	c := &Checks{Active: ActiveCheck{
		Type: "http", Timeout: time.Second, Concurrency: 10, HTTPPath: "/", VerifyCert: true,
		Method: "GET", ReqBody: a.ReqBody, Host: a.Host, Port: a.Port, ReqHeaders: a.ReqHeaders,
	}}
	if a.Type != "" {
		c.Active.Type = a.Type
	}
	if a.Method != "" {
		c.Active.Method = a.Method
	}
	if a.Timeout != nil {
		c.Active.Timeout = time.Duration(*a.Timeout * float64(time.Second))
	}
	if a.Concurrency != nil {
		c.Active.Concurrency = *a.Concurrency
	}
	if a.HTTPPath != nil {
		c.Active.HTTPPath = *a.HTTPPath
	}
	if a.VerifyCert != nil {
		c.Active.VerifyCert = *a.VerifyCert
	}
	c.Active.Healthy = a.Healthy.fill(Thresholds{Interval: time.Second, HTTPStatuses: []int{200, 302}, Successes: 2})
	c.Active.Unhealthy = a.Unhealthy.fill(Thresholds{Interval: time.Second,
		HTTPStatuses: []int{429, 404, 500, 501, 502, 503, 504, 505}, HTTPFailures: 5, TCPFailures: 2, Timeouts: 3})
	if p := r.Passive; p != nil {
		c.Passive = &PassiveCheck{Type: "http"}
		if p.Type != "" {
			c.Passive.Type = p.Type
		}
		c.Passive.Healthy = p.Healthy.fill(Thresholds{HTTPStatuses: []int{200, 201, 202, 203, 204, 205, 206, 207, 208, 226,
			300, 301, 302, 303, 304, 305, 306, 307, 308}, Successes: 5})
		c.Passive.Unhealthy = p.Unhealthy.fill(Thresholds{HTTPStatuses: []int{429, 500, 503}, HTTPFailures: 5, TCPFailures: 2, Timeouts: 7})
	}
	return c, nil
}

// CheckedUpstream is an upstream with checks, named as APISIX's Control
// API names it: by the object that holds it ("/apisix/upstreams/1",
// "/apisix/routes/1" for a route's own upstream, "/apisix/services/1").
type CheckedUpstream struct {
	Name     string
	Upstream *Upstream
}

// HasChecks reports whether u (nil: no upstream) has checks: a checks
// member other than null. It reads Extra in place, where Rare copies
// every rare field: a Spec's walk for checks (CheckedUpstreams) looks at
// every upstream.
func (u *Upstream) HasChecks() bool {
	if u == nil || u.Extra == nil {
		return false
	}
	c := u.Extra.Checks
	return len(c) > 0 && string(c) != "null"
}

// CheckedName is the name of the checked upstream of the object of
// resource kind ("upstreams", "routes", "services") and id, as
// CheckedUpstream names it.
func CheckedName(kind string, id ID) string { return "/apisix/" + kind + "/" + id.String() }

// CheckedUpstreams lists s's upstreams that have checks (HasChecks): the
// upstream objects, then the routes' and the services' own.
func (s *Spec) CheckedUpstreams() []CheckedUpstream {
	var out []CheckedUpstream
	add := func(kind string, id ID, u *Upstream) {
		if u.HasChecks() {
			out = append(out, CheckedUpstream{Name: CheckedName(kind, id), Upstream: u})
		}
	}
	for _, u := range s.Upstreams {
		add("upstreams", u.ID, u)
	}
	for _, r := range s.Routes {
		add("routes", r.ID, r.Upstream)
	}
	for _, sv := range s.Services {
		add("services", sv.ID, sv.Upstream)
	}
	return out
}
