package spec

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"encoding/json"
	"io"
)

// Encoder writes Specs in their JSON form, MarshalJSON's byte for byte,
// an object at a time (Encode), and keeps the form of every object it
// wrote until it writes a Spec without it, so that the next Spec, which
// shares the objects that did not change (a Spec's objects are never
// modified once in it, and the store's sync hands them on by pointer from
// one Spec to the next), costs the encoding of those that changed and a
// copy of the rest.
//
// It is how the supervisor writes its local copy of the store
// (config-cache.json), once a second during a bulk load: encoded whole
// (MarshalJSON, encoding/json over the Spec), a copy of bench admin's
// configuration at 50 000 routes and 20 000 upstreams was 14 MB built in
// memory three times over, 104 MB of garbage and 220-235 ms of CPU a
// write; streamed from the forms kept, after one route changed, it is
// 13-15 ms of CPU and 3 KB of garbage (BenchmarkWriteCache in package
// storesync).
//
// The forms are kept by the object's pointer (a credential's, a plugin
// metadata's and a secret's, json.RawMessage, by where its bytes lie), as
// strings: the configuration's JSON once (some 200 bytes a route of
// bench admin's) and a map entry of some 40 to 80 bytes an object, 320
// bytes a route in all at 50 000 routes and 20 000 upstreams, where the
// whole forms MarshalJSON keeps by hash held 1 028 when the copy was
// written with them (the last four). An entry holds its object: both go
// when a Spec written after leaves the object out, so that what is kept
// is at most the objects of the last two Specs written. Whoever modifies
// an object of a Spec written (which a Spec's objects must never be) must
// give it a new Encoder.
//
// The zero Encoder is ready to use. Not safe for concurrent use.
type Encoder struct {
	// gen counts the Specs written: an entry whose gen is not the last
	// one's was not in it.
	gen            uint32
	routes         map[*Route]keptJSON
	services       map[*Service]keptJSON
	upstreams      map[*Upstream]keptJSON
	consumers      map[*Consumer]keptJSON
	pluginConfigs  map[*PluginConfig]keptJSON
	globalRules    map[*GlobalRule]keptJSON
	consumerGroups map[*ConsumerGroup]keptJSON
	ssls           map[*SSL]keptJSON
	raws           map[rawKey]keptJSON // credentials, plugin_metadata, secrets
}

// keptJSON is an object's JSON form, and the gen of the last Spec
// written that held the object.
type keptJSON struct {
	s   string
	gen uint32
}

// rawKey names a json.RawMessage of a Spec by its bytes' place and
// length: the Spec's raw objects are shared, never modified, as its
// others.
type rawKey struct {
	p *byte
	n int
}

// jsonSink is where Encoder writes: a *bufio.Writer (Encode), a
// *bytes.Buffer (Keep), a byteCount.
type jsonSink interface {
	io.Writer
	io.StringWriter
}

// Encode writes s's JSON form to w (MarshalJSON's bytes, hash included,
// without the copy of them all in memory), encoding only the objects
// this Encoder did not write in the last Spec it wrote. w's errors are
// its own to report (a bufio.Writer keeps the first, for Flush); Encode's
// are those of an object that cannot be encoded (a json.RawMessage that
// is not JSON).
func (e *Encoder) Encode(w *bufio.Writer, s *Spec) error { return e.encode(w, s) }

// Keep is s's JSON form, MarshalJSON's, made as Encode writes it (with
// the forms e keeps, keeping those it makes) and then kept as
// MarshalJSON's for s.Hash (see encoded), unless it already is: the
// supervisor's first write of its local copy, after which its workers'
// Config frame (MarshalJSON) takes the same bytes. Shared: read only.
func (e *Encoder) Keep(s *Spec) ([]byte, error) {
	return encoded.do(s.Hash, func() ([]byte, error) {
		// The forms made first, counting their bytes, so that the
		// buffer is made once, at its size (14 MB at 50 000 routes).
		var n byteCount
		if err := e.encode(&n, s); err != nil {
			return nil, err
		}
		var b bytes.Buffer
		b.Grow(int(n))
		if err := e.encode(&b, s); err != nil {
			return nil, err
		}
		return b.Bytes(), nil
	})
}

// byteCount is a jsonSink that counts what is written to it.
type byteCount int

func (c *byteCount) Write(b []byte) (int, error) {
	*c += byteCount(len(b))
	return len(b), nil
}

func (c *byteCount) WriteString(s string) (int, error) {
	*c += byteCount(len(s))
	return len(s), nil
}

