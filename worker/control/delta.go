package control

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"slices"
	"sync/atomic"
	"unsafe"

	"coregate/admin/spec"
	"coregate/internal/ptrlist"
)

// A Delta payload carries a configuration as the changes from the one the
// worker received before it on the same control socket (its base): per
// resource, the new list in order, as runs of the base's objects kept
// ([i, j]: the base's objects i to j-1) and the objects new or changed
// (the object itself, in the Spec's JSON form), with the base's hash and
// the new one:
//
//	{"base":"<hex>","hash":"<hex>","routes":[[0,4000],{"id":"4001",...}],"upstreams":[[0,1]]}
//
// A resource left out has no objects. "checked", after the hash, is the
// new Spec's mark (spec.Spec.Checked), when it has one. A worker decodes only what changed,
// where a Config costs it every object again: 25-40 ms for 5 000 routes,
// per push, during a bulk load of them.
//
// The supervisor knows what changed by identity: the configuration store
// shares the objects it did not change between one Spec and the next
// (routes, services and upstreams by pointer; consumers, plugin configs,
// global rules, consumer groups and ssls by pointer or, failing that, by
// value; the JSON-kept resources by content), and a resource's list
// whole when none of its objects changed, which is one run without a
// comparison. A Spec that shares nothing with the base goes as
// a Config instead.

// deltaKind is one resource of a Delta: its member name and, for the
// JSON-kept resources, the member holding an object's id and the list of a
// Spec that holds them. deltaKinds lists them in the Spec's JSON order;
// the decoded resources (routes, services, upstreams, consumers, plugin
// configs, global rules, consumer groups, ssls), each of its own type, are
// named again where they are encoded and decoded.
type deltaKind struct {
	name string
	// idKey is the member holding a JSON-kept object's id.
	idKey string
	// list returns a Spec's list of the resource; nil for the decoded
	// resources.
	list func(*spec.Spec) *[]json.RawMessage
}

var deltaKinds = [...]deltaKind{
	{name: "routes"},
	{name: "services"},
	{name: "upstreams"},
	{name: "consumers"},
	{name: "plugin_configs"},
	{name: "global_rules"},
	{name: "consumer_groups"},
	{"credentials", "id", func(s *spec.Spec) *[]json.RawMessage { return &s.Credentials }},
	{"plugin_metadata", "id", func(s *spec.Spec) *[]json.RawMessage { return &s.PluginMetadata }},
	{name: "ssls"},
	{"secrets", "id", func(s *spec.Spec) *[]json.RawMessage { return &s.Secrets }},
}

// jsonKept returns the JSON-kept resource named name, or nil.
func jsonKept(name string) *deltaKind {
	for i := range deltaKinds {
		if k := &deltaKinds[i]; k.name == name && k.list != nil {
			return k
		}
	}
	return nil
}

