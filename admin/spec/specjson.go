package spec

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
)

// specFields is Spec without its methods, so that MarshalJSON and
// UnmarshalJSON can use the struct tags of Spec's own fields (one list of
// fields: Spec's).
type specFields Spec

// specJSON adds the hash, in hex, to Spec's fields; the outer Hash hides
// the embedded one (tagged "-" anyway).
type specJSON struct {
	*specFields
	Hash string `json:"hash,omitempty"`
}

// MarshalJSON writes the Spec with its Hash in hex ("hash", absent when
// zero). Objects are written in their stored form (ids, nodes and vars as
// written), so that decoding gives back an equal Spec.
func (s Spec) MarshalJSON() ([]byte, error) {
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
