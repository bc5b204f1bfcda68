package limitconn

import (
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"coregate/httpvar"
	"coregate/plugins"
	"coregate/plugins/internal/cjson"
	"coregate/plugins/internal/redis"
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
	_, err = redis.Decode(c.Policy, raw)
	return err
}

// decode reads a configuration that passed the schema, with APISIX's
// defaults for what it leaves out.
func decode(raw json.RawMessage) (conf, error) {
	c := conf{KeyType: "var", Policy: "local", RejectedCode: 503, KeyTTL: 3600}
	err := json.Unmarshal(raw, &c)
	return c, err
}

// conf is a configuration that passed the schema, with APISIX's defaults.
type conf struct {
	Conn             json.RawMessage `json:"conn"`
	Burst            json.RawMessage `json:"burst"`
	DefaultConnDelay float64         `json:"default_conn_delay"`
	Key              string          `json:"key"`
	KeyType          string          `json:"key_type"`
	Policy           string          `json:"policy"`
	RejectedCode     int             `json:"rejected_code"`
	RejectedMsg      *string         `json:"rejected_msg"`
	AllowDegradation bool            `json:"allow_degradation"`
	Rules            json.RawMessage `json:"rules"`
	KeyTTL           int64           `json:"key_ttl"`
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
	rconf, err := redis.Decode(c.Policy, raw)
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
		unit:         time.Duration(c.DefaultConnDelay * float64(time.Second)),
		degrade:      c.AllowDegradation,
		rejectedCode: c.RejectedCode,
		prefix:       []byte("limit-conn\x00route\x00"),
		confHash:     []byte(":" + hex.EncodeToString(sum[:8]) + ":"),
		key:          make([]byte, 0, 128),
	}
	if rconf != nil {
		// APISIX's key (limit_conn:<route's resource key>:<conf
		// version>:<key's value>), the hash of the configuration for its
		// version: the same on every gateway.
		in.counters = nil
		in.rc = redis.For(*rconf)
		in.prefix = []byte("limit_conn:/apisix/routes/")
		in.ttlArg = strconv.FormatInt(c.KeyTTL, 10)
	}
	if c.Rules == nil {
		r := rule{keyVar: httpvar.Parse(c.Key)}
		if r.conn, r.connTpl, err = vartpl.NumberOr(c.Conn); err != nil {
			return nil, fmt.Errorf("conn: %w", err)
		}
		if r.burst, r.burstTpl, err = vartpl.NumberOr(c.Burst); err != nil {
			return nil, fmt.Errorf("burst: %w", err)
		}
		if c.KeyType == "var_combination" {
			t := vartpl.Parse(c.Key)
			r.keyTpl = &t
		}
		in.rules = []rule{r}
	} else {
		var rules []ruleConf
		if err := json.Unmarshal(c.Rules, &rules); err != nil {
			return nil, err
		}
		for i, rc := range rules {
			t := vartpl.Parse(rc.Key)
			r := rule{keyTpl: &t, inRules: true}
			if r.conn, r.connTpl, err = vartpl.NumberOr(rc.Conn); err != nil {
				return nil, fmt.Errorf("rules[%d].conn: %w", i+1, err)
			}
			if r.burst, r.burstTpl, err = vartpl.NumberOr(rc.Burst); err != nil {
				return nil, fmt.Errorf("rules[%d].burst: %w", i+1, err)
			}
			in.rules = append(in.rules, r)
		}
	}
	if c.RejectedMsg != nil {
		in.rejectedBody = append(cjson.AppendString(append([]byte(nil), `{"error_msg":`...), *c.RejectedMsg), "}\n"...)
	}
	return in, nil
}
