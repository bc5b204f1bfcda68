package spec

import (
	"encoding/json"
	"regexp"
	"strconv"
)

var (
	idPattern       = regexp.MustCompile(`^[a-zA-Z0-9-_.]+$`)
	usernamePattern = regexp.MustCompile(`^[a-zA-Z0-9_\-]+$`)
)

// ValidStringID reports whether s is an id APISIX's id schema allows in
// a string: 1 to 64 characters of a-z, A-Z, 0-9, "-", "_" and ".".
func ValidStringID(s string) bool { return StringID(s).valid() }

// ValidUsername reports whether s is a consumer's username as APISIX's
// consumer schema allows it: 1 to 256 characters of a-z, A-Z, 0-9, "_"
// and "-".
func ValidUsername(s string) bool {
	return len(s) >= 1 && len(s) <= 256 && usernamePattern.MatchString(s)
}

// StringID returns the id written as a JSON string.
func StringID(s string) ID { return ID{Str: s} }

// NumID returns the id written as a JSON integer.
func NumID(n int64) ID { return ID{Str: strconv.FormatInt(n, 10), Num: true} }

// String returns the canonical text of the id: the string as written, or
// the integer in decimal. It is what references and store keys use, so
// "1" and 1 name the same object.
func (id ID) String() string { return id.Str }

// IsZero reports whether the id is absent.
func (id ID) IsZero() bool { return id.Str == "" }

// valid reports whether the id matches APISIX's id schema: a string of 1-64
// characters of [a-zA-Z0-9-_.], or an integer ≥ 1.
func (id ID) valid() bool {
	if id.Num {
		n, err := strconv.ParseInt(id.Str, 10, 64)
		return err == nil && n >= 1
	}
	return len(id.Str) >= 1 && len(id.Str) <= 64 && idPattern.MatchString(id.Str)
}

// MarshalJSON writes the id in the form it was written: a number or a
// string.
func (id ID) MarshalJSON() ([]byte, error) {
	if id.Num {
		if _, err := strconv.ParseInt(id.Str, 10, 64); err == nil {
			return []byte(id.Str), nil
		}
	}
	return appendJSONString(nil, id.Str), nil
}

// UnmarshalJSON accepts a JSON string or an integer. It does not check the
// id's pattern (Validate does).
func (id *ID) UnmarshalJSON(b []byte) error {
	v, err := parseJSON(b)
	if err != nil {
		return err
	}
	if p := id.fromJSON(v); p != nil {
		return p.schemaErr()
	}
	return nil
}

func (id *ID) fromJSON(v *jval) *problem {
	switch v.kind {
	case jString:
		*id = ID{Str: v.s}
		if !id.valid() {
			return &problem{msg: "object matches none of the required"}
		}
		return nil
	case jNumber:
		n, ok := v.integer()
		if !ok || n < 1 {
			return &problem{msg: "object matches none of the required"}
		}
		*id = NumID(n)
		return nil
	}
	return &problem{msg: "object matches none of the required"}
}

var _ json.Marshaler = ID{}
