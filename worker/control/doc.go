// Package control is the protocol between the supervisor and its worker
// processes, over the stream socket each worker inherits (a socketpair made
// by the supervisor).
//
// A frame is a 4-byte big-endian length n, then n bytes: one byte of type
// and the payload (JSON, or empty). Frames are read and written by one
// goroutine on each side; Conn serialises writers with a mutex so a worker
// may report from several goroutines.
//
// A Config payload is the whole spec.Spec in its own JSON form (every
// resource, consumers, plugin configs and global rules included, and its
// hash): the protocol keeps no second list of the model's fields. The
// supervisor encodes each configuration once (EncodeSpec) and sends the
// same bytes to every worker (SendPayload); a worker decodes it and checks
// its references (DecodeSpec) before it compiles it.
//
// A Spec whose plugin configurations the supervisor's registry checked
// (spec.Spec.Checked: the store's sync and the standalone loader mark what
// they served) carries that mark in its Config and Delta payloads,
// "checked", and the worker builds it without checking those
// configurations again when its registry has the same fingerprint
// (plugins.Registry.Trusts). A worker can trust the mark because nothing
// but its supervisor writes on its control socket: a socketpair its
// supervisor made, or a takeover connection it accepted only from its own
// user or root (PeerCred); a supervisor of another build has another
// fingerprint, and its mark is not trusted.
//
// Once a worker holds a configuration, the next goes as a Delta: the
// objects new or changed, and runs of the previous configuration's
// objects kept (EncodeDelta, DecodeDelta), so that a worker decodes what
// changed, not every object again, and checks the ids and references of
// what changed, not of every object (deltaChecked; the whole Spec when an
// object others may name was removed; a reference to a list the Delta
// before kept whole looked up in that list's ids, kept with it). A worker
// that cannot apply a Delta answers Applied with Resync and gets the
// configuration whole. In both, a route's plugins are kept as a list
// sorted by name (spec.Route.PluginList, its Plugins nil), and a route
// decoded after one with a plugin of the same configuration shares that
// configuration's bytes, and the plugins' names, with it (routes loaded
// in bulk are mostly alike).
//
// A conversation: the supervisor sends Config at once; the worker listens
// only after it holds that first complete configuration, then sends Ready.
// Every Config and Delta is answered with Applied (an error there means the worker
// kept its previous configuration). Drain asks the worker to stop
// gracefully. A worker that exits on an error sends
// Fatal with it first. The worker sends Stats every StatsEvery while its
// event loop turns: the supervisor takes a worker that misses them out of
// the socket selector, and sends it Rejoin when it speaks again.
//
// A worker whose control socket reaches end of file without a Drain (its
// supervisor was killed) serves on with the configuration it holds and
// waits on an abstract Unix socket (TakeoverAddr, listed by FindTakeover)
// for the next supervisor of the node. It answers a connection from its
// own user or root (PeerCred) with Hello, the node's shared objects passed
// beside it (SendFiles, RecvFiles): the counter table, the metrics segment
// and the eBPF selector's objects. That connection is its control socket
// from then on, and the conversation goes on as above, the new supervisor
// sending the configuration whole first. A worker started without a
// takeover key drains when its supervisor is gone.
package control
