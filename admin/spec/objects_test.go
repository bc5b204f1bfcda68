package spec

import (
	"errors"
	"strings"
	"testing"
)

// TestDecodePluginObjects: consumers, plugin configs and global rules
// decode strictly, with the messages ValidateObject gives, and keep their
// plugins' configurations (compacted).
func TestDecodePluginObjects(t *testing.T) {
	c, err := DecodeConsumer([]byte(`{"username":"jack","desc":"d","plugins":{"key-auth":{"key": "k"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if c.Username != "jack" || c.Desc != "d" || string(c.Plugins["key-auth"]) != `{"key":"k"}` {
		t.Errorf("consumer decoded as %+v", c)
	}
	pc, err := DecodePluginConfig([]byte(`{"id":2.0,"plugins":{"prometheus":{}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if pc.ID != NumID(2) || len(pc.Plugins) != 1 {
		t.Errorf("plugin config decoded as %+v", pc)
	}
	gr, err := DecodeGlobalRule([]byte(`{"id":"g","plugins":{}}`))
	if err != nil {
		t.Fatal(err)
	}
	if gr.ID != StringID("g") || gr.Plugins == nil {
		t.Errorf("global rule decoded as %+v", gr)
	}
	for _, tc := range []struct {
		decode func([]byte) error
		in     string
		want   string
	}{
		{func(b []byte) error { _, err := DecodeConsumer(b); return err }, `{"username":"jack","foo":1}`, "additional properties forbidden, found foo"},
		{func(b []byte) error { _, err := DecodeConsumer(b); return err }, `{"plugins":{}}`, `property "username" is required`},
		{func(b []byte) error { _, err := DecodeConsumer(b); return err }, `{"username":"jack","group_id":"g"}`, "consumer groups are not supported yet"},
		{func(b []byte) error { _, err := DecodePluginConfig(b); return err }, `{"id":"p"}`, `property "plugins" is required`},
		{func(b []byte) error { _, err := DecodeGlobalRule(b); return err }, `{"id":"g","plugins":[]}`, `property "plugins" validation failed`},
		{func(b []byte) error { _, err := DecodeGlobalRule(b); return err }, `{"id":"g",`, ""},
	} {
		err := tc.decode([]byte(tc.in))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.in, err, tc.want)
		}
		if kind := tc.in; strings.Contains(kind, "group_id") && !errors.Is(err, ErrConsumerGroup) {
			t.Errorf("%s: %v does not match ErrConsumerGroup", tc.in, err)
		}
		// The same message as ValidateObject's for what the schema refuses.
		if tc.want != "" && !strings.Contains(tc.in, "group_id") {
			kind := KindConsumer
			switch {
			case strings.HasPrefix(tc.in, `{"id":"p"`):
				kind = KindPluginConfig
			case strings.HasPrefix(tc.in, `{"id":"g"`):
				kind = KindGlobalRule
			}
			if v := ValidateObject(kind, []byte(tc.in)); v == nil || v.Error() != err.Error() {
				t.Errorf("%s: %v; ValidateObject gives %v", tc.in, err, v)
			}
		}
	}
}
