package limitcount

import (
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"coregate/plugins"
	"coregate/plugins/internal/cjson"
	"coregate/plugins/internal/limit"
	"coregate/plugins/internal/redis"
	"coregate/plugins/internal/vartpl"
)

// Name is the plugin's APISIX name.
const Name = "limit-count"

//go:embed schema.json
var schema []byte

func init() { plugins.Register(Name, Plugin{}) }

// Plugin is limit-count's implementation.
type Plugin struct{}

var _ plugins.Plugin = Plugin{}

// Schema implements plugins.Plugin: APISIX's schema.
func (Plugin) Schema() []byte { return schema }

// conf is a configuration that passed the schema, with APISIX's defaults.
type conf struct {
	Count                json.RawMessage `json:"count"`
	TimeWindow           json.RawMessage `json:"time_window"`
	WindowType           string          `json:"window_type"`
	Rules                json.RawMessage `json:"rules"`
	Group                *string         `json:"group"`
	ShowLimitQuotaHeader bool            `json:"show_limit_quota_header"`
	SyncInterval         float64         `json:"sync_interval"`
	limit.Conf
}

func decode(raw json.RawMessage) (*conf, error) {
	c := &conf{WindowType: "fixed", ShowLimitQuotaHeader: true, SyncInterval: noSync, Conf: limit.Defaults()}
	c.Key = "remote_addr"
	if err := json.Unmarshal(raw, c); err != nil {
		return nil, err
	}
	return c, nil
}

// Check implements plugins.Plugin: what APISIX's check_schema adds to the
// schema.
func (Plugin) Check(raw json.RawMessage) error {
	c, err := decode(raw)
	if err != nil {
		return err
	}
	// What the worker cannot build yet is refused here, where the Admin
	// API answers 400, rather than stored and refused by every worker.
	if err := c.CheckPolicy(raw); err != nil {
		return err
	}
	if c.WindowType != "fixed" {
		return fmt.Errorf("window_type %q is not supported yet, only \"fixed\"", c.WindowType)
	}
	if err := c.checkSync(); err != nil {
		return err
	}
	if c.Rules != nil && (c.Count != nil || c.TimeWindow != nil) {
		return errors.New("count/time_window and rules cannot be specified at the same time")
	}
	if c.Group != nil && c.Rules != nil {
		return errors.New("group and rules cannot be specified at the same time")
	}
	if c.Rules != nil {
		var rules []ruleConf
		if err := json.Unmarshal(c.Rules, &rules); err != nil {
			return err
		}
		seen := map[string]bool{}
		for _, r := range rules {
			if seen[r.Key] {
				return fmt.Errorf("duplicate key '%s' in rules", r.Key)
			}
			seen[r.Key] = true
		}
	}
	return nil
}

