package standalone

import (
	"context"
	"crypto/sha256"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"coregate/admin/spec"
	"coregate/admin/store"

	"go.yaml.in/yaml/v3"
)

// StoreOptions configure a Store.
type StoreOptions struct {
	// Path is the file: apisix.yaml, or apisix.json when it ends in .json.
	Path string
	// Prefix is the keys' prefix; "/apisix" when empty.
	Prefix string
	// Interval is how often Watch looks at the file; DefaultInterval
	// when 0.
	Interval time.Duration
	// LookupEnv resolves ${{VAR}}; nil means os.LookupEnv.
	LookupEnv func(string) (string, bool)
	// Log gets the items left out; slog.Default when nil.
	Log *slog.Logger
}

// Store is the standalone file as a read-only store.Store, for
// package storesync to follow as it follows etcd: List reads the file,
// Watch polls it, and every write is refused with store.ErrReadOnly.
//
// Each item of the file is one key, as the Admin API would have stored
// it: <prefix>/routes/<id> (arr_<n> for an item without an id), a
// consumer at consumers/<username>, a credential at
// consumers/<username>/credentials/<id>, plugin metadata at
// plugin_metadata/<plugin>; its value is the item's JSON. Keys keep the
// file's order (CreateRevision is the item's place in the file), and the
// store's revision moves on at each read that changes a key.
//
// A file that does not parse, lacks its #END (a YAML file), names a
// variable that is not set, or is not laid out as lists of the resources
// coregate reads, is refused as a whole: List returns its *LoadError and
// Watch ends with it, and the keys stay as they were. An item that cannot
// be a key (not an object, no id, an id used twice) is logged and left
// out; what its value holds is the store sync's to judge, as for etcd's.
//
// A Store is safe for concurrent use.
type Store struct {
	opts StoreOptions
	file string // base name, for errors and logs

	mu    sync.Mutex
	rev   int64
	sum   [32]byte // of the content kvs (or err) are of
	read  bool     // sum is set
	err   error    // the refusal of the content of sum; nil when it loaded
	kvs   []store.KV
	where map[string]string // item of each key, "routes[2] (id 7)"
}

var _ store.Store = (*Store)(nil)

