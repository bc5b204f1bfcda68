// Package adminapi is the Admin API, APISIX v3: an http.Handler that the
// supervisor serves on deployment.admin.admin_listen, off the event loops,
// writing through a store.Store (etcd, embedded or external).
//
// # What it answers
//
//	/apisix/admin/{routes,services,upstreams,plugin_configs,global_rules,ssls}[/{id}[/{sub/path}]]
//	/apisix/admin/{consumer_groups,protos}[/{id}[/{sub/path}]]
//	/apisix/admin/consumers[/{username}]
//	/apisix/admin/consumers/{username}/credentials[/{id}]
//	/apisix/admin/secrets[/{manager}[/{id}[/{sub/path}]]]
//	/apisix/admin/plugin_metadata[/{plugin}]
//	/apisix/admin/plugins/list, /apisix/admin/plugins/{name}, /apisix/admin/plugins/reload
//	/apisix/admin/schema/{kind}, /apisix/admin/schema/plugins/{name}, /apisix/admin/schema/validate/{resource}
//	HEAD /apisix/admin
//
// The path is normalised as nginx normalises $uri (slashes merged, dot
// segments resolved), then each segment is decoded on its own: an encoded
// "/" or dot segment (%2F, %2E%2E) stays inside its segment. An id in the
// path must be one APISIX's schemas allow in the object (1 to 64
// characters of a-z, A-Z, 0-9, "-", "_" and "."; a consumer's username, a
// credential's consumer's too, 1 to 256 of a-z, A-Z, 0-9, "_" and "-"; a
// plugin's name for plugin metadata as an id), else 400 "invalid route id
// [a/b]" (field, detail), whatever the method: a request reaches the key
// its path names and no other, so that path rules placed in front of the
// Admin API mean what they say.
//
// The answers have APISIX's envelopes, status codes and error bodies: PUT
// answers 201 for a new key and 200 for a replaced one, POST 201 with an
// id minted by the store (%020d), GET one {key, value, createdIndex, modifiedIndex},
// GET a list {list, total} with page/page_size and the name, label, uri and
// filter arguments (list.go), PATCH merges or replaces a sub-path under a
// compare-and-swap on modifiedIndex (patch.go), DELETE {deleted:"1", key},
// refused while another object refers to the one deleted (an upstream
// also while a traffic-split names it, as APISIX) unless
// force=true. A missing key is 404 {"message":"Key not found"}, a store
// that cannot be reached 503 {"error_msg": …}, everything the client got
// wrong 400 {"error_msg": …} (envelope.go). Stream routes are answered as
// APISIX answers them with its default proxy_mode, http (coregate has no
// stream proxy): 400 "stream mode is disabled, can not add stream routes",
// whatever the method.
//
// Secrets (secrets.go; admin/secrets.lua) live under their manager, one of
// APISIX's (vault, aws, gcp; else 400 "invalid secret manager: azure"),
// at <prefix>/secrets/<manager>/<id> with the id "<manager>/<id>" in the
// object, as APISIX stores them; they are checked against the manager's
// schema (package secret), have no POST, and PUT or PATCH without an id
// is 400 "no secret id". Their credentials (a vault token, an aws
// secret_access_key and session_token, a gcp auth_config.private_key) are
// stored encrypted with the fields' keyring and shown decrypted, as
// plugins' encrypt_fields are (encrypt.go). GET /apisix/admin/secrets
// lists every manager's.
//
// # What is stored
//
// The object the client sent, decoded and encoded again (numbers keep
// their written text, members come out sorted), plus id, create_time and
// update_time (epoch seconds; PUT keeps the previous create_time): schema
// defaults are never written. The bytes stored are the bytes validated:
// every write decodes the final object with package spec (DecodeRoute,
// DecodeService, DecodeUpstream or ValidateObject, one schema per object
// kind) and checks each entry of its "plugins" with the plugin registry
// (one schema per plugin), so nothing the gateway would refuse reaches the
// store. Validation errors keep APISIX's text in error_msg, which clients
// match on; where spec knows the field at fault, and the detail APISIX's
// text leaves out, the body adds them as "field" and "detail". A body
// that is not JSON, or whose strings are not Unicode text (bytes that are
// not UTF-8, an escaped surrogate that is not half of a pair), is 400
// "invalid request body: …", never stored with U+FFFD in their place.
//
// Across objects: upstream_id, service_id, plugin_config_id and a
// consumer's group_id must name stored objects ("failed to fetch consumer
// group info by consumer group id [g1], response code: 404"), a global rule's plugin may not be in another global
// rule, and no two consumers or credentials may share an authentication
// key (unique.go). These are read-then-write checks, as in APISIX: two
// writes racing can both pass them.
//
// Plugin metadata (PUT, GET, DELETE; admin/plugin_metadata.lua) is
// checked against the plugin's metadata schema (plugins.Registry's
// CheckMetadata: "invalid plugin name" for a plugin the gateway does not
// have, "invalid configuration: …" for what the schema refuses) and
// stored at <prefix>/plugin_metadata/<plugin> with the plugin's name as
// id and no timestamps, as APISIX stores it.
//
// SSL objects are checked against APISIX's ssl schema (schema/ssl.json
// here, until spec has one) and their certificates and keys must parse as
// PEM; GET never shows key or keys. With apisix.data_encryption's keyring
// (Options.Keyring) private keys are stored encrypted, as APISIX stores
// them (encrypt.go), and a key sent encrypted is checked decrypted;
// with enable_encrypt_fields (Options.FieldsKeyring) so are the
// plugins' encrypt_fields, which GET shows decrypted, as APISIX does.
// Credentials are checked against
// APISIX's credential schema (schema/credential.json), and their plugin
// must be an authentication one (plugins.CredentialPlugin, as the workers
// take it): 400 "only supports auth type plugins in consumer credential"
// otherwise.
//
// Consumer groups (PUT, GET, PATCH, DELETE; admin/consumer_group.lua)
// are checked against APISIX's consumer_group schema and their plugins as
// a route's; one a consumer names is not deleted ("can not delete this
// consumer group, consumer [jack] is still using it now") unless
// force=true. The workers merge a group's plugins under its consumers'
// own. Protos (PUT, POST, GET, DELETE; admin/proto.lua) are checked
// against APISIX's proto schema and their content compiled as a .proto
// file, or a base64 descriptor set (package protofile): 400 "invalid
// content: proto:2:13: field M.a: unknown type Missing". Nothing reads
// them yet (coregate has no grpc-transcode), so none is refused for
// deletion.
//
// # Authentication
//
// auth.go: the token comes from the api_key query argument, else the
// X-API-KEY header, else the x_api_key cookie (APISIX's order), compared in
// constant time with every configured key; a viewer key may only GET.
// Clients outside deployment.admin.allow_admin get 403 before anything
// else. CheckKeys is the start-up rule for the public legacy key.
//
// # Concurrency
//
// The handler keeps no mutable state of its own: requests run
// concurrently, and writes that must not interleave (PUT's create_time,
// PATCH's read-modify-write) are compare-and-swaps in the store. One that
// loses to another write is done again, read included, after a growing
// random wait, until the request's time (30 s) is up (retryCAS): a PUT is
// last-writer-wins, as in APISIX, and a PATCH is applied to the object as
// the other write left it, where APISIX answers 503 "value changed before
// overwritten"; that answer is left for a key written without pause for
// the whole time.
package adminapi
