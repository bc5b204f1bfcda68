package spec

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
)

// specFields is Spec without its methods, so that MarshalJSON can use the
// struct tags of Spec's own fields (one list of fields: Spec's).
type specFields Spec

// encoded keeps the JSON form of the last Specs written, by Hash, so that
// a configuration is encoded once however many times, and from however
// many goroutines at once, it is written (the local copy of the store and
// the Config frame to the workers, at the same time; after SetHash). The
// hash names the content, provided it is set after the last change, as
// Hash itself requires.
var encoded encodings

type encodings struct {
	mu   sync.Mutex
	ents [4]*encoding
	next int
}

// encoding is one Spec's JSON form, made once.
type encoding struct {
	hash [32]byte
	once sync.Once
	b    []byte
	err  error
}

// entry returns the entry of hash h, made (empty) when there is none.
func (e *encodings) entry(h [32]byte) *encoding {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, en := range e.ents {
		if en != nil && en.hash == h {
			return en
		}
	}
	en := &encoding{hash: h}
	e.ents[e.next] = en
	e.next = (e.next + 1) % len(e.ents)
	return en
}

// do returns the JSON form of hash h, made by f once: callers at the same
// time wait for the first. The bytes are shared: read only. A zero h is
// not kept.
func (e *encodings) do(h [32]byte, f func() ([]byte, error)) ([]byte, error) {
	if h == ([32]byte{}) {
		return f()
	}
	en := e.entry(h)
	en.once.Do(func() { en.b, en.err = f() })
	return en.b, en.err
}

// withHash returns canonical JSON (an object, without "hash") with the hash
// added as its last member: MarshalJSON's form.
func withHash(canon []byte, h [32]byte) []byte {
	b := make([]byte, 0, len(canon)+len(`,"hash":""`)+2*len(h))
	b = append(b, canon[:len(canon)-1]...)
	if len(canon) > 2 {
		b = append(b, ',')
	}
	b = append(b, `"hash":"`...)
	b = hex.AppendEncode(b, h[:])
	return append(b, `"}`...)
}

// specJSON adds the hash, in hex, to Spec's fields; the outer Hash hides
// the embedded one (tagged "-" anyway).
type specJSON struct {
	*specFields
	Hash string `json:"hash,omitempty"`
}

// MarshalJSON writes the Spec with its Hash in hex ("hash", absent when
// zero), encoded once per Hash (see encoded). Objects are written in their stored form (ids, nodes and vars as
// written), so that decoding gives back an equal Spec.
func (s Spec) MarshalJSON() ([]byte, error) {
	b, err := encoded.do(s.Hash, s.marshalFields)
	if err != nil {
		return nil, err
	}
	return slices.Clone(b), nil
}

// marshalFields is MarshalJSON without the kept encoding.
func (s Spec) marshalFields() ([]byte, error) {
	w := specJSON{specFields: (*specFields)(&s)}
	if s.Hash != ([32]byte{}) {
		w.Hash = hex.EncodeToString(s.Hash[:])
	}
	return json.Marshal(w)
}

// UnmarshalJSON reads what MarshalJSON writes (UnmarshalEach). It checks
// neither the objects (they were validated where they were stored) nor the
// references between them (Check does) nor that Hash matches the content.
func (s *Spec) UnmarshalJSON(b []byte) error { return UnmarshalEach(b, s, nil) }

// UnmarshalKept reads what MarshalJSON wrote into s, as UnmarshalJSON
// does, and keeps b as the JSON form of the Hash it holds (see encoded),
// so that the Spec read is written again (MarshalJSON) without being
// encoded anew: a node started on its local copy sends it whole to every
// worker it starts. b is kept, shared: the caller must not modify it.
// For bytes MarshalJSON wrote, whose hash names their content.
func UnmarshalKept(b []byte, s *Spec) error {
	if err := UnmarshalEach(b, s, nil); err != nil {
		return err
	}
	if s.Hash != ([32]byte{}) {
		_, _ = encoded.do(s.Hash, func() ([]byte, error) { return b, nil })
	}
	return nil
}

// UnmarshalEach reads what MarshalJSON writes into s, one object at a
// time, and calls each, if not nil, after every one: a worker decoding a
// large configuration beside its event loop gives the loop its turn there
// (worker.Background). Unknown members are ignored; member names must be
// spelt as MarshalJSON writes them.
func UnmarshalEach(b []byte, s *Spec, each func()) error {
	*s = Spec{}
	if each == nil {
		each = func() {}
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	if t, err := dec.Token(); err != nil {
		return err
	} else if t == nil {
		return nil // null, as UnmarshalJSON leaves it
	} else if t != json.Delim('{') {
		return fmt.Errorf("spec: want an object, got %v", t)
	}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return err
		}
		key, _ := t.(string)
		switch key {
		case "routes":
			err = decodeEach(dec, &s.Routes, each)
		case "services":
			err = decodeEach(dec, &s.Services, each)
		case "upstreams":
			err = decodeEach(dec, &s.Upstreams, each)
		case "consumers":
			err = decodeEach(dec, &s.Consumers, each)
		case "plugin_configs":
			err = decodeEach(dec, &s.PluginConfigs, each)
		case "global_rules":
			err = decodeEach(dec, &s.GlobalRules, each)
		case "consumer_groups":
			err = decodeEach(dec, &s.ConsumerGroups, each)
		case "credentials":
			err = decodeEach(dec, &s.Credentials, each)
		case "plugin_metadata":
			err = decodeEach(dec, &s.PluginMetadata, each)
		case "ssls":
			err = decodeEach(dec, &s.SSLs, each)
		case "secrets":
			err = decodeEach(dec, &s.Secrets, each)
		case "hash":
			var h string
			if err = dec.Decode(&h); err == nil && h != "" {
				if err := s.setHashHex(h); err != nil {
					return err
				}
			}
		default:
			var skip json.RawMessage
			err = dec.Decode(&skip)
		}
		if err != nil {
			return fmt.Errorf("spec: %s: %w", key, err)
		}
	}
	if _, err := dec.Token(); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("spec: data after the configuration")
	}
	return nil
}

// decodeEach appends the elements of the JSON array (or null) dec is at
// to dst, calling each after every one.
func decodeEach[T any](dec *json.Decoder, dst *[]T, each func()) error {
	*dst = nil // as Unmarshal does, for null and for a repeated member
	t, err := dec.Token()
	if err != nil || t == nil {
		return err
	}
	if t != json.Delim('[') {
		return fmt.Errorf("want an array, got %v", t)
	}
	for dec.More() {
		var v T
		if err := dec.Decode(&v); err != nil {
			return err
		}
		*dst = append(*dst, v)
		each()
	}
	_, err = dec.Token()
	return err
}

// setHashHex sets Hash from its JSON form.
func (s *Spec) setHashHex(h string) (err error) {
	s.Hash, err = ParseHash(h)
	return err
}

// ParseHash reads a Hash in its JSON form: 64 hex digits.
func ParseHash(h string) ([32]byte, error) {
	var sum [32]byte
	b, err := hex.DecodeString(h)
	if err != nil || len(b) != len(sum) {
		return sum, fmt.Errorf("spec: hash %q is not 64 hex digits", h)
	}
	copy(sum[:], b)
	return sum, nil
}
