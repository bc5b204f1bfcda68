// Package etcdstore is the store.Store of a node whose configuration lives
// in etcd: an external cluster (deployment.etcd.host) or the etcd that the
// node embeds and starts itself (StartEmbedded), the default.
//
// The layout is APISIX's (apisix/core/etcd.lua), so tools written for it
// read the same data: keys <prefix>/<resource>/<id>, values the objects'
// JSON, createdIndex and modifiedIndex etcd's create and mod revisions. A
// Put asks etcd for the previous value (prev_kv), which tells the Admin API
// a created key (201) from a replaced one (200); a compare-and-swap is a
// transaction on the key's mod revision; a TTL is a lease; GenID is the
// revision of a write to <prefix>/gen_id, formatted %020d as APISIX does.
//
// Every call is bounded by the store's timeout (deployment.etcd.timeout)
// and its errors wrap the store package's sentinels: ErrNotFound,
// ErrConflict, ErrCompacted, and ErrUnavailable for everything else that
// etcd or the network can answer (the Admin API's 503).
//
// A watch proves its connection alive by asking etcd for a progress
// notification every KeepAlive; a watch that hears nothing for three of
// them ends with ErrUnavailable, so its owner knows the store is gone and
// resynchronises when it is back, instead of waiting in the client's
// silent retries. Until etcd's revision reaches the watch's start (a
// watch from the revision after a List's, on an etcd nobody writes to),
// etcd 3.7 sends it no progress notification (etcd-io/etcd#20229): the
// watch asks for etcd's revision instead, with a read of one key. A
// compacted start revision ends a watch with ErrCompacted, and so does an
// etcd that answers from a revision lower than one it showed before
// (wiped, or restored from a backup): what the watch saw may be gone.
//
// StartEmbedded reads the embedded etcd's database before etcd opens it
// and refuses one that would crash the process (etcd maps the file: a
// file cut short is a SIGBUS there, garbage a Go panic, neither naming the
// file) with a DamagedError that names it.
//
// The store connects lazily: New does not dial, so a node whose etcd is
// down still starts (and serves its last good configuration) and the
// first call that reaches etcd connects.
//
// The node's own store calls the etcd it embeds in process
// (Options.Embedded: etcd's v3client, no socket, no gRPC encoding), a
// third of the CPU of an Admin API write over its loopback listener, and
// its Gets are serializable there (one member answers a write only once
// it has applied it: Store.getOpts); other nodes and tools reach that
// etcd over the listener, as they reach an external one.
package etcdstore
