package standalone

import (
	"errors"
	"strings"
	"testing"

	"coregate/plugins"
	_ "coregate/plugins/all"
)

// TestLoadCredentials: a credential is listed with the consumers, its id
// "<username>/credentials/<id>", as in APISIX's
// t/config-center-yaml/credentials.t; it goes into the Spec's
// Credentials, not its Consumers.
func TestLoadCredentials(t *testing.T) {
	s, err := Parse([]byte(`
consumers:
  - username: rose
    plugins:
      key-auth:
        key: rose-key
  - id: rose/credentials/542f7414-87f6-4793-a68e-99983dde9913
    plugins:
      key-auth:
        key: rose-cred
#END`), "conf/apisix.yaml", env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Consumers) != 1 || len(s.Credentials) != 1 {
		t.Fatalf("consumers %+v, credentials %s", s.Consumers, s.Credentials)
	}
	want := `{"id":"rose/credentials/542f7414-87f6-4793-a68e-99983dde9913","plugins":{"key-auth":{"key":"rose-cred"}}}`
	if got := string(s.Credentials[0]); got != want {
		t.Fatalf("credential %s, want %s", got, want)
	}
	_, err = Parse([]byte("consumers:\n  - id: rose/credentials/\n    plugins: {}\n#END"), "conf/apisix.yaml", env(nil))
	if !errors.Is(err, ErrInvalid) {
		t.Fatalf("a credential without an id: %v", err)
	}
}

// TestRefusedConsumers: what the Admin API refuses of consumers and
// credentials beside their plugins' configurations refuses the file: a
// consumer in a consumer group the file does not have, a credential of a
// plugin that does not authenticate (APISIX's message).
func TestRefusedConsumers(t *testing.T) {
	_, err := Parse([]byte("consumers:\n  - username: rose\n    group_id: g1\n#END"), "conf/apisix.yaml", env(nil))
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "consumer rose: group_id g1 not found") {
		t.Errorf("a consumer in a missing group: %v", err)
	}
	s, err := Parse([]byte(`
consumers:
  - username: rose
  - id: rose/credentials/c1
    plugins:
      limit-count:
        count: 5
        time_window: 60
#END`), "conf/apisix.yaml", env(nil))
	if err != nil {
		t.Fatal(err)
	}
	err = CheckPlugins("conf/apisix.yaml", s, plugins.Default)
	if !errors.Is(err, ErrInvalid) || !errors.Is(err, plugins.ErrNotAuth) || !strings.Contains(err.Error(), "id rose/credentials/c1") {
		t.Errorf("a credential of limit-count: %v", err)
	}
	if s.Checked != ([32]byte{}) {
		t.Errorf("a file refused is marked checked")
	}
}

// TestCheckPluginsMarks: a file whose plugins' configurations pass is
// marked checked by the registry (spec.Spec.Checked), for its workers.
func TestCheckPluginsMarks(t *testing.T) {
	s, err := Parse([]byte(`
routes:
  - uri: /a
    plugins:
      limit-count: {count: 5, time_window: 60}
consumers:
  - username: rose
    plugins:
      key-auth: {key: k}
#END`), "conf/apisix.yaml", env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if s.Checked != ([32]byte{}) {
		t.Fatal("marked checked before CheckPlugins")
	}
	if err := CheckPlugins("conf/apisix.yaml", s, plugins.Default); err != nil {
		t.Fatal(err)
	}
	if s.Checked != plugins.Default.Fingerprint() {
		t.Errorf("marked %x, want the registry's fingerprint", s.Checked)
	}
}

// TestConsumerGroupsAndProtos: apisix.yaml's consumer_groups are read
// (their plugins checked as a route's) and a consumer names one; its
// protos are checked as the Admin API checks them.
func TestConsumerGroupsAndProtos(t *testing.T) {
	s, err := Parse([]byte(`
consumer_groups:
  - id: company_a
    plugins:
      limit-count:
        count: 2
        time_window: 60
consumers:
  - username: rose
    group_id: company_a
protos:
  - id: hello
    content: |
      syntax = "proto3";
      package helloworld;
      message HelloRequest { string name = 1; }
#END`), "conf/apisix.yaml", env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if len(s.ConsumerGroups) != 1 || s.ConsumerGroups[0].ID.String() != "company_a" || s.Consumers[0].GroupID.String() != "company_a" {
		t.Fatalf("consumer groups %+v, consumers %+v", s.ConsumerGroups, s.Consumers)
	}
	for _, tc := range []struct{ doc, want string }{
		{"consumer_groups:\n  - plugins: {}\n#END", `property "id" is required`},
		{"consumer_groups:\n  - id: g\n    plugins: {}\n    foo: 1\n#END", "additional properties forbidden, found foo"},
		{"protos:\n  - id: p\n#END", `property "content" is required`},
		{"protos:\n  - id: p\n    content: 'syntax = \"proto3\"; message M { Missing a = 1; }'\n#END", "protos[0] (id p): invalid content: proto:1:32: field M.a: unknown type Missing"},
	} {
		_, err := Parse([]byte(tc.doc), "conf/apisix.yaml", env(nil))
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want %q", tc.doc, err, tc.want)
		}
	}
}
