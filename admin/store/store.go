// Package store is the one interface behind which a node's configuration
// is kept: etcd (embedded or an external cluster, package etcdstore) or the
// standalone apisix.yaml (read-only). The Admin API writes through it and
// the supervisor reads and watches through it.
//
// Keys follow APISIX's etcd layout: <prefix>/<resource>/<id>, for example
// /apisix/routes/1 or /apisix/consumers/jack; values are the objects' JSON
// as the Admin API shows them under "value". Revisions are etcd's:
// CreateRevision and ModRevision of a key are the Admin API's createdIndex
// and modifiedIndex.
package store

import (
	"context"
	"errors"
)

// Sentinel errors; implementations wrap them so that errors.Is works.
var (
	// ErrNotFound: no such key.
	ErrNotFound = errors.New("store: key not found")
	// ErrConflict: a compare-and-swap found another revision (the Admin
	// API reads and tries again; 503 "value changed before overwritten"
	// once the request's time is up).
	ErrConflict = errors.New("store: value changed before overwritten")
	// ErrUnavailable: the backend cannot be reached or did not answer in
	// time (the Admin API answers 503).
	ErrUnavailable = errors.New("store: unavailable")
	// ErrReadOnly: the store does not take writes (standalone apisix.yaml).
	ErrReadOnly = errors.New("store: read-only")
	// ErrCompacted: a watch asked for a revision the backend no longer
	// has; the watcher must resynchronise from a full List.
	ErrCompacted = errors.New("store: revision compacted")
)

// KV is one stored key. Value is the caller's to keep.
type KV struct {
	Key            string // full key, "/apisix/routes/1"
	Value          []byte // the object's JSON
	CreateRevision int64
	ModRevision    int64
}

// PutOptions qualify a Put.
type PutOptions struct {
	// IfModRevision, when not 0, makes the Put a compare-and-swap: it
	// succeeds only if the key's ModRevision is this one (ErrConflict
	// otherwise). -1 means "only if the key does not exist".
	IfModRevision int64
	// TTL, when not 0, attaches a lease of that many seconds: the key
	// disappears when it expires (the Admin API's ?ttl=).
	TTL int64
}

// EventType says what happened to a key.
type EventType uint8

// Event types.
const (
	EventPut EventType = iota + 1
	EventDelete
)

// Event is one change seen by a watch. For EventDelete, KV.Value is nil
// and KV.ModRevision is the revision of the deletion.
type Event struct {
	Type EventType
	KV   KV
}

// WatchResponse is one batch of events, in revision order, ending at
// Revision. Err, when not nil, ends the watch: ErrCompacted (resync with
// List and watch again from its revision) or ErrUnavailable.
type WatchResponse struct {
	Events   []Event
	Revision int64
	Err      error
}

// Store keeps a node's configuration. All methods are safe for concurrent
// use and honour ctx's deadline; a backend that cannot be reached gives
// ErrUnavailable.
type Store interface {
	// Prefix is the key prefix, "/apisix" by default.
	Prefix() string
	// Get reads one key (ErrNotFound if absent).
	Get(ctx context.Context, key string) (KV, error)
	// List reads every key under dir (a prefix such as "/apisix/routes/"
	// or the whole Prefix()+"/"), sorted by CreateRevision, and the store
	// revision the read was made at.
	List(ctx context.Context, dir string) ([]KV, int64, error)
	// Put writes a key and returns the stored KV and the one it replaced
	// (prev.Key == "" when the key was new).
	Put(ctx context.Context, key string, value []byte, opts PutOptions) (kv, prev KV, err error)
	// Delete removes a key; ErrNotFound if it was absent. With
	// ifModRevision not 0 it is a compare-and-swap as PutOptions says.
	Delete(ctx context.Context, key string, ifModRevision int64) (prev KV, err error)
	// GenID mints a new object id as APISIX does: the revision of a write
	// to <prefix>/gen_id, formatted %020d.
	GenID(ctx context.Context) (string, error)
	// Watch streams the changes under dir from revision fromRev on (the
	// revision after a List's). The channel closes when ctx ends or after
	// a response with Err.
	Watch(ctx context.Context, dir string, fromRev int64) <-chan WatchResponse
	// ReadOnly reports whether writes are refused (ErrReadOnly).
	ReadOnly() bool
	// Close releases the store's connections.
	Close() error
}