// NewStore makes a Store of the file; nothing is read until List.
func NewStore(o StoreOptions) *Store {
	if o.Prefix == "" {
		o.Prefix = "/apisix"
	}
	if o.Interval <= 0 {
		o.Interval = DefaultInterval
	}
	if o.LookupEnv == nil {
		o.LookupEnv = os.LookupEnv
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	return &Store{opts: o, file: filepath.Base(o.Path)}
}

// Prefix implements store.Store.
func (s *Store) Prefix() string { return s.opts.Prefix }

// ReadOnly implements store.Store: true.
func (s *Store) ReadOnly() bool { return true }

// Close implements store.Store.
func (s *Store) Close() error { return nil }

// Put implements store.Store: store.ErrReadOnly.
func (s *Store) Put(context.Context, string, []byte, store.PutOptions) (store.KV, store.KV, error) {
	return store.KV{}, store.KV{}, store.ErrReadOnly
}

// Delete implements store.Store: store.ErrReadOnly.
func (s *Store) Delete(context.Context, string, int64) (store.KV, error) {
	return store.KV{}, store.ErrReadOnly
}

// GenID implements store.Store: store.ErrReadOnly.
func (s *Store) GenID(context.Context) (string, error) { return "", store.ErrReadOnly }

// Get implements store.Store, from the file as last read (List reads it).
func (s *Store) Get(_ context.Context, key string) (store.KV, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, kv := range s.kvs {
		if kv.Key == key {
			return cloneKV(kv), nil
		}
	}
	return store.KV{}, fmt.Errorf("%w: %s", store.ErrNotFound, key)
}

// Origin names the item of the file a key was read from, as LoadError
// names it ("routes[2] (id 7)"), prefixed with the file's name; "" for a
// key the file does not hold. Package storesync names the objects it
// leaves out with it.
func (s *Store) Origin(key string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if w, ok := s.where[key]; ok {
		return s.file + ": " + w
	}
	return ""
}

// List implements store.Store: it reads the file and returns its keys
// under dir, in the file's order, at the store's revision; a file refused
// as a whole is its *LoadError.
func (s *Store) List(_ context.Context, dir string) ([]store.KV, int64, error) {
	data, err := os.ReadFile(s.opts.Path)
	if err != nil {
		return nil, 0, &LoadError{File: s.file, Msg: err.Error(), kind: ErrFormat, err: err}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.load(data); err != nil {
		return nil, 0, err
	}
	var out []store.KV
	for _, kv := range s.kvs {
		if strings.HasPrefix(kv.Key, dir) {
			out = append(out, cloneKV(kv))
		}
	}
	return out, s.rev, nil
}

func cloneKV(kv store.KV) store.KV {
	kv.Value = append([]byte(nil), kv.Value...)
	return kv
}

// load makes data the store's content, unless it is the content last
// read: the keys of its items, those that are new, changed or moved at a
// new revision. A file refused as a whole leaves the keys as they were.
// s.mu is held.
func (s *Store) load(data []byte) error {
	sum := sha256.Sum256(data)
	if s.read && sum == s.sum {
		return s.err
	}
	s.sum, s.read = sum, true
	kvs, where, err := s.parse(data)
	if s.err = err; err != nil {
		return err
	}
	old := make(map[string]store.KV, len(s.kvs))
	for _, kv := range s.kvs {
		old[kv.Key] = kv
	}
	changed := len(kvs) != len(s.kvs)
	next := s.rev + 1
	for i := range kvs {
		kv := &kvs[i]
		if o, ok := old[kv.Key]; ok && o.CreateRevision == kv.CreateRevision && string(o.Value) == string(kv.Value) {
			kv.ModRevision = o.ModRevision
			continue
		}
		kv.ModRevision, changed = next, true
	}
	if changed || s.rev == 0 {
		s.rev = next
	}
	s.kvs, s.where = kvs, where
	return nil
}

// parse reads the file's items as keys; nil and a *LoadError when the file
// is refused as a whole.
func (s *Store) parse(data []byte) ([]store.KV, map[string]string, error) {
	l := &loader{file: s.file}
	doc, err := l.parse(data, s.opts.Path, s.opts.LookupEnv)
	if err != nil {
		return nil, nil, err
	}
	var kvs []store.KV
	where := map[string]string{}
	dir := s.opts.Prefix + "/"
	err = l.walk(doc, func(list string, index int, n *yaml.Node) error {
		key, item, raw, err := itemKey(list, index, n)
		if err == nil {
			if _, dup := where[dir+key]; dup {
				err = fmt.Errorf("duplicate id: %s also names %s", key, where[dir+key])
			}
		}
		if err != nil {
			if list == "global_rules" {
				// Never left out: every route would be served without
				// it (storesync refuses the configuration alike).
				return &LoadError{File: s.file, Item: item, Msg: "a global rule refuses the file, which would serve every route without it: " + err.Error(), kind: ErrInvalid, err: err}
			}
			s.opts.Log.Error("config store: invalid object left out", "file", s.file, "item", item, "err", err)
			return nil
		}
		where[dir+key] = item
		kvs = append(kvs, store.KV{Key: dir + key, Value: raw, CreateRevision: int64(len(kvs) + 1)})
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	return kvs, where, nil
}

// itemKey gives an item of the file its key under the prefix
// ("routes/7"), its name for errors ("routes[2] (id 7)") and its JSON.
func itemKey(list string, index int, n *yaml.Node) (key, item string, raw []byte, err error) {
	for n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	item = fmt.Sprintf("%s[%d]", list, index)
	if n.Kind != yaml.MappingNode {
		return "", item, nil, fmt.Errorf("want an object")
	}
	raw, err = spec.YAMLToJSON(n)
	if err != nil {
		return "", item, nil, err
	}
	switch list {
	case "consumers":
		if cid := spec.RawID(raw, "id"); spec.RawID(raw, "username").IsZero() && strings.Contains(cid.String(), "/credentials/") {
			item = fmt.Sprintf("%s (id %s)", item, cid.String())
			if _, _, ok := spec.CredentialOwner(cid.String()); !ok {
				return "", item, nil, fmt.Errorf("a credential's id is <username>/credentials/<id>")
			}
			return "consumers/" + cid.String(), item, raw, nil
		}
		u := spec.RawID(raw, "username")
		if u.IsZero() {
			if err := spec.ValidateObject(spec.KindConsumer, raw); err != nil {
				return "", item, nil, err
			}
			return "", item, nil, fmt.Errorf("missing username")
		}
		item = fmt.Sprintf("%s (username %s)", item, u.String())
		return checkKey("consumers", u.String(), item, raw)
	case "secrets":
		id := spec.RawID(raw, "id")
		item = fmt.Sprintf("%s (id %s)", item, id.String())
		if err := checkSecret(raw); err != nil {
			return "", item, nil, err
		}
		return "secrets/" + id.String(), item, raw, nil
	case "plugin_metadata":
		id := spec.RawID(raw, "id")
		if id.IsZero() {
			return "", item, nil, fmt.Errorf("missing plugin name (id)")
		}
		item = fmt.Sprintf("%s (id %s)", item, id.String())
		return checkKey(list, id.String(), item, raw)
	}
	id := spec.RawID(raw, "id")
	if id.IsZero() {
		id = spec.StringID(fmt.Sprintf("arr_%d", index+1))
	}
	item = fmt.Sprintf("%s (id %s)", item, id.String())
	return checkKey(list, id.String(), item, raw)
}

// checkKey refuses an id that would not be one key.
func checkKey(list, id, item string, raw []byte) (string, string, []byte, error) {
	if strings.Contains(id, "/") {
		return "", item, nil, fmt.Errorf("invalid id %q", id)
	}
	return list + "/" + id, item, raw, nil
}

// Watch implements store.Store: it polls the file every Interval and
// sends the keys it changed. A file refused as a whole ends the watch
// with its *LoadError once it has settled (found unchanged at the next
// poll, or refused again: a file caught mid-write and complete at the
// next poll is not reported); a watch from a revision the store has moved
// past ends with store.ErrCompacted.
func (s *Store) Watch(ctx context.Context, dir string, fromRev int64) <-chan store.WatchResponse {
	ch := make(chan store.WatchResponse, 1)
	go func() {
		defer close(ch)
		send := func(wr store.WatchResponse) bool {
			select {
			case ch <- wr:
				return true
			case <-ctx.Done():
				return false
			}
		}
		s.mu.Lock()
		rev, kvs := s.rev, s.kvs
		s.mu.Unlock()
		if rev >= fromRev {
			send(store.WatchResponse{Err: store.ErrCompacted})
			return
		}
		var info os.FileInfo
		var readAt time.Time
		var pending error
		t := time.NewTicker(s.opts.Interval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			fi, err := os.Stat(s.opts.Path)
			if err != nil {
				send(store.WatchResponse{Err: &LoadError{File: s.file, Msg: err.Error(), kind: ErrFormat, err: err}})
				return
			}
			racy := fi.ModTime().After(readAt.Add(-2 * s.opts.Interval))
			if sameFile(fi, info) && !racy {
				if pending != nil {
					send(store.WatchResponse{Err: pending})
					return
				}
				continue
			}
			data, err := os.ReadFile(s.opts.Path)
			if err != nil {
				continue // gone between stat and read: the next poll says so
			}
			if fi2, err := os.Stat(s.opts.Path); err != nil || !sameFile(fi, fi2) {
				continue // still being written
			}
			info, readAt = fi, time.Now()
			s.mu.Lock()
			same := s.read && sha256.Sum256(data) == s.sum
			err = s.load(data)
			newRev, newKVs := s.rev, s.kvs
			s.mu.Unlock()
			if err != nil {
				if pending != nil || same {
					send(store.WatchResponse{Err: err})
					return
				}
				pending = err // judged at the next poll
				continue
			}
			pending = nil
			if newRev == rev {
				continue
			}
			wr := store.WatchResponse{Revision: newRev, Events: diff(kvs, newKVs, dir, newRev)}
			rev, kvs = newRev, newKVs
			if !send(wr) {
				return
			}
		}
	}()
	return ch
}

// diff is the events from the keys before to those after, under dir: a
// put for each key new or changed, a deletion for each gone.
func diff(before, after []store.KV, dir string, rev int64) []store.Event {
	var evs []store.Event
	kept := make(map[string]bool, len(after))
	for _, kv := range after {
		kept[kv.Key] = true
		if kv.ModRevision == rev && strings.HasPrefix(kv.Key, dir) {
			evs = append(evs, store.Event{Type: store.EventPut, KV: cloneKV(kv)})
		}
	}
	for _, kv := range before {
		if !kept[kv.Key] && strings.HasPrefix(kv.Key, dir) {
			evs = append(evs, store.Event{Type: store.EventDelete, KV: store.KV{Key: kv.Key, ModRevision: rev}})
		}
	}
	return evs
}
