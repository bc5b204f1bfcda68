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
// plugin_configs and global_rules (decoded), and plugin_metadata (kept as
// JSON for the plugin layer; a plugin_metadata item's id is its plugin's
// name). APISIX's other lists (ssls, stream_routes, …)
// are accepted only when empty; any other key is an error. Items without an
// id get arr_<n> (counting from 1), as in APISIX. Unlike APISIX, which skips
// a bad item and loads the rest, one bad item fails the whole file: nothing
// invalid reaches a worker.
//
// Watcher polls the file (every second by default, as APISIX) and hands
// each new valid Spec to its caller; an invalid file is reported and the
// caller keeps serving the previous Spec.
//
// Load and Parse are safe for concurrent use. This package imports only
// admin/spec of coregate's packages.
package standalone
