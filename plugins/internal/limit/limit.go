// Package limit is what the limit plugins (limit-count, limit-req,
// limit-conn) share: the configuration's common fields and APISIX's
// defaults for them (Conf), the choice of where they count (the node's
// counter table for policy "local", a Redis client for "redis" and
// "redis-cluster": Conf.Open), their answers to a request they refuse or
// cannot count (Answer), the key a request is counted under (Key, Space)
// and the steps of a count in Redis the access phase waits for (Await).
//
// Each plugin keeps its own algorithm, its Redis scripts and its
// instance; what is here holds no state of a request. A Key, a Space and
// an Answer are set when an instance is built and only read afterwards,
// by the event loop the instance runs on: they are safe for concurrent
// reads.
package limit

import (
	"encoding/json"
	"errors"
	"time"

	"coregate/plugins"
	"coregate/plugins/internal/cjson"
	"coregate/plugins/internal/redis"
)

// Conf is the fields every limit plugin's configuration has, as APISIX
// names them. A plugin's configuration embeds it, so that they decode
// with the plugin's own fields.
type Conf struct {
	Key              string  `json:"key"`
	KeyType          string  `json:"key_type"`
	Policy           string  `json:"policy"`
	RejectedCode     int     `json:"rejected_code"`
	RejectedMsg      *string `json:"rejected_msg"`
	AllowDegradation bool    `json:"allow_degradation"`
}

// Defaults is Conf with APISIX's defaults for what a configuration leaves
// out (key has none but limit-count's, which the plugin sets).
func Defaults() Conf { return Conf{KeyType: "var", Policy: "local", RejectedCode: 503} }

// CheckPolicy refuses a policy, or Redis fields, that no worker could
// build: in a plugin's Check, so that the Admin API answers 400 rather
// than store it.
func (c *Conf) CheckPolicy(raw json.RawMessage) error {
	_, err := redis.Decode(c.Policy, raw)
	return err
}

// Open is where the configuration counts: the node's counter table of env
// for policy "local" (rc nil), or the process's client of the Redis that
// raw configures for "redis" and "redis-cluster" (counters nil).
func (c *Conf) Open(raw json.RawMessage, env plugins.Env) (counters plugins.Counters, rc *redis.Client, err error) {
	rconf, err := redis.Decode(c.Policy, raw)
	if err != nil {
		return nil, nil, err
	}
	if rconf != nil {
		return nil, redis.For(*rconf), nil
	}
	if env.Counters == nil {
		return nil, nil, errors.New("no counter table")
	}
	return env.Counters, nil, nil
}

// Answer is how a limiter answers the requests it does not let through.
type Answer struct {
	// Code and Body answer a request past the limit (rejected_code, and
	// rejected_msg as APISIX's {"error_msg":…} or nil: the gateway's page
	// for Code).
	Code int
	Body []byte
	// Degrade (allow_degradation) lets a request through when the limiter
	// cannot count it.
	Degrade bool
}

// Answer is c's answers.
func (c *Conf) Answer() Answer {
	a := Answer{Code: c.RejectedCode, Degrade: c.AllowDegradation}
	if c.RejectedMsg != nil {
		a.Body = append(cjson.AppendString(append([]byte(nil), `{"error_msg":`...), *c.RejectedMsg), "}\n"...)
	}
	return a
}

// Reject answers a request past the limit.
func (a *Answer) Reject(c plugins.Ctx) { c.Exit(a.Code, a.Body) }

// Fail is APISIX's answer to a limiter that cannot count (a full counter
// table, a Redis that does not answer, a limit that does not resolve, no
// rule that applies): the request passes with allow_degradation, else it
// is answered 500 with body (nil: the gateway's page).
func (a *Answer) Fail(c plugins.Ctx, body []byte) {
	if !a.Degrade {
		c.Exit(500, body)
	}
}

// Delay holds a request admitted past the rate or the connections by d,
// as APISIX sleeps: from a millisecond on.
func Delay(c plugins.Ctx, d time.Duration) {
	if d >= time.Millisecond {
		c.Delay(d)
	}
}

// Await has the request wait for call, a count in rc, then submits it;
// r is the plugin's side of the wait, which holds call (r.Resume reads
// its reply, r.Abandon takes it back). False when the request cannot wait:
// nothing was submitted and the caller takes call back and fails the
// request. It allocates nothing: r is the pointer the caller holds.
func Await(c plugins.Ctx, r plugins.Resumer, rc *redis.Client, call *redis.Call) bool {
	wk, ok := c.Await(r)
	if !ok {
		return false
	}
	call.Waker = wk
	rc.Submit(call)
	return true
}
