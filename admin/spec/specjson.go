package spec

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sync"
)

// specFields is Spec without its methods, so that MarshalJSON and
// UnmarshalJSON can use the struct tags of Spec's own fields (one list of
// fields: Spec's).
type specFields Spec

// encoded keeps the canonical JSON of the last Specs SetHash hashed, by
// hash, for MarshalJSON: a configuration is encoded once however many
// times it is then written (the local copy of the store, the Config frame
// to the workers). The hash names the content, provided SetHash is called
// after the last change, as Hash itself requires.
var encoded encodings

type encodings struct {
	mu   sync.Mutex
	keys [4][32]byte
	vals [4][]byte
	next int
}

func (e *encodings) put(h [32]byte, b []byte) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for i := range e.keys {
		if e.keys[i] == h && e.vals[i] != nil {
			return
		}
	}
	e.keys[e.next], e.vals[e.next] = h, b
	e.next = (e.next + 1) % len(e.keys)
}

// get returns the canonical JSON of hash h; nil when not kept or h is zero.
// The bytes are shared: read only.
func (e *encodings) get(h [32]byte) []byte {
	if h == ([32]byte{}) {
		return nil
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	for i := range e.keys {
		if e.keys[i] == h {
			return e.vals[i]
		}
	}
	return nil
}

// specJSON adds the hash, in hex, to Spec's fields; the outer Hash hides
// the embedded one (tagged "-" anyway).
type specJSON struct {
	*specFields
	Hash string `json:"hash,omitempty"`
}

// MarshalJSON writes the Spec with its Hash in hex ("hash", absent when
// zero), from SetHash's encoding when there is one. Objects are written in their stored form (ids, nodes and vars as
// written), so that decoding gives back an equal Spec.
func (s Spec) MarshalJSON() ([]byte, error) {
	if canon := encoded.get(s.Hash); len(canon) >= 2 {
		// SetHash's encoding, with the hash added as its last member
		b := make([]byte, 0, len(canon)+len(`,"hash":""`)+2*len(s.Hash))
		b = append(b, canon[:len(canon)-1]...)
		if len(canon) > 2 {
			b = append(b, ',')
		}
		b = append(b, `"hash":"`...)
		b = hex.AppendEncode(b, s.Hash[:])
		return append(b, `"}`...), nil
	}
	return s.marshalFields()
}

// marshalFields is MarshalJSON without the kept encoding.
func (s Spec) marshalFields() ([]byte, error) {
	w := specJSON{specFields: (*specFields)(&s)}
	if s.Hash != ([32]byte{}) {
		w.Hash = hex.EncodeToString(s.Hash[:])
	}
	return json.Marshal(w)
}

// UnmarshalJSON reads what MarshalJSON writes. It checks neither the
// objects (they were validated where they were stored) nor the references
// between them (Check does) nor that Hash matches the content.
func (s *Spec) UnmarshalJSON(b []byte) error {
	*s = Spec{}
	w := specJSON{specFields: (*specFields)(s)}
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	if w.Hash == "" {
		return nil
	}
	h, err := hex.DecodeString(w.Hash)
	if err != nil || len(h) != len(s.Hash) {
		return fmt.Errorf("spec: hash %q is not 64 hex digits", w.Hash)
	}
	copy(s.Hash[:], h)
	return nil
}