// EncodeDelta encodes next as a Delta payload against base, the Spec last
// sent on the same socket. ok is false when a Delta would not pay: either
// Spec has no hash, or next keeps none of base's objects; send a Config
// then. An encoding over MaxFrame is ErrFrameTooLarge.
func EncodeDelta(base, next *spec.Spec) (payload []byte, ok bool, err error) {
	var zero [32]byte
	if base == nil || next == nil || base.Hash == zero || next.Hash == zero {
		return nil, false, nil
	}
	var b bytes.Buffer
	b.WriteString(`{"base":"`)
	b.WriteString(hex.EncodeToString(base.Hash[:]))
	b.WriteString(`","hash":"`)
	b.WriteString(hex.EncodeToString(next.Hash[:]))
	b.WriteByte('"')
	if next.Checked != ([32]byte{}) {
		b.WriteByte(',')
		b.Write(appendChecked(nil, next.Checked))
	}
	kept := 0
	for _, k := range deltaKinds {
		var n int
		switch k.name {
		case "routes":
			n, err = encodeRuns(&b, k.name, base.Routes, next.Routes, routeID, same, ptrlist.SamePrefix)
		case "services":
			n, err = encodeRuns(&b, k.name, base.Services, next.Services, serviceID, same, ptrlist.SamePrefix)
		case "upstreams":
			n, err = encodeRuns(&b, k.name, base.Upstreams, next.Upstreams, upstreamID, same, ptrlist.SamePrefix)
		case "consumers":
			n, err = encodeRuns(&b, k.name, base.Consumers, next.Consumers, consumerID, sameValue, ptrlist.SamePrefix)
		case "plugin_configs":
			n, err = encodeRuns(&b, k.name, base.PluginConfigs, next.PluginConfigs, pluginConfigID, sameValue, ptrlist.SamePrefix)
		case "global_rules":
			n, err = encodeRuns(&b, k.name, base.GlobalRules, next.GlobalRules, globalRuleID, sameValue, ptrlist.SamePrefix)
		case "consumer_groups":
			n, err = encodeRuns(&b, k.name, base.ConsumerGroups, next.ConsumerGroups, consumerGroupID, sameValue, ptrlist.SamePrefix)
		case "ssls":
			n, err = encodeRuns(&b, k.name, base.SSLs, next.SSLs, sslID, sameValue, ptrlist.SamePrefix)
		default:
			id := func(raw json.RawMessage) string { return spec.RawID(raw, k.idKey).String() }
			n, err = encodeRuns(&b, k.name, *k.list(base), *k.list(next), id, sameRaw, nil)
		}
		if err != nil {
			return nil, false, fmt.Errorf("control: delta: %w", err)
		}
		kept += n
	}
	b.WriteByte('}')
	if kept == 0 {
		return nil, false, nil
	}
	if b.Len()+1 > MaxFrame {
		return nil, false, ErrFrameTooLarge
	}
	return b.Bytes(), true, nil
}

func routeID(r *spec.Route) string                 { return r.ID.String() }
func serviceID(s *spec.Service) string             { return s.ID.String() }
func upstreamID(u *spec.Upstream) string           { return u.ID.String() }
func consumerID(c *spec.Consumer) string           { return c.Username }
func pluginConfigID(pc *spec.PluginConfig) string  { return pc.ID.String() }
func globalRuleID(gr *spec.GlobalRule) string      { return gr.ID.String() }
func consumerGroupID(g *spec.ConsumerGroup) string { return g.ID.String() }
func sslID(s *spec.SSL) string                     { return s.ID.String() }
func same[T comparable](a, b T) bool               { return a == b }
func sameRaw(a, b json.RawMessage) bool            { return bytes.Equal(a, b) }

// sameValue: the same object, or an equal one (a standalone file read
// again makes new objects of the same content).
func sameValue[T any](a, b *T) bool { return a == b || reflect.DeepEqual(a, b) }

// lookAhead is how many of base's objects encodeRuns compares past the
// next one before it indexes them by id.
const lookAhead = 8

