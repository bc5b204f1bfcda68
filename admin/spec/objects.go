package spec

import "encoding/json"

// Consumer is an APISIX v3 consumer (schema_def.lua `_M.consumer`): the
// plugins that identify it (authentication) and those it adds to a route
// it is attached on. Its key, and its identity in a Spec, is Username.
type Consumer struct {
	ID         ID                         `json:"id,omitzero"`
	Username   string                     `json:"username"`
	Desc       string                     `json:"desc,omitempty"`
	Labels     map[string]string          `json:"labels,omitempty"`
	GroupID    ID                         `json:"group_id,omitzero"`
	Plugins    map[string]json.RawMessage `json:"plugins,omitzero"`
	CreateTime int64                      `json:"create_time,omitempty"`
	UpdateTime int64                      `json:"update_time,omitempty"`
}

// PluginConfig is an APISIX v3 plugin config (`_M.plugin_config`): plugins
// a route names by plugin_config_id, under its own.
type PluginConfig struct {
	ID         ID                         `json:"id,omitzero"`
	Name       string                     `json:"name,omitempty"`
	Desc       string                     `json:"desc,omitempty"`
	Labels     map[string]string          `json:"labels,omitempty"`
	Plugins    map[string]json.RawMessage `json:"plugins"`
	CreateTime int64                      `json:"create_time,omitempty"`
	UpdateTime int64                      `json:"update_time,omitempty"`
}

// ConsumerGroup is an APISIX v3 consumer group (`_M.consumer_group`):
// plugins its consumers (Consumer.GroupID) take, under their own.
type ConsumerGroup struct {
	ID         ID                         `json:"id,omitzero"`
	Name       string                     `json:"name,omitempty"`
	Desc       string                     `json:"desc,omitempty"`
	Labels     map[string]string          `json:"labels,omitempty"`
	Plugins    map[string]json.RawMessage `json:"plugins"`
	CreateTime int64                      `json:"create_time,omitempty"`
	UpdateTime int64                      `json:"update_time,omitempty"`
}

// GlobalRule is an APISIX v3 global rule (`_M.global_rule`): plugins run
// for every route.
type GlobalRule struct {
	ID         ID                         `json:"id,omitzero"`
	Plugins    map[string]json.RawMessage `json:"plugins"`
	CreateTime int64                      `json:"create_time,omitempty"`
	UpdateTime int64                      `json:"update_time,omitempty"`
}

// DecodeConsumer decodes a consumer and validates it as DecodeRoute does
// a route: its schema (schema/consumer.json). Its plugins' configurations
// are the plugin registry's to check; its group_id, Check's.
func DecodeConsumer(data []byte) (*Consumer, error) {
	return decode(data, KindConsumer, objectTree(KindConsumer), func(*Consumer) error { return nil })
}

// DecodeConsumerGroup is DecodeConsumer for a consumer group.
func DecodeConsumerGroup(data []byte) (*ConsumerGroup, error) {
	return decode(data, KindConsumerGroup, objectTree(KindConsumerGroup), func(*ConsumerGroup) error { return nil })
}

// DecodePluginConfig is DecodeConsumer for a plugin config.
func DecodePluginConfig(data []byte) (*PluginConfig, error) {
	return decode(data, KindPluginConfig, objectTree(KindPluginConfig), func(*PluginConfig) error { return nil })
}

// DecodeGlobalRule is DecodeConsumer for a global rule.
func DecodeGlobalRule(data []byte) (*GlobalRule, error) {
	return decode(data, KindGlobalRule, objectTree(KindGlobalRule), func(*GlobalRule) error { return nil })
}

// objectTree is the schema check of an object kind with no rule of its
// own before the schema, as ValidateObject makes it.
func objectTree(kind string) func(*jval) error {
	return func(v *jval) error {
		if e := objectSchema(kind).validateTree(v); e != nil {
			return e.prefixed("invalid configuration: ")
		}
		return nil
	}
}
