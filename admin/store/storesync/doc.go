// Package storesync turns a store.Store into the stream of Specs a node
// serves: one full read of the prefix, then one watch resumed from the
// revision of that read, as APISIX's config_etcd does.
//
// Each key <prefix>/<resource>/<id> of a known resource is decoded the way
// the Admin API validates it (routes, services and upstreams with
// spec.DecodeRoute/DecodeService/DecodeUpstream, consumers, plugin_configs,
// global_rules and consumer_groups with spec.DecodeConsumer/
// DecodePluginConfig/DecodeGlobalRule/DecodeConsumerGroup; a consumer's
// credentials,
// <prefix>/consumers/<username>/credentials/<id>, as objects with the id
// "<username>/credentials/<id>"; plugin_metadata/<plugin> as objects
// with the id <plugin>; ssls with spec.DecodeSSL, their private keys
// kept as stored, unread, for they may be encrypted; secrets,
// <prefix>/secrets/<manager>/<id>, checked against their manager's schema
// (package secret) and kept as stored with the id "<manager>/<id>"), and its plugins are
// checked with the plugin registry (Options.Plugins) as the Admin API
// checks them; other keys (gen_id, stream_routes, …) are not part of a
// Spec and are ignored.
// An object that fails validation, or whose references dangle (a route
// whose upstream was deleted with force=true, a consumer whose group was),
// is logged and left out; the rest is served. So is one whose plugin configuration holds a $env://
// reference this process cannot resolve (a node restarted without the
// variable): the registry checks configurations as they resolve here,
// where the workers, which inherit this environment, would build them.
// $secret:// references are read with the secret objects read so far,
// handed to the registry's SecretSource (plugins.Registry.UpdateSecrets)
// as they change; a full read takes the secrets first, so that the
// objects referring to them, whatever their keys, find them.
// A global rule is the exception: left out, it would leave every route
// without its plugins (an authentication, a limit), so one that fails in
// any of these ways (it does not decode, names a plugin the gateway does
// not have, a configuration its plugin refuses, a reference that does not
// resolve) refuses the whole configuration instead, the previous one
// serving. The Spec, and its local copy, keep the references as stored,
// never their values. Objects keep the order of their creation (etcd's create
// revision), as the Admin API lists them; the Syncer keeps that order,
// each object's hash and the hashes of chunks of unchanged objects from
// one Spec to the next, so that a change hashes what it changed; and a
// change that replaces objects in their places, adds new ones or removes
// some makes its Spec from the last one's, the lists it changed copied
// (around the objects removed) and patched, those it only added objects
// to grown in place, in the last one's array, past its length, the
// others shared, rather than from every object again.
//
// Changes are coalesced without delaying a lone one: a change that comes
// after a quiet window is published at once; the changes that follow it
// within the window are applied together when it ends, so a burst costs
// one Spec per window and the delay is bounded. The window is Coalesce
// (5 ms by default) from the last Spec's start, and for a large
// configuration a pace of ten times each Spec's build (its CPU time, not
// its wall clock, which a busy machine stretches many times) with a
// credit of 60 ms: the first Specs of a burst go out back to back, and
// then a burst spends at most about a tenth of a CPU on building, while
// changes that come one at a time are each published at once.
// Check reads the prefix once and returns every object the sync would
// leave out, by key, instead of logging it (`coregate -t`).
//
// A watch that ends — the revision was compacted, or etcd went away —
// starts over from a full read once etcd answers again: the changes made
// meanwhile arrive with it. A watch that heard nothing for a while is not
// enough to take the store for unreachable (Reachable false,
// apisix_etcd_reachable 0), which a loaded machine's late progress
// answers would do: a probe, one read bounded by ProbeTimeout, must fail
// too.
//
// After a change the Spec is written to a local copy (a JSON file beside
// config.yaml), replaced atomically, off the watch's goroutine so that the
// next change does not wait for the disk, and at most once per CacheEvery
// (1 s), or per ten times the last write for a configuration that takes
// longer to write: a Spec handed on while the previous one is being
// written, or within that time, replaces it, and the last one is always
// written. The copy is streamed to its file an object at a time
// (spec.Encoder), from the JSON forms of the objects of the last Spec
// written, kept by pointer: a write encodes only the objects that changed
// since, and builds no copy of the whole configuration in memory. A
// node whose etcd cannot be reached at start serves that copy until etcd
// answers.
//
// The copy records the store revision and etcd cluster id it was read at,
// and the Checked mark of its Spec (the fingerprint of the plugin registry
// that checked it). A node started again on a store that answers at the
// copy's revision of the copy's cluster, by the same build (the same
// fingerprint), serves the copy at once, marked checked, so that its
// workers start without waiting for the store's objects to be decoded and
// checked: that revision names the same objects, which this build checked
// when it wrote the copy. Watch decodes and checks them before it follows
// the store, once the workers are ready (Syncer.Started, at most
// StartedWait later), and hands their Spec on should it differ (an object
// refused now that was not then, as one whose $env:// reference no longer
// resolves). A copy of another build is written again, once, with this
// build's mark.
//
// A full read that finds the store at a lower revision, or in another
// cluster (etcd rebuilt from nothing, restored from a backup, or another
// one configured), holding another configuration, is of a reset store
// (ResetError): it is logged at ERROR with both origins and refused. The
// node keeps serving what it has, the copy is not replaced, Refusal says
// why (the Admin API refuses changes with it), and the store is read again
// every five Retry until it holds the configuration served, or a revision
// past it in its cluster. Options.AcceptReset accepts the first read as it
// is.
//
// Syncer implements the supervisor's Source: Load once, then Watch.
package storesync
