package limitconn

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"coregate/plugins"
	"coregate/plugins/internal/limit"
	"coregate/plugins/internal/vartpl"
)

// Name is the plugin's APISIX name.
const Name = "limit-conn"

//go:embed schema.json
var schema []byte

func init() { plugins.Register(Name, Plugin{}) }

// Plugin is limit-conn's implementation.
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
	// What a worker cannot build is refused here, where the Admin API
	// answers 400, rather than stored.
	return c.CheckPolicy(raw)
}

// decode reads a configuration that passed the schema, with APISIX's
// defaults for what it leaves out.
func decode(raw json.RawMessage) (conf, error) {
	c := conf{KeyTTL: 3600, Conf: limit.Defaults()}
	err := json.Unmarshal(raw, &c)
	return c, err
}

// conf is a configuration that passed the schema, with APISIX's defaults.
type conf struct {
	Conn             json.RawMessage `json:"conn"`
	Burst            json.RawMessage `json:"burst"`
	DefaultConnDelay float64         `json:"default_conn_delay"`
	Rules            json.RawMessage `json:"rules"`
	KeyTTL           int64           `json:"key_ttl"`
	limit.Conf
}

// ruleConf is one of rules.
type ruleConf struct {
	Conn  json.RawMessage `json:"conn"`
	Burst json.RawMessage `json:"burst"`
	Key   string          `json:"key"`
}

// Build implements plugins.Plugin.
func (Plugin) Build(raw json.RawMessage, env plugins.Env) (plugins.Instance, error) {
	c, err := decode(raw)
	if err != nil {
		return nil, err
	}
	counters, rc, err := c.Open(raw, env)
	if err != nil {
		return nil, err
	}
	in := &instance{
		counters: counters,
		rc:       rc,
		unit:     time.Duration(c.DefaultConnDelay * float64(time.Second)),
		answer:   c.Answer(),
		key:      make([]byte, 0, 128),
	}
	prefix := "limit-conn\x00route\x00"
	if rc != nil {
		// APISIX's key (limit_conn:<route's resource key>:<conf
		// version>:<key's value>), the hash of the configuration for its
		// version: the same on every gateway.
		prefix = "limit_conn:/apisix/routes/"
		in.ttlArg = strconv.FormatInt(c.KeyTTL, 10)
	}
	if in.space, err = limit.NewSpace(prefix, raw); err != nil {
		return nil, err
	}
	if c.Rules == nil {
		r := rule{key: limit.NewKey(c.KeyType, c.Key)}
		if r.conn, r.connTpl, err = vartpl.NumberOr(c.Conn); err != nil {
			return nil, fmt.Errorf("conn: %w", err)
		}
		if r.burst, r.burstTpl, err = vartpl.NumberOr(c.Burst); err != nil {
			return nil, fmt.Errorf("burst: %w", err)
		}
		in.rules = []rule{r}
	} else {
		var rules []ruleConf
		if err := json.Unmarshal(c.Rules, &rules); err != nil {
			return nil, err
		}
		for i, rc := range rules {
			r := rule{key: limit.RuleKey(rc.Key)}
			if r.conn, r.connTpl, err = vartpl.NumberOr(rc.Conn); err != nil {
				return nil, fmt.Errorf("rules[%d].conn: %w", i+1, err)
			}
			if r.burst, r.burstTpl, err = vartpl.NumberOr(rc.Burst); err != nil {
				return nil, fmt.Errorf("rules[%d].burst: %w", i+1, err)
			}
			in.rules = append(in.rules, r)
		}
	}
	return in, nil
}