// encodeRuns writes the member name of a Delta for next against base, if
// next is not empty, and returns how many of base's objects it keeps. An
// object is kept when the one at the same position in base (after the
// last kept), or else base's object with its id, is the same. An object
// that replaces the one at that position (the same id) is sent, as is one
// that comes when every object of base was kept or replaced (added at the
// end); the base's ids are indexed only for an object found neither there
// nor lookAhead objects further: one route replaced, added or removed
// among 50 000 costs a comparison of pointers per object, where the index
// of their ids was most of the encoding's time. An object sent that base
// had elsewhere only makes the payload larger: the worker decodes it.
//
// prefix, when not nil, is ptrlist.SamePrefix for the lists of pointers: the
// objects kept in order are found a run at a time with it, same
// called only where it ends, and a list next shares whole with base (the
// store's sync shares a resource's list between two Specs when none of
// its objects changed) is one run without a scan; one that begins in
// base's array (the store's sync grows a list that only has objects
// added in place: spec.Spec) is one run without a comparison, then the
// objects added. The runs are those the comparisons one at a time would
// find.
func encodeRuns[T any](b *bytes.Buffer, name string, base, next []T, id func(T) string, same func(a, b T) bool, prefix func(a, b []T) int) (int, error) {
	if len(next) == 0 {
		return 0, nil
	}
	b.WriteString(`,"`)
	b.WriteString(name)
	b.WriteString(`":[`)
	if len(base) == len(next) && unsafe.SliceData(base) == unsafe.SliceData(next) {
		fmt.Fprintf(b, "[0,%d]]", len(next))
		return len(next), nil
	}
	var byID map[string]int // built at the first object not found in order
	kept, j := 0, 0         // j: the base object after the last kept
	left := len(base)       // base's objects neither kept nor replaced yet
	runFrom, runTo := -1, -1
	first := true
	sep := func() {
		if !first {
			b.WriteByte(',')
		}
		first = false
	}
	flush := func() {
		if runFrom >= 0 {
			sep()
			fmt.Fprintf(b, "[%d,%d]", runFrom, runTo)
			runFrom = -1
		}
	}
	for at := 0; at < len(next); at++ {
		if prefix != nil && j < len(base) {
			if m := prefix(base[j:], next[at:]); m > 0 {
				kept += m
				left -= m
				if runFrom >= 0 && j == runTo {
					runTo += m
				} else {
					flush()
					runFrom, runTo = j, j+m
				}
				j += m
				at += m - 1
				continue
			}
		}
		v := next[at]
		k := -1
		switch {
		case j < len(base) && same(base[j], v):
			k = j
		case j < len(base) && id(base[j]) == id(v):
			// replaced in place, as a change to one object of a large
			// configuration mostly is
			j++
			left--
		case left > 0:
			// a few removed before it: looked for a little ahead first
			for i := j + 1; i < min(j+1+lookAhead, len(base)); i++ {
				if same(base[i], v) {
					k = i
					break
				}
			}
			if k >= 0 {
				break
			}
			if byID == nil {
				byID = make(map[string]int, len(base))
				for i, o := range base {
					byID[id(o)] = i
				}
			}
			if i, ok := byID[id(v)]; ok && same(base[i], v) {
				k = i
			}
		}
		if k < 0 {
			flush()
			sep()
			e, err := json.Marshal(v)
			if err != nil {
				return 0, fmt.Errorf("%s: %w", name, err)
			}
			b.Write(e)
			continue
		}
		kept++
		left--
		j = k + 1
		if runFrom >= 0 && k == runTo {
			runTo++
			continue
		}
		flush()
		runFrom, runTo = k, k+1
	}
	flush()
	b.WriteByte(']')
	return kept, nil
}

// ErrBase is DecodeDelta's error for a Delta whose base is not the Spec
// the worker holds: the two sides disagree on what was sent, and the
// worker asks for the whole configuration (AppliedMsg.Resync).
var ErrBase = errors.New("control: delta against another configuration")

