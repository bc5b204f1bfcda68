package spec

import (
	"encoding/json"
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
	c, err = DecodeConsumer([]byte(`{"username":"rose","group_id":7}`))
	if err != nil {
		t.Fatal(err)
	}
	if c.GroupID != NumID(7) {
		t.Errorf("consumer decoded as %+v", c)
	}
	cg, err := DecodeConsumerGroup([]byte(`{"id":"company_a","desc":"d","plugins":{"limit-count":{"count": 2}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if cg.ID != StringID("company_a") || cg.Desc != "d" || string(cg.Plugins["limit-count"]) != `{"count":2}` {
		t.Errorf("consumer group decoded as %+v", cg)
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
		{func(b []byte) error { _, err := DecodeConsumer(b); return err }, `{"username":"jack","group_id":"a/b"}`, `property "group_id" validation failed`},
		{func(b []byte) error { _, err := DecodeConsumerGroup(b); return err }, `{"id":"cg"}`, `property "plugins" is required`},
		{func(b []byte) error { _, err := DecodeConsumerGroup(b); return err }, `{"id":"cg","plugins":{},"name":""}`, `property "name" validation failed`},
		{func(b []byte) error { _, err := DecodeConsumerGroup(b); return err }, `{"id":"cg","plugins":{},"labels":"x"}`, `property "labels" validation failed: wrong type: expected object, got string`},
		{func(b []byte) error { _, err := DecodePluginConfig(b); return err }, `{"id":"p"}`, `property "plugins" is required`},
		{func(b []byte) error { _, err := DecodeGlobalRule(b); return err }, `{"id":"g","plugins":[]}`, `property "plugins" validation failed`},
		{func(b []byte) error { _, err := DecodeGlobalRule(b); return err }, `{"id":"g",`, ""},
	} {
		err := tc.decode([]byte(tc.in))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.in, err, tc.want)
		}
		// The same message as ValidateObject's for what the schema refuses.
		if tc.want != "" {
			kind := KindConsumer
			switch {
			case strings.HasPrefix(tc.in, `{"id":"cg"`):
				kind = KindConsumerGroup
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

// TestCheckConsumerGroups: a consumer's group_id names a consumer group of
// the Spec, group ids are unique, and the groups survive the Spec's JSON
// form.
func TestCheckConsumerGroups(t *testing.T) {
	cg, err := DecodeConsumerGroup([]byte(`{"id":"g1","plugins":{"limit-count":{"count":1,"time_window":60}}}`))
	if err != nil {
		t.Fatal(err)
	}
	c, err := DecodeConsumer([]byte(`{"username":"rose","group_id":"g1"}`))
	if err != nil {
		t.Fatal(err)
	}
	s := &Spec{Consumers: []*Consumer{c}, ConsumerGroups: []*ConsumerGroup{cg}}
	if err := s.Check(); err != nil {
		t.Fatal(err)
	}
	s.SetHash()
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	var back Spec
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if len(back.ConsumerGroups) != 1 || back.ConsumerGroups[0].ID != StringID("g1") ||
		string(back.ConsumerGroups[0].Plugins["limit-count"]) != `{"count":1,"time_window":60}` {
		t.Fatalf("consumer groups after JSON: %s", b)
	}
	if back.Hash != s.Hash || back.SetHash() != s.Hash {
		t.Error("the hash changed through JSON")
	}
	noGroups := &Spec{Consumers: []*Consumer{c}}
	if noGroups.SetHash() == s.Hash {
		t.Error("the consumer groups are not in the hash")
	}

	err = noGroups.Check()
	if !errors.Is(err, ErrReference) || err.Error() != "consumer rose: group_id g1 not found" {
		t.Errorf("dangling group_id: %v", err)
	}
	dup := &Spec{ConsumerGroups: []*ConsumerGroup{cg, cg}}
	if err := dup.Check(); !errors.Is(err, ErrReference) || !strings.Contains(err.Error(), "duplicate id") {
		t.Errorf("duplicate group: %v", err)
	}
}
