package limitreq

import (
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"

	"coregate/plugins"
	"coregate/plugins/internal/limit"
)

// Name is the plugin's APISIX name.
const Name = "limit-req"

//go:embed schema.json
var schema []byte

func init() { plugins.Register(Name, Plugin{}) }

// Plugin is limit-req's implementation.
type Plugin struct{}

var _ plugins.Plugin = Plugin{}

// Schema implements plugins.Plugin: APISIX's schema.
func (Plugin) Schema() []byte { return schema }

// Check implements plugins.Plugin: what the schema leaves to the plugin
// (the Redis fields' values).
func (Plugin) Check(raw json.RawMessage) error {
	c, err := decode(raw)
	if err != nil {
		return err
	}
	return supported(c, raw)
}

// decode reads a configuration that passed the schema, with APISIX's
// defaults for what it leaves out.
func decode(raw json.RawMessage) (conf, error) {
	c := conf{Conf: limit.Defaults()}
	err := json.Unmarshal(raw, &c)
	return c, err
}

// supported refuses what the plugin cannot run: in Check, so that the
// Admin API answers 400 rather than store what no worker can build.
func supported(c conf, raw json.RawMessage) error {
	if err := c.CheckPolicy(raw); err != nil {
		return err
	}
	switch {
	case c.Burst > maxBurst:
		return fmt.Errorf("burst %g is over %g", c.Burst, float64(maxBurst))
	case c.Rate <= 0:
		return errors.New("rate must be positive")
	}
	return nil
}

// conf is a configuration that passed the schema, with APISIX's defaults.
type conf struct {
	Rate    float64 `json:"rate"`
	Burst   float64 `json:"burst"`
	NoDelay bool    `json:"nodelay"`
	limit.Conf
}

// maxBurst bounds burst so that the excess fits its bits of the word.
const maxBurst = 1e9

// Build implements plugins.Plugin.
func (Plugin) Build(raw json.RawMessage, env plugins.Env) (plugins.Instance, error) {
	c, err := decode(raw)
	if err != nil {
		return nil, err
	}
	if err := supported(c, raw); err != nil {
		return nil, err
	}
	counters, rc, err := c.Open(raw, env)
	if err != nil {
		return nil, err
	}
	in := &instance{
		counters: counters,
		rc:       rc,
		rate:     c.Rate * 1000,
		burst:    c.Burst * 1000,
		nodelay:  c.NoDelay,
		answer:   c.Answer(),
		key:      limit.NewKey(c.KeyType, c.Key),
		buf:      make([]byte, 0, 128),
	}
	prefix := "limit-req\x00route\x00"
	if rc != nil {
		// APISIX's key (limit_req:<route's resource key>:<conf
		// version>:<key's value>), the hash of the configuration for its
		// version: the same on every gateway.
		prefix = "limit_req:/apisix/routes/"
		in.rateArg = strconv.FormatFloat(in.rate, 'g', -1, 64)
		in.burstArg = strconv.FormatFloat(in.burst, 'g', -1, 64)
		in.ttlArg = strconv.FormatFloat(math.Ceil(in.burst/in.rate)+1, 'f', 0, 64)
	}
	if in.space, err = limit.NewSpace(prefix, raw); err != nil {
		return nil, err
	}
	return in, nil
}
