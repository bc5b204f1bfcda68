// Package requestvalidation is APISIX's request-validation plugin
// (priority 2800, rewrite phase): a route validates the request's headers
// against a JSON Schema, header_schema, and its body against another,
// body_schema, before the request goes on. A request a schema refuses is
// answered rejected_code (400) with rejected_msg, or with the validator's
// message, as APISIX's text body without a newline
// (`property "required_payload" is required`,
// `property "test" validation failed: matches none of the enum values`).
// See README.md.
//
// The headers are the object APISIX validates (ngx.req.get_headers):
// every header under its name in lower case, a header sent once a
// string, one sent more than once an array of strings; a header the
// schema names (in properties or required) is under the schema's
// spelling, found case-insensitively, or, when absent, by that name with
// '_' as '-' (nginx's lookup).
//
// With body_schema the plugin is a plugins.BodyReader: the worker reads
// the body whole, up to max_req_body_size (64 MiB) and
// client_max_body_size, before the rewrite phase. The body is JSON, or,
// with a Content-Type beginning application/x-www-form-urlencoded (any
// case), a form read as ngx.decode_args reads it (values strings, true
// for a name without '=', a repeated name an array). A request without a
// body, or with more than one Content-Type, is refused with rejected_code
// and rejected_msg (the gateway's page for the code without one), as
// APISIX refuses them; a body that does not decode, with the decoder's
// message. The validator is admin/spec's (the Admin API's), with APISIX's
// messages.
//
// Differences from APISIX:
//
//   - A header the schema names under another spelling than the
//     lower-case one is seen under the schema's by every keyword, where
//     Lua's table lookups find it for properties and required only (with
//     additionalProperties false, APISIX refuses "User-Agent: x" for a
//     property "User-Agent"; the plugin does not).
//   - The upstream gets the body as the client sent it (framed by the
//     worker), where APISIX sends its own encoding of the JSON it
//     validated. So that the upstream cannot read a body otherwise than
//     the validator did, a JSON body with invalid UTF-8, or with an
//     object member named twice, is refused.
//   - A body over client_max_body_size, or over the largest limit of the
//     route's body readers, is answered 413 by the worker; over
//     max_req_body_size but within those, the plugin refuses it as APISIX
//     does (rejected_code, rejected_msg).
//   - Messages differ where the decoders' do: a body that is not JSON
//     gets encoding/json's message (`unexpected end of JSON input`), not
//     lua-cjson's; a schema rejected at configuration gets the
//     validator's message, prefixed "header_schema: " or "body_schema: ".
//
// An instance is built once per configuration and only read afterwards:
// safe for concurrent use. When header_schema's top holds only type
// object, properties and required (and annotations), and every property
// only says what a single string may be (type string, enum, minLength,
// maxLength), a request its headers pass allocates nothing for them: the
// plugin judges the headers itself and calls the validator only for a
// request it refuses, to build the message (rejected_msg, when set, is
// answered without it). With other keywords each request's headers are
// validated by the validator, which allocates; so is the body, parsed and
// validated for each request of a route with body_schema.
//
// Importing the package registers the plugin in plugins.Default.
package requestvalidation
