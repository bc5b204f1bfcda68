// Package plugins holds the plugin model: the one table of plugins and
// their priorities (table.go), the registry of their implementations, the
// phases a plugin runs in, the per-route phase tables, and the Env through
// which a plugin instance reaches the node's shared counters and metric
// slots, and what its plugin's instances share on its event loop
// (Env.Loop). Plugins live in sub-packages; none imports worker/ (the worker
// implements Ctx and Env), and plugintest is their test kit.
//
// A plugin runs in fixed APISIX-style phases (rewrite, access, before_proxy,
// header_filter, body_filter, log), not in a nested middleware chain: the
// worker's event loop cannot keep a stack alive across the upstream round
// trip, so a request is a resumable state machine that records its phase
// and position. Execution order comes from each plugin's priority in Table
// (highest first), never from the order a route lists its plugins.
//
// A plugin is a Plugin: Schema is the JSON Schema of its configuration,
// compiled once, when first used, by admin/spec's engine (the one that
// checks routes and upstreams; the supervisor compiles every plugin's at
// start, a worker only those its routes configure); Check, pure, validates
// what a schema cannot say.
// Together they are what the Admin API answers 400 with (APISIX's
// messages, "unknown plugin [x]" and "failed to check the configuration of
// plugin x err: …"), and Registry.Schema is what it shows. An
// authentication plugin whose configuration on a consumer differs from a
// route's (key-auth's {"key"}) is also a ConsumerSchemaPlugin: consumers'
// and credentials' configurations go through Registry.CheckConsumer,
// against that schema; one that needs checks its consumer schema cannot
// say (jwt-auth's secret for an HS algorithm) is also a
// ConsumerCheckPlugin, whose CheckConsumer runs after that schema. An
// authentication plugin is a CredentialPlugin: the worker indexes
// consumers by the credential it derives (key-auth's key) into the
// snapshot's Consumers, and one whose request path needs more of the
// credential's configuration (basic-auth's password digest, jwt-auth's
// key) is a CredentialDataPlugin, whose CredentialData prepares it once,
// when the consumers are indexed, off the event loop, so that a request
// finds it with the consumer (Consumers.Find, with the credential object
// that matched) without parsing or allocating; AttachConsumer, APISIX's
// attach_consumer, then tells the upstream who the consumer is and
// attaches it. A plugin with node-wide plugin metadata (APISIX's
// metadata_schema, prometheus's disabled_labels) is also a
// MetadataSchemaPlugin: the Admin API checks /apisix/admin/plugin_metadata
// objects with Registry.CheckMetadata, the worker with IndexMetadata, and
// Build finds its plugin's object in Env.Metadata (plugin_attr of
// config.yaml in Env.Attr). Build makes
// the runtime Instance, off the event loop, once per configuration
// snapshot. A plugin whose Instance is a function of its configuration
// alone, keeping nothing of a request past the phase it runs in
// (proxy-rewrite), is Shareable: the routes of a worker whose
// configurations of it are the same bytes, without references, run one
// instance (Registry.BuildPhasesShared). An Instance that reads the request body (hmac-auth's
// validate_request_body, request-validation's body_schema) is a
// BodyReader: the worker reads the body whole, up to its BodyLimit,
// before the request phases of its route begin, and Ctx.RequestBody
// hands it over, as APISIX's core.request.get_body. An Instance that only
// needs the body once the request went (the loggers' include_req_body,
// proxy-mirror's copy) is a BodyTee instead: the body streams upstream
// unchanged, with no wait and no limit added, while the worker copies its
// first TeeLimit bytes for the log phase (Ctx.RequestBody,
// Ctx.RequestBodyWhole). A log phase that reads the response the client
// got (the loggers' response.headers and include_resp_body) is a
// ResponseHeadReader, a ResponseBodyReader or both: the worker keeps a
// copy of the head, and of the body's start up to the ResponseBodyLimit,
// as it sends them (Ctx.ResponseHeaderAt, Ctx.ResponseBody), for the
// routes with such a plugin only. The worker merges a route's plugins with its plugin_config's
// and its service's (the route's own keys win), builds them and sorts the
// instances into Phases, one slice per phase, type-asserted once, so a
// request does no lookups.
//
// # References: $env:// and $secret://
//
// A string value of a plugin's configuration, at any depth, may be a
// reference in place of the value, as in APISIX (envref.go):
// "$env://NAME" (the prefix in any case) is the environment variable
// NAME, "$env://NAME/member" the string member of NAME's value, a JSON
// object; "$secret://<manager>/<id>/<key>", a secret manager's, is read
// from the Registry's SecretSource (SetSecrets: package admin/secret's
// Resolver, which reads the secret objects' Vault), and refused ("secret
// managers ($secret://) are not supported yet") by a Registry without one.
// Registry.Resolve reads one such string the same way, for references
// held outside plugin configurations (an ssl object's cert and key).
// A SecretSource's lookup is network I/O bounded in time, done where
// configurations are checked and built, never on an event loop; a lookup
// that fails refuses the object with a message naming the reference and
// why, never a value. The Registry resolves them, and
// nothing else does: Check, CheckConsumer and CheckAll (the Admin API,
// apisix.yaml, the configuration store's syncer) check the configuration
// as it resolves in this process, and refuse one whose reference does not
// resolve (a variable that is not set, a member its value lacks) with
// APISIX's message form naming the field and the reference; Build and
// IndexConsumers (the worker) build and index the resolved configuration,
// so that every plugin, authentication plugins' credentials included,
// gets values and none a reference. What is stored, and what the Admin
// API shows, is the configuration as written: the reference, never its
// value. The workers are the supervisor's children and inherit its
// environment, so a configuration the supervisor took resolves alike in
// them; one that does not (ErrReference) is refused by its object, never
// built with the reference as its value. A refusal never quotes a value:
// a schema's or a plugin's message about a resolved configuration, which
// may quote one, gives way to one naming the references.
//
// # Secret fields: encrypt_fields
//
// A plugin's schema (or consumer schema) may name, under
// "encrypt_fields" as APISIX's schemas do, the fields kept encrypted at
// rest with apisix.data_encryption's keyring (encrypt.go): the Admin API
// stores them encrypted (EncryptConf), and a Registry given the keyring
// (SetKeyring, by the supervisor and by each worker at start) decrypts
// them before anything else — references, the schema, Check, Build and
// the consumers' index all see the value in clear, checked or trusted,
// while the Spec keeps what was stored. A value that does not decrypt,
// stored in clear, is used as it is, as in APISIX.
//
// # Checked once
//
// A configuration is checked where it enters the node (the Admin API, the
// store's syncer, the standalone file) and not again (checked.go): a
// Registry remembers the configurations without references it passed, so
// the syncer does not check again what the Admin API just stored, and a
// Spec whose every configuration a registry checked carries its
// Fingerprint (spec.Spec.Checked), which a worker of the same build
// trusts (Trusts): BuildPhasesChecked, IndexConsumersChecked and
// IndexMetadataChecked build such configurations without the schema or
// Check. A configuration with a reference is checked wherever it is
// built, since it resolves there.
//
// # Upstreams
//
// A plugin that sends a route's requests elsewhere (traffic-split) takes
// the upstreams from Env.Upstreams when it is built: an upstream object by
// id, or one its configuration writes out, compiled by the worker as a
// route's own; its access phase hands the one it chooses to
// Ctx.SetUpstream. The handles are the snapshot's: a route whose plugins
// took any is built again with each snapshot, so that an upstream
// object's change reaches it.
//
// Registration happens in init functions, under a name of Table; the
// registry is read-only afterwards and safe for concurrent use.
package plugins
