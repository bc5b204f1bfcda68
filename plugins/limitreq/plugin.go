package limitreq

import (
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"

	"coregate/plugins"
	"coregate/plugins/internal/cjson"
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

// Check implements plugins.Plugin: the schema says it all.
func (Plugin) Check(raw json.RawMessage) error {
	c, err := decode(raw)
	if err != nil {
		return err
	}
	return supported(c)
}

// decode reads a configuration that passed the schema, with APISIX's
// defaults for what it leaves out.
func decode(raw json.RawMessage) (conf, error) {
	c := conf{KeyType: "var", Policy: "local", RejectedCode: 503}
	err := json.Unmarshal(raw, &c)
	return c, err
}

// supported refuses what the plugin cannot run yet: in Check, so that the
// Admin API answers 400 rather than store what no worker can build.
func supported(c conf) error {
	switch {
	case c.Policy != "local":
		return fmt.Errorf("policy %q is not supported yet, only \"local\"", c.Policy)
	case c.Burst > maxBurst:
		return fmt.Errorf("burst %g is over %g", c.Burst, float64(maxBurst))
	case c.Rate <= 0:
		return errors.New("rate must be positive")
	}
	return nil
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
	if err := supported(c); err != nil {
		return nil, err
	}
	switch {
	case env.Counters == nil:
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
		keyVar:       c.Key,
		prefix:       []byte("limit-req\x00route\x00"),
		confHash:     []byte(":" + hex.EncodeToString(sum[:8]) + ":"),
		key:          make([]byte, 0, 128),
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
