// Package spec is coregate's resource model: the APISIX v3 objects
// (routes, services, upstreams, and consumers, plugin configs and global
// rules kept as JSON) that the Admin API and the standalone file store and
// the workers compile. The node's own conf/config.yaml is package nodeconf,
// beside it.
//
// It is the one package the control plane, the workers and the plugins all
// import, and it imports nothing of coregate's own: the standard library,
// YAML and the schema library only (an import-rule test enforces it).
//
// # Decoding and validation
//
// DecodeRoute, DecodeService and DecodeUpstream read an object strictly —
// an unknown field, a value of the wrong JSON type or malformed JSON is an
// error — and then Validate it against APISIX's schema (apisix/schema_def.lua)
// and the Admin API's checks, in APISIX's order. Errors are
// *ValidationError (or *SyntaxError) whose text is the error_msg APISIX
// answers, so clients that match on messages keep working:
//
//	invalid configuration: property "methods" validation failed: failed to validate item 1: matches none of the enum values
//	invalid configuration: additional properties forbidden, found foo
//	only one of host or hosts is allowed
//	failed to validate the 'vars' expression: invalid operator '='
//
// A stored object keeps only what was written: optional scalars are
// pointers, ids, nodes and vars remember their written form, and schema
// defaults are applied by the Effective* helpers when a Spec is compiled,
// never written back.
//
// Spec.Check verifies what spans objects (unique ids, upstream_id,
// service_id and plugin_config_id references). Spec.SetHash gives a content
// hash so that a reload that changes nothing can be skipped.
//
// # Shared readings
//
// ParseIP and ParseIPOrCIDR (no IPv6 zone, as APISIX), LuaNumber (Lua's
// tonumber) and the table of vars operators (VarOp) are written once, here,
// the lowest package that both validation and the worker import; ParseIP
// and LuaNumber do not allocate, so the worker reads request values with
// them.
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
