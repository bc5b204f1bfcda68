package etcdstore

import (
	"context"
	"fmt"

	"coregate/admin/store"
)

// Down is the store of a node whose etcd could not be started (a
// DamagedError): every call answers store.ErrUnavailable wrapping err, so
// that the node serves its local copy, reports etcd unreachable, and the
// Admin API answers 503 with why. Safe for concurrent use.
func Down(o Options, err error) (store.Store, error) {
	p, perr := prefixOf(o)
	if perr != nil {
		return nil, perr
	}
	return down{prefix: p, err: fmt.Errorf("%w: %w", store.ErrUnavailable, err)}, nil
}

type down struct {
	prefix string
	err    error
}

func (d down) Prefix() string { return d.prefix }

func (d down) Get(context.Context, string) (store.KV, error) { return store.KV{}, d.err }

func (d down) List(context.Context, string) ([]store.KV, int64, error) { return nil, 0, d.err }

func (d down) Put(context.Context, string, []byte, store.PutOptions) (kv, prev store.KV, err error) {
	return kv, prev, d.err
}

func (d down) Delete(context.Context, string, int64) (store.KV, error) { return store.KV{}, d.err }

func (d down) GenID(context.Context) (string, error) { return "", d.err }

func (d down) Watch(context.Context, string, int64) <-chan store.WatchResponse {
	ch := make(chan store.WatchResponse, 1)
	ch <- store.WatchResponse{Err: d.err}
	close(ch)
	return ch
}

func (d down) ReadOnly() bool { return false }

func (d down) Close() error { return nil }