// DecodeDelta builds the Spec a Delta payload describes from base, the
// Spec of the previous Config or Delta received, and checks its
// references as DecodeSpec does: from what changed when it can
// (deltaChecked), base having passed the same check, else whole. base's
// objects are shared, not copied: neither side modifies a Spec's objects.
// each, if not nil, is called after every object decoded.
func DecodeDelta(payload []byte, base *spec.Spec, each func()) (*spec.Spec, error) {
	if each == nil {
		each = func() {}
	}
	s := new(spec.Spec)
	changes := map[string]*memberChange{}
	dec := json.NewDecoder(bytes.NewReader(payload))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, fmt.Errorf("control: delta: want an object (%v)", err)
	}
	var sawBase, sawHash bool
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, fmt.Errorf("control: delta: %w", err)
		}
		key, _ := t.(string)
		if !sawBase && key != "base" {
			return nil, errors.New("control: delta: the base's hash must come first")
		}
		switch key {
		case "checked":
			var h string
			if err = dec.Decode(&h); err == nil {
				s.Checked, err = spec.ParseHash(h)
			}
		case "base", "hash":
			var h string
			var sum [32]byte
			if err = dec.Decode(&h); err == nil {
				sum, err = spec.ParseHash(h)
			}
			if err != nil {
				break
			}
			if key == "hash" {
				s.Hash, sawHash = sum, true
				break
			}
			if sawBase {
				return nil, errors.New("control: delta: two bases")
			}
			sawBase = true
			if base == nil || base.Hash != sum {
				return nil, ErrBase
			}
		case "routes", "services", "upstreams", "consumers", "plugin_configs", "global_rules", "consumer_groups", "ssls":
			if changes[key] != nil {
				return nil, fmt.Errorf("control: delta: two %s", key)
			}
			c := new(memberChange)
			changes[key] = c
			switch key {
			case "routes":
				err = decodeRuns(dec, base.Routes, &s.Routes, c, each, tailOf(key))
			case "services":
				err = decodeRuns(dec, base.Services, &s.Services, c, each, tailOf(key))
			case "upstreams":
				err = decodeRuns(dec, base.Upstreams, &s.Upstreams, c, each, tailOf(key))
			case "consumers":
				err = decodeRuns(dec, base.Consumers, &s.Consumers, c, each, tailOf(key))
			case "plugin_configs":
				err = decodeRuns(dec, base.PluginConfigs, &s.PluginConfigs, c, each, tailOf(key))
			case "global_rules":
				err = decodeRuns(dec, base.GlobalRules, &s.GlobalRules, c, each, tailOf(key))
			case "consumer_groups":
				err = decodeRuns(dec, base.ConsumerGroups, &s.ConsumerGroups, c, each, tailOf(key))
			case "ssls":
				err = decodeRuns(dec, base.SSLs, &s.SSLs, c, each, tailOf(key))
			}
		default:
			if k := jsonKept(key); k != nil {
				if changes[key] != nil {
					return nil, fmt.Errorf("control: delta: two %s", key)
				}
				c := new(memberChange)
				changes[key] = c
				err = decodeRuns(dec, *k.list(base), k.list(s), c, each, tailOf(key))
			} else {
				err = fmt.Errorf("unknown member %q", key)
			}
		}
		if err != nil {
			return nil, fmt.Errorf("control: delta: %s: %w", key, err)
		}
	}
	if _, err := dec.Token(); err != nil {
		return nil, fmt.Errorf("control: delta: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("control: delta: data after the configuration")
	}
	if !sawBase || !sawHash {
		return nil, errors.New("control: delta: base or hash missing")
	}
	if c := changes["routes"]; c != nil {
		compactPlugins(s.Routes, c.added)
	}
	if deltaChecked(base, s, changes) {
		return s, nil
	}
	if err := s.Check(); err != nil {
		return nil, fmt.Errorf("control: config: %w", err)
	}
	return s, nil
}

// listTail is the room a list DecodeDelta made has past its length: the
// list's address, its length and the capacity of its array. The list in
// the Spec has its capacity cut to its length, so that nothing appends to
// it but decodeRuns, which, given the tail of base's list, makes the next
// list in the same array when it begins with all of base's objects:
// base's list, and every list before it in the array, are shorter, and
// their objects stay as they are.
type listTail struct {
	list   unsafe.Pointer
	n, cap int
}

// listTails holds, by resource (an index in deltaKinds), the tail of the
// last list of that resource DecodeDelta made: the next Delta, against the
// Spec of that list, takes it (Swap), so that one list only is ever made
// in an array's room. A Delta of a bulk load, routes added at the end,
// then writes them after base's, where it copied the 50 000 routes kept
// into a list of their own: 400 kB of a worker's garbage a push.
var listTails [len(deltaKinds)]atomic.Pointer[listTail]

// tailOf returns listTails' entry of the resource named name.
func tailOf(name string) *atomic.Pointer[listTail] {
	for i := range deltaKinds {
		if deltaKinds[i].name == name {
			return &listTails[i]
		}
	}
	panic("control: no resource " + name)
}

// routesTail is the routes' entry of listTails.
var routesTail = tailOf("routes")