// Build implements plugins.Plugin.
func (Plugin) Build(raw json.RawMessage, env plugins.Env) (plugins.Instance, error) {
	c, err := decode(raw)
	if err != nil {
		return nil, err
	}
	if c.WindowType != "fixed" {
		return nil, fmt.Errorf("window_type %q is not supported yet, only \"fixed\"", c.WindowType)
	}
	counters, rc, err := c.Open(raw, env)
	if err != nil {
		return nil, err
	}
	in := &instance{
		counters: counters,
		rc:       rc,
		answer:   c.Answer(),
		headers:  c.ShowLimitQuotaHeader,
		key:      make([]byte, 0, 128),
	}
	if c.Rules == nil {
		r := rule{limitH: limitHeader, remainingH: remainingHeader, resetH: resetHeader}
		if r.count, r.countTpl, err = vartpl.NumberOr(c.Count); err != nil {
			return nil, fmt.Errorf("count: %w", err)
		}
		if r.window, r.windowTpl, err = vartpl.NumberOr(c.TimeWindow); err != nil {
			return nil, fmt.Errorf("time_window: %w", err)
		}
		// No value, or an empty one: the client's address, as APISIX.
		r.key = limit.NewKey(c.KeyType, c.Key).EmptyIsNone()
		in.rules = []rule{r}
	} else {
		var rules []ruleConf
		if err := json.Unmarshal(c.Rules, &rules); err != nil {
			return nil, err
		}
		for i, rc := range rules {
			r := rule{key: limit.RuleKey(rc.Key), tag: []byte("rule" + strconv.Itoa(i+1) + ":")}
			if r.count, r.countTpl, err = vartpl.NumberOr(rc.Count); err != nil {
				return nil, fmt.Errorf("rules[%d].count: %w", i+1, err)
			}
			if r.window, r.windowTpl, err = vartpl.NumberOr(rc.TimeWindow); err != nil {
				return nil, fmt.Errorf("rules[%d].time_window: %w", i+1, err)
			}
			prefix := strconv.Itoa(i + 1)
			if rc.HeaderPrefix != nil {
				prefix = *rc.HeaderPrefix
			}
			// The prefix goes before "RateLimit-": X-1-RateLimit-Limit.
			r.limitH = "X-" + prefix + "-RateLimit-Limit"
			r.remainingH = "X-" + prefix + "-RateLimit-Remaining"
			r.resetH = "X-" + prefix + "-RateLimit-Reset"
			in.rules = append(in.rules, r)
		}
	}
	switch {
	case rc != nil && c.Group != nil:
		// Redis keys as APISIX names them (plugin-limit-count:v1:…), so
		// that every gateway of a cluster, whatever its version, counts
		// a group under one key.
		in.space = limit.FixedSpace("plugin-limit-count:v1:" + *c.Group + ":")
	case rc != nil:
		// The route's id and the hash of the configuration follow, the
		// same on every gateway.
		in.space, err = limit.NewSpace("plugin-limit-count:v1:/apisix/routes/", raw)
	case c.Group != nil:
		// The members of a group share its counter; the Admin API refuses
		// members whose configurations differ (group conf mismatched), and
		// one that got into the store anyway counts against its own count.
		in.space = limit.FixedSpace("limit-count\x00group\x00" + *c.Group + ":")
	default:
		in.space, err = limit.NewSpace("limit-count\x00route\x00", raw)
	}
	if err != nil {
		return nil, err
	}
	for i := range in.rules {
		r := &in.rules[i]
		r.countArg, r.windowArg = strconv.FormatInt(r.count, 10), strconv.FormatInt(r.window, 10)
	}
	if rc != nil && c.SyncInterval != noSync {
		if err := c.checkSync(); err != nil {
			return nil, err
		}
		in.sync = newSyncer(in, time.Duration(c.SyncInterval*float64(time.Second)), env.Counters)
	}
	return in, nil
}

// noSync is sync_interval's default: every request counted in Redis.
const noSync = -1

// checkSync is APISIX's check of sync_interval, for the Redis policies
// (the local policy ignores it): at least 0.1 s, and shorter than a
// time_window given as a number.
func (c *conf) checkSync() error {
	if c.Policy != "redis" && c.Policy != "redis-cluster" && c.Policy != "redis-sentinel" || c.SyncInterval == noSync {
		return nil
	}
	if c.SyncInterval < 0.1 {
		return errors.New("sync_interval should not be smaller than 0.1")
	}
	var window float64
	if json.Unmarshal(c.TimeWindow, &window) == nil && c.SyncInterval >= window {
		return errors.New("sync_interval should be smaller than time_window")
	}
	return nil
}

// ruleConf is one of rules.
type ruleConf struct {
	Count        json.RawMessage `json:"count"`
	TimeWindow   json.RawMessage `json:"time_window"`
	Key          string          `json:"key"`
	HeaderPrefix *string         `json:"header_prefix"`
}

var _ plugins.GroupPlugin = Plugin{}

// GroupConf implements plugins.GroupPlugin: the group, and the
// configuration with APISIX's defaults (the Redis fields' too), as the
// members of a group are compared ("group conf mismatched").
func (Plugin) GroupConf(raw json.RawMessage) (string, []byte, error) {
	c, err := decode(raw)
	if err != nil || c.Group == nil {
		return "", nil, err
	}
	for _, m := range []*json.RawMessage{&c.Count, &c.TimeWindow, &c.Rules} {
		if *m != nil {
			canon, err := cjson.Canonical(*m)
			if err != nil {
				return "", nil, err
			}
			*m = json.RawMessage(canon)
		}
	}
	all := struct {
		*conf
		Redis *redis.Conf `json:"redis,omitempty"`
	}{conf: c}
	rc, err := redis.Decode(c.Policy, raw)
	if err != nil {
		return "", nil, err
	}
	all.Redis = rc
	b, err := json.Marshal(all)
	return *c.Group, b, err
}
