// Package standalone is the configuration store of a standalone (data
// plane) node: the apisix.yaml file, or apisix.json, that APISIX's
// file-driven standalone mode reads.
//
// Load reads the file the way APISIX does — a YAML file must end with the
// line #END (a file caught half-written is refused), ${{VAR}} and
// ${{VAR:=default}} are taken from the environment — and puts every route,
// service and upstream through the same strict decoding and validation as
// the Admin API (package spec), so errors read the same, prefixed with the
// file and the item:
//
//	apisix.yaml: routes[2] (id 7): invalid configuration: additional properties forbidden, found foo
//
// The top level holds lists: routes, services, upstreams, consumers,
// plugin_configs, global_rules, consumer_groups and ssls (decoded; an
// ssl's private keys are kept as written, unread, for they may be
// encrypted), plugin_metadata (kept as JSON for the plugin layer; a
// plugin_metadata item's id is its plugin's name) and protos (checked as
// the Admin API checks them, content compiled by package protofile, and
// not served: nothing reads them yet), and secrets (an item's id is
// "<manager>/<id>", the object checked against its manager's schema,
// package secret; kept as JSON: the plugins' $secret:// references are
// read with them, whichever list comes first). APISIX's other lists (stream_routes, …)
// are accepted only when empty; any other key is an error. Items without an
// id get arr_<n> (counting from 1), as in APISIX. Load and Parse fail on
// the first bad item.
//
// # The node's store
//
// A node serves the file through Store, a read-only store.Store that
// package storesync follows as it follows etcd: List reads the file, Watch
// polls it (every second by default, as APISIX), each item is one key
// (routes/<id>, consumers/<username>, …) and Put, Delete and GenID give
// store.ErrReadOnly. So one policy holds for both, etcd's:
//
//   - A file that cannot be read, does not parse, lacks its #END, names a
//     variable that is not set, or is not laid out as lists of the
//     resources coregate reads, is refused as a whole: the previous
//     configuration serves (at start, the node does not start), and the
//     refusal is reported once, as the sync reports any read it refuses.
//     A file caught mid-write is judged once it has settled.
//   - An item that fails validation, whose plugins' configurations the
//     registry refuses, or whose references dangle, is logged naming the
//     file and the item (item="apisix.yaml: routes[2] (id 7)") and left
//     out; the rest is served, as APISIX does. An item that cannot be a
//     key (not an object, an id used twice) is left out by the Store,
//     logged alike. A global rule is never left out: one that fails
//     refuses the whole file, as a global rule in etcd refuses the
//     configuration, since every route would be served without it.
//
// CheckFile, what `coregate -t` runs, reports every item the node would
// leave out, each a *LoadError naming the file and the item, and fails
// when there is any. Watcher polls the file and hands each Spec that Parse
// accepts to its caller.
//
// Load, Parse, CheckFile and Store are safe for concurrent use.
package standalone