// Extends reports whether the list of routes next begins with all of
// prev's objects, at the same places, known without reading them: prev
// is empty, or both lists begin where the last list of routes DecodeDelta
// made in its own array begins (listTail), and next is no shorter than
// prev nor longer than that list. The lists made in one array are made one
// after another, each beginning with all of the last one's objects, and
// each of the array's elements is written once, past the length of
// every list made there before, by the decode that makes the list
// holding it (a Delta refused after it was decoded included): the
// shorter of two lists that begin there is the longer one's beginning.
// It holds as long as no one writes a decoded list's elements in place,
// which neither side does.
//
// A worker's build asks it of the routes of the Spec it builds and those
// of the snapshot served (worker.compile): during a bulk load, each Delta
// adds a few routes at the end, and the 50 000 kept were compared pointer
// by pointer with the snapshot's, a sixth of the instructions of a route
// added (cachegrind, Deltas as BenchmarkDeltaApply/added-to-50000's).
func Extends(prev, next []*spec.Route) bool {
	if len(prev) == 0 {
		return true
	}
	p := unsafe.Pointer(unsafe.SliceData(next))
	if len(prev) > len(next) || unsafe.Pointer(unsafe.SliceData(prev)) != p {
		return false
	}
	t := routesTail.Load()
	return t != nil && t.list == p && len(next) <= t.n
}

// decodeRuns sets *dst to the list of the JSON array dec is at: base's
// objects for each run [i, j], a decoded object for each object; c
// records both. tail is the resource's listTails entry.
//
// The list is made once, sized for base's objects and a few more: a
// Delta's list is mostly the base's, and appending to it regrew it from
// the first run's length, one route changed in the middle of 50 000
// making 660 kB of lists where the one kept is 400 kB
// (BenchmarkDeltaChange/decode-one-of-50000). A list that begins with all
// of base's objects is made in base's array, when it has room and base's
// list was the last made there (listTail).
func decodeRuns[T any](dec *json.Decoder, base []T, dst *[]T, c *memberChange, each func(), tail *atomic.Pointer[listTail]) error {
	*dst = nil
	sized := false
	room := func(more int) {
		if sized || len(*dst)+more <= cap(*dst) {
			return
		}
		sized = true
		list := make([]T, len(*dst), max(len(*dst)+more, len(base)+len(base)/64+16))
		copy(list, *dst)
		*dst = list
	}
	// owned: *dst's array past its length is this list's alone (a list
	// made here, or base's room taken over).
	owned := false
	defer func() {
		if owned || sized {
			tail.Store(&listTail{list: unsafe.Pointer(unsafe.SliceData(*dst)), n: len(*dst), cap: cap(*dst)})
		}
		*dst = slices.Clip(*dst)
	}()
	if t, err := dec.Token(); err != nil || t != json.Delim('[') {
		return fmt.Errorf("want an array (%v)", err)
	}
	for dec.More() {
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return err
		}
		if len(raw) > 0 && raw[0] == '[' {
			var run [2]int
			if err := json.Unmarshal(raw, &run); err != nil {
				return fmt.Errorf("run %s: %w", raw, err)
			}
			if run[0] < 0 || run[0] >= run[1] || run[1] > len(base) {
				return fmt.Errorf("run %s out of the base's %d objects", raw, len(base))
			}
			if *dst == nil {
				// shared, not copied: an object appended after it
				// copies it (its capacity ends with it), unless base's
				// room is this list's to take
				*dst = base[run[0]:run[1]:run[1]]
				if run[0] == 0 && run[1] == len(base) {
					if t := tail.Load(); t != nil && t.list == unsafe.Pointer(unsafe.SliceData(base)) && t.n == len(base) &&
						t.cap > len(base) && tail.CompareAndSwap(t, nil) {
						*dst = unsafe.Slice((*T)(t.list), t.cap)[:len(base)]
						owned = true
					}
				}
			} else {
				room(run[1] - run[0])
				*dst = append(*dst, base[run[0]:run[1]]...)
			}
			c.runs = append(c.runs, run)
			continue
		}
		var v T
		if err := json.Unmarshal(raw, &v); err != nil {
			return err
		}
		c.added = append(c.added, len(*dst))
		room(1)
		*dst = append(*dst, v)
		each()
	}
	_, err := dec.Token()
	return err
}
