// Package requestvalidation is APISIX's request-validation plugin
// (priority 2800, rewrite phase): a route validates the request's headers
// against a JSON Schema, header_schema, before the request goes on. A
// request the schema refuses is answered rejected_code (400) with
// rejected_msg, or with the validator's message, as APISIX's text body
// without a newline (`property "required_payload" is required`,
// `property "test" validation failed: matches none of the enum values`).
// See README.md.
//
// The headers are the object APISIX validates (ngx.req.get_headers): a
// header is read by the name the schema gives it, case-insensitively, or,
// when absent, by that name with '_' as '-' (nginx's lookup); a header
// sent once is a string, one sent more than once an array of strings.
// The validator is admin/spec's (the Admin API's), with APISIX's
// messages.
//
// Differences from APISIX:
//
//   - body_schema is refused when configured: the plugins do not see the
//     request body, and a route that should validate bodies would let any
//     body through. max_req_body_size is accepted and has no effect.
//   - header_schema's top level may only hold type, properties and
//     required (and annotations: title, description, $schema, $comment,
//     default, examples). Keywords that judge the whole set of headers
//     (additionalProperties, patternProperties, minProperties, anyOf…)
//     are refused: the plugin validates the headers the schema names, not
//     every header of the request. A property's own schema may use any
//     keyword.
//   - A schema rejected at configuration gets the validator's message,
//     prefixed "header_schema: ", not the Lua validator's.
//
// An instance is built once per configuration and only read afterwards:
// safe for concurrent use. When every property's schema only says what a
// single string may be (type string, enum, minLength, maxLength), a
// request the schema lets through allocates nothing: the plugin judges
// the headers itself and calls the validator only for a request it
// refuses, to build the message (rejected_msg, when set, is answered
// without it). With other keywords each request is validated by the
// validator, which allocates.
//
// Importing the package registers the plugin in plugins.Default.
package requestvalidation
