package limitreq

import (
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"

	"coregate/httpvar"
	"coregate/plugins"
	"coregate/plugins/internal/cjson"
	"coregate/plugins/internal/redis"
	"coregate/plugins/internal/vartpl"
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
	_, err = supported(c, raw)
	return err
}

// decode reads a configuration that passed the schema, with APISIX's
// defaults for what it leaves out.
func decode(raw json.RawMessage) (conf, error) {
	c := conf{KeyType: "var", Policy: "local", RejectedCode: 503}
	err := json.Unmarshal(raw, &c)
	return c, err
}

// supported refuses what the plugin cannot run: in Check, so that the
// Admin API answers 400 rather than store what no worker can build. It
// returns the Redis configuration of the redis and redis-cluster
// policies.
func supported(c conf, raw json.RawMessage) (*redis.Conf, error) {
	rconf, err := redis.Decode(c.Policy, raw)
	if err != nil {
		return nil, err
	}
	switch {
	case c.Burst > maxBurst:
		return nil, fmt.Errorf("burst %g is over %g", c.Burst, float64(maxBurst))
	case c.Rate <= 0:
		return nil, errors.New("rate must be positive")
	}
	return rconf, nil
}

// conf is a configuration that passed the schema, with APISIX's defaults.
type conf struct {
	Rate             float64 `json:"rate"`
	Burst            float64 `json:"burst"`
	Key              string  `json:"key"`
	KeyType          string  `json:"key_type"`
	Policy           string  `json:"policy"`
	RejectedCode     int     `json:"rejected_code"`
	RejectedMsg      *string `json:"rejected_msg"`
	NoDelay          bool    `json:"nodelay"`
	AllowDegradation bool    `json:"allow_degradation"`
}

// maxBurst bounds burst so that the excess fits its bits of the word.
const maxBurst = 1e9

// Build implements plugins.Plugin.
func (Plugin) Build(raw json.RawMessage, env plugins.Env) (plugins.Instance, error) {
	c, err := decode(raw)
	if err != nil {
		return nil, err
	}
	rconf, err := supported(c, raw)
	if err != nil {
		return nil, err
	}
	if rconf == nil && env.Counters == nil {
		return nil, errors.New("no counter table")
	}
	canon, err := cjson.Canonical(raw)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256([]byte(canon))
	in := &instance{
		counters:     env.Counters,
		rate:         c.Rate * 1000,
		burst:        c.Burst * 1000,
		nodelay:      c.NoDelay,
		degrade:      c.AllowDegradation,
		rejectedCode: c.RejectedCode,
		keyVar:       httpvar.Parse(c.Key),
		prefix:       []byte("limit-req\x00route\x00"),
		confHash:     []byte(":" + hex.EncodeToString(sum[:8]) + ":"),
		key:          make([]byte, 0, 128),
	}
	if rconf != nil {
		// APISIX's key (limit_req:<route's resource key>:<conf
		// version>:<key's value>), the hash of the configuration for its
		// version: the same on every gateway.
		in.counters = nil
		in.rc = redis.For(*rconf)
		in.prefix = []byte("limit_req:/apisix/routes/")
		in.rateArg = strconv.FormatFloat(in.rate, 'g', -1, 64)
		in.burstArg = strconv.FormatFloat(in.burst, 'g', -1, 64)
		in.ttlArg = strconv.FormatFloat(math.Ceil(in.burst/in.rate)+1, 'f', 0, 64)
	}
	if c.KeyType == "var_combination" {
		t := vartpl.Parse(c.Key)
		in.keyTpl = &t
	}
	if c.RejectedMsg != nil {
		in.rejectedBody = append(cjson.AppendString(append([]byte(nil), `{"error_msg":`...), *c.RejectedMsg), "}\n"...)
	}
	return in, nil
}
