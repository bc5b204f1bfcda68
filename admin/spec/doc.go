// Package spec is coregate's resource model: the APISIX v3 objects
// (routes, services, upstreams, consumers, plugin configs, global
// rules and ssls; credentials and plugin metadata kept as JSON) that the Admin API
// and the standalone file store and the workers compile. The node's own conf/config.yaml is package nodeconf,
// beside it.
//
// It is the one package the control plane, the workers and the plugins all
// import, and it imports nothing of coregate's own: the standard library,
// YAML and the schema library only (an import-rule test enforces it).
//
// # Decoding and validation
//
// The objects' schemas are JSON Schema documents (draft 7) transcribed from
// APISIX's apisix/schema_def.lua, embedded from schema/*.json and evaluated
// by github.com/santhosh-tekuri/jsonschema/v6, compiled once on first use.
// DecodeRoute, DecodeService, DecodeUpstream, DecodeConsumer,
// DecodePluginConfig, DecodeGlobalRule, DecodeConsumerGroup and DecodeSSL
// check an object
// against its schema, then the few rules a schema cannot state
// (validate.go: the host/hosts pair APISIX's Admin API checks first, node
// address syntax, check_upstream_conf, plugin configs being objects,
// lua-resty-expr vars; ssl.go: certificates that parse, as many keys as
// certificates, and with DecodeSSLKeys the keys themselves; a $env:// or
// $secret:// reference in their place is not parsed, IsReference),
// and fill the Go structs with encoding/json. Errors are *ValidationError
// (or *SyntaxError) whose text is the error_msg APISIX answers, so clients
// that match on messages keep working:
//
//	invalid configuration: property "methods" validation failed: failed to validate item 1: matches none of the enum values
//	invalid configuration: additional properties forbidden, found foo
//	only one of host or hosts is allowed
//	failed to validate the 'vars' expression: invalid operator '='
//
// Of several failures the one APISIX's validator meets first is reported
// (translate.go states the order). Where APISIX's text does not name the
// value at fault (an anyOf: a bad node, a bad id), ValidationError's Field
// and Detail do: upstream.nodes["127.0.0.1:99999"], `node
// "127.0.0.1:99999": port 99999 out of range`; Explain joins them.
//
// CompileSchema compiles another schema (a plugin's) that validates with
// the same messages; ObjectSchema gives an object kind's schema as one
// document, for GET /apisix/admin/schema/{kind}; ValidateObject checks an
// object's JSON against its kind's schema alone.
//
// A stored object keeps only what was written: optional scalars are
// pointers, ids, nodes and vars remember their written form, and schema
// defaults are applied by the Effective* helpers when a Spec is compiled,
// never written back. A Route's and an Upstream's fields that few set lie
// behind one pointer (Route.Extra, Upstream.Extra, read with Rare), since
// a worker keeps every route and upstream of its Spec; their JSON forms
// are the same (routeJSON, upstreamJSON).
//
// Spec.Check verifies what spans objects (unique ids, upstream_id,
// service_id and plugin_config_id references, a consumer's group_id).
// A proto's schema (KindProto) is here too; its content, a .proto file,
// is package protofile's to compile. Spec.SetHash gives a content
// hash so that a reload that changes nothing can be skipped.
// A Spec's JSON form is MarshalJSON's; an Encoder writes it to a stream
// an object at a time, keeping each object's form for the next Spec that
// shares the object, so that writing a Spec again after a change encodes
// what changed (the supervisor's local copy of the store).
//
// # Shared readings
//
// ParseIP and ParseIPOrCIDR (no IPv6 zone, as APISIX), LuaNumber (Lua's
// tonumber) and the table of vars operators (VarOp) are written once, here,
// the lowest package that both validation and the worker import; ParseIP
// and LuaNumber do not allocate, so the worker reads request values with
// them. The operators' evaluation is package varexpr's, which the route
// vars (worker/router) and the plugins taking lua-resty-expr lists
// (plugins/internal/varexpr) share.
//
// # YAML
//
// ResolveEnv substitutes ${{VAR}} and ${{VAR:=default}} as APISIX does,
// and YAMLToJSON turns a YAML tree into JSON for the strict decoders.
//
// # Concurrency
//
// Decoding, validation and loading functions are safe for concurrent use.
// A Spec and the objects in it are plain data: safe to share read-only once
// built, not safe to modify while others read them.
package spec