// encode writes s to w: the members of Spec's JSON form in its fields'
// order, a list left out when empty (omitempty), then "hash" when set.
func (e *Encoder) encode(w jsonSink, s *Spec) error {
	e.gen++
	o := jsonOut{w: w, sep: '{'}
	// used counts the entries of each map the Spec holds, for sweep.
	var used [9]int
	var raws [3]int
	var err error
	if used[0], err = encodeList(e, &o, "routes", s.Routes, &e.routes, byPointer); err != nil {
		return err
	}
	if used[1], err = encodeList(e, &o, "services", s.Services, &e.services, byPointer); err != nil {
		return err
	}
	if used[2], err = encodeList(e, &o, "upstreams", s.Upstreams, &e.upstreams, byPointer); err != nil {
		return err
	}
	if used[3], err = encodeList(e, &o, "consumers", s.Consumers, &e.consumers, byPointer); err != nil {
		return err
	}
	if used[4], err = encodeList(e, &o, "plugin_configs", s.PluginConfigs, &e.pluginConfigs, byPointer); err != nil {
		return err
	}
	if used[5], err = encodeList(e, &o, "global_rules", s.GlobalRules, &e.globalRules, byPointer); err != nil {
		return err
	}
	if used[6], err = encodeList(e, &o, "consumer_groups", s.ConsumerGroups, &e.consumerGroups, byPointer); err != nil {
		return err
	}
	if raws[0], err = encodeList(e, &o, "credentials", s.Credentials, &e.raws, byBytes); err != nil {
		return err
	}
	if raws[1], err = encodeList(e, &o, "plugin_metadata", s.PluginMetadata, &e.raws, byBytes); err != nil {
		return err
	}
	if used[7], err = encodeList(e, &o, "ssls", s.SSLs, &e.ssls, byPointer); err != nil {
		return err
	}
	if raws[2], err = encodeList(e, &o, "secrets", s.Secrets, &e.raws, byBytes); err != nil {
		return err
	}
	used[8] = raws[0] + raws[1] + raws[2]
	if s.Hash != ([32]byte{}) {
		o.member("hash")
		var h [2 + 2*len(s.Hash)]byte
		h[0], h[len(h)-1] = '"', '"'
		hex.Encode(h[1:], s.Hash[:])
		o.bytes(h[:])
	}
	if o.sep == '{' {
		o.str("{")
	}
	o.str("}")
	sweep(e.routes, e.gen, used[0])
	sweep(e.services, e.gen, used[1])
	sweep(e.upstreams, e.gen, used[2])
	sweep(e.consumers, e.gen, used[3])
	sweep(e.pluginConfigs, e.gen, used[4])
	sweep(e.globalRules, e.gen, used[5])
	sweep(e.consumerGroups, e.gen, used[6])
	sweep(e.ssls, e.gen, used[7])
	sweep(e.raws, e.gen, used[8])
	return o.err
}

// jsonOut writes to w, keeping the first error; sep is the byte before
// the next member: '{' before the first.
type jsonOut struct {
	w   jsonSink
	sep byte
	err error
}

func (o *jsonOut) str(s string) {
	if o.err == nil {
		_, o.err = o.w.WriteString(s)
	}
}

func (o *jsonOut) bytes(b []byte) {
	if o.err == nil {
		_, o.err = o.w.Write(b)
	}
}

// member writes the name of the next member and its colon.
func (o *jsonOut) member(name string) {
	if o.sep == '{' {
		o.str(`{"`)
	} else {
		o.str(`,"`)
	}
	o.sep = ','
	o.str(name)
	o.str(`":`)
}

// byPointer keys an object by its pointer; nil is written "null", not
// kept.
func byPointer[T any](v *T) (*T, bool) { return v, v != nil }

// byBytes keys a json.RawMessage by its bytes (rawKey); an empty one is
// not kept.
func byBytes(v json.RawMessage) (rawKey, bool) {
	if len(v) == 0 {
		return rawKey{}, false
	}
	return rawKey{&v[0], len(v)}, true
}

// encodeList writes l as the member name (nothing when l is empty), each
// element in the form json.Marshal gives it, which is the form
// json.Marshal gives it within the whole Spec (an element's Marshaler,
// or RawMessage, compacted and its HTML characters escaped either way):
// the one kept in *m by its key, else made and kept. It returns how many
// entries of *m the Spec holds.
func encodeList[T any, K comparable](e *Encoder, o *jsonOut, name string, l []T, m *map[K]keptJSON, key func(T) (K, bool)) (int, error) {
	if len(l) == 0 {
		return 0, nil
	}
	if *m == nil {
		*m = make(map[K]keptJSON, len(l))
	}
	o.member(name)
	o.str("[")
	used := 0
	for i, v := range l {
		if i > 0 {
			o.str(",")
		}
		k, keep := key(v)
		var en keptJSON
		kept := false
		if keep {
			en, kept = (*m)[k]
		}
		if !kept {
			b, err := marshalElem(v)
			if err != nil {
				return used, err
			}
			if !keep {
				o.bytes(b)
				continue
			}
			en.s = string(b)
		}
		if !kept || en.gen != e.gen {
			en.gen = e.gen
			(*m)[k] = en
			used++
		}
		o.str(en.s)
	}
	o.str("]")
	return used, nil
}

// marshalElem is json.Marshal(v). A Route's and an Upstream's own
// MarshalJSON gives the same bytes where they hold no character
// json.Marshal escapes (its output compact, its HTML characters escaped
// unless marshalPlain wrote it again): taken as they are, they are not
// compacted and copied again (a first write of bench admin's 50 000
// routes and 20 000 upstreams: 176-219 -> 133-139 ms of CPU, 62.6 ->
// 48.8 MB of garbage).
func marshalElem[T any](v T) ([]byte, error) {
	var b []byte
	var err error
	switch v := any(v).(type) {
	case *Route:
		b, err = v.MarshalJSON()
	case *Upstream:
		b, err = v.MarshalJSON()
	default:
		return json.Marshal(v)
	}
	if err != nil || !plainJSON(b) {
		return json.Marshal(v)
	}
	return b, nil
}

// plainJSON reports whether b holds none of the characters json.Marshal
// escapes in a Marshaler's output: <, >, & and U+2028 and U+2029 (any
// character whose UTF-8 form begins as theirs, 0xE2, counts).
func plainJSON(b []byte) bool {
	return !bytes.ContainsAny(b, "<>&") && bytes.IndexByte(b, 0xe2) < 0
}

// sweep deletes from m the entries not in the Spec of gen, which holds
// used of them.
func sweep[K comparable](m map[K]keptJSON, gen uint32, used int) {
	if used == len(m) {
		return
	}
	for k, en := range m {
		if en.gen != gen {
			delete(m, k)
		}
	}
}
