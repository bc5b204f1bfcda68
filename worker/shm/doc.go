// Package shm is the node's shared memory: the counter table, the
// plugins.Counters that every worker process maps, so that a limit of N
// across all workers admits exactly N (limit-count's policy "local"); and
// the metrics segment (metrics.go), one region per worker slot, where each
// worker writes its plugins' series (plugins.Metrics) and its share of the
// node's counters for the supervisor to sum at scrape time; and the TLS
// session ticket keys (tickets.go), which the supervisor writes and
// rotates and every worker reads, so that a ticket one worker issued
// resumes on any other; and the upstream health region (health.go): each
// checked upstream node's state and health-check counters, which the
// supervisor's probes and every worker's traffic report into and the
// workers' balancers read.
//
// # The segment
//
// The supervisor creates the segment once (Create: a memfd of a fixed
// size, sealed against shrinking and growing so that no process can make
// another's mapping fault) and keeps it for its whole life; each worker it
// spawns inherits the file and maps it (Open). Counters therefore outlive a
// worker's restart, and they outlive a configuration reload because their
// keys name what they count (route, plugin configuration, key value), not
// a configuration version.
//
// The segment is a header (magic, layout version, slot size, slot count,
// the seed of the keys' hash, random per segment) and a power-of-two array of 128-byte slots, an open-addressing hash table
// probed linearly from the key's hash, over at most MaxProbe slots.
//
// # A slot
//
// Every field of a slot is a 64-bit word read and written with atomic
// operations, the key's bytes included (packed eight to a word), so that
// processes and goroutines never race on plain memory. A slot's control
// word holds its state, a 32-bit tag of its key's hash and a generation
// (or, while busy, the second it was claimed):
//
//	empty  never used: ends a probe chain
//	busy   claimed by one process, which is writing the key, expiry and count
//	ready  a live or expired counter: key, expiry, count
//	free   given up (a tombstone): reusable, but a probe chain goes through it
//
// Claiming is one compare-and-swap of the control word; there is no lock a
// dead process could hold. A process that dies while a slot is busy leaves
// it busy, and any process that meets it more than StuckAfter after its
// claim frees it, so a killed worker wedges nothing for long.
//
// A key is inserted at the first free or expired slot of its chain, or at
// the chain's empty end. Two processes inserting one key at once may claim
// two slots; each looks again along the chain once it has claimed its own,
// and one of them gives its slot up (the later one in the chain at once,
// the earlier one when the later one became ready), so that a key never has
// two live counters. A counter that expired is reset in place for its own
// key (count zero, new expiry, under the busy state), and given to another
// key only when that key finds no empty slot first.
//
// Lookups of a present key do not allocate; a key longer than the slot's
// key area (KeyBytes) is stored as its SHA-256 digest.
//
// # Concurrency
//
// A Table is safe for concurrent use by any number of goroutines and
// processes. A counter returned by Counter stays mapped for the Table's
// life; its holder uses it only until it expires, after which the slot may
// count for another key.
package shm
