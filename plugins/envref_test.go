package plugins

import (
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"coregate/admin/spec"
)

// The variables these tests set (t.Setenv) and leave unset.
const (
	refVar   = "COREGATE_TEST_REF"
	refJSON  = "COREGATE_TEST_REF_JSON"
	refUnset = "COREGATE_TEST_REF_UNSET"
)

// setRefEnv sets refVar to value and refJSON to a JSON object, and makes
// sure refUnset is not set.
func setRefEnv(t *testing.T, value string) {
	t.Helper()
	t.Setenv(refVar, value)
	t.Setenv(refJSON, `{"user":"u-1","n":3,"nil":null,"a/b":"slash"}`)
	t.Setenv(refUnset, "")
	if err := os.Unsetenv(refUnset); err != nil {
		t.Fatal(err)
	}
}

// TestResolveRefs: which strings are references, what they resolve to,
// and the refusals, each naming the field and the reference.
func TestResolveRefs(t *testing.T) {
	setRefEnv(t, `s3cr"et`)
	for _, tc := range []struct {
		name, raw string
		want      string // the resolved configuration, compacted; raw itself when ""
		refs      []string
		field     string // of the refusal
		err       string
	}{
		{"none", `{"key":"plain","n":1}`, "", nil, "", ""},
		{"dollar but no reference", `{"key":"$remote_addr","$env://X":"member names are not values"}`, "", nil, "", ""},
		{"not JSON", `{"key":"$env://` + refVar, "", nil, "", ""},
		{"env", `{"key":"$env://` + refVar + `","n":1.50}`, `{"key":"s3cr\"et","n":1.50}`, []string{"key"}, "", ""},
		{"any case", `{"key":"$ENV://` + refVar + `"}`, `{"key":"s3cr\"et"}`, []string{"key"}, "", ""},
		{"escaped", `{"key":"\u0024env://` + refVar + `"}`, `{"key":"s3cr\"et"}`, []string{"key"}, "", ""},
		{"member", `{"key":"$env://` + refJSON + `/user"}`, `{"key":"u-1"}`, []string{"key"}, "", ""},
		{"member with a slash", `{"key":"$env://` + refJSON + `/a/b"}`, `{"key":"slash"}`, []string{"key"}, "", ""},
		{"trailing slash", `{"key":"$env://` + refVar + `/"}`, `{"key":"s3cr\"et"}`, []string{"key"}, "", ""},
		{"nested", `{"a":{"b":["x","$env://` + refVar + `"]},"c d":{"e":"$env://` + refJSON + `/user"}}`,
			`{"a":{"b":["x","s3cr\"et"]},"c d":{"e":"u-1"}}`, []string{"a.b[1]", `["c d"].e`}, "", ""},
		{"unset", `{"a":{"key":"$env://` + refUnset + `"}}`, "", nil, "a.key",
			`property "a" validation failed: property "key" validation failed: cannot resolve $env://` + refUnset + `: environment variable ` + refUnset + ` is not set`},
		{"unset item", `{"keys":["k","$env://` + refUnset + `"]}`, "", nil, "keys[1]",
			`property "keys" validation failed: failed to validate item 2: cannot resolve $env://` + refUnset + `: environment variable ` + refUnset + ` is not set`},
		{"no name", `{"key":"$env://"}`, "", nil, "key",
			`property "key" validation failed: cannot resolve $env://: no environment variable named`},
		{"value not an object", `{"key":"$env://` + refVar + `/user"}`, "", nil, "key",
			`property "key" validation failed: cannot resolve $env://` + refVar + `/user: the value of environment variable ` + refVar + ` is not a JSON object`},
		{"no such member", `{"key":"$env://` + refJSON + `/pass"}`, "", nil, "key",
			`property "key" validation failed: cannot resolve $env://` + refJSON + `/pass: the value of environment variable ` + refJSON + ` has no string member "pass"`},
		{"member not a string", `{"key":"$env://` + refJSON + `/n"}`, "", nil, "key",
			`property "key" validation failed: cannot resolve $env://` + refJSON + `/n: the value of environment variable ` + refJSON + ` has no string member "n"`},
		{"member null", `{"key":"$env://` + refJSON + `/nil"}`, "", nil, "key",
			`property "key" validation failed: cannot resolve $env://` + refJSON + `/nil: the value of environment variable ` + refJSON + ` has no string member "nil"`},
		{"secret", `{"key":"$secret://vault/1/jack/key"}`, "", nil, "key",
			`property "key" validation failed: $secret://vault/1/jack/key: secret managers ($secret://) are not supported yet`},
		{"secret is lower case only", `{"key":"$SECRET://vault/1/jack/key"}`, "", nil, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, refs, err := resolveRefs(json.RawMessage(tc.raw), nil)
			if tc.err != "" {
				var ve *spec.ValidationError
				if !errors.Is(err, ErrReference) || !errors.As(err, &ve) {
					t.Fatalf("err = %v, want a reference refusal", err)
				}
				if ve.Msg != tc.err || ve.Field != tc.field {
					t.Errorf("refusal %q at %q, want %q at %q", ve.Msg, ve.Field, tc.err, tc.field)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			want := tc.want
			if want == "" && string(got) != tc.raw {
				t.Errorf("got %s, want the configuration as it is", got)
			}
			if want != "" {
				var a, b any
				if json.Unmarshal(got, &a) != nil || json.Unmarshal([]byte(want), &b) != nil || !cmp.Equal(a, b) {
					t.Errorf("resolved %s, want %s", got, want)
				}
				if strings.Contains(string(got), "1.50") != strings.Contains(want, "1.50") {
					t.Errorf("resolved %s: a number was rewritten", got)
				}
			}
			var fields []string
			for _, r := range refs {
				fields = append(fields, r.field)
			}
			if d := cmp.Diff(tc.refs, fields); d != "" {
				t.Errorf("references' fields (-want +got):\n%s", d)
			}
		})
	}
}

// tokenPlugin has a string field whose schema quotes the value it
// refuses (a pattern), a Check that quotes it too, and records what it
// was built from.
type tokenPlugin struct{ built *string }

func (tokenPlugin) Schema() []byte {
	return []byte(`{"type":"object","properties":{"token":{"type":"string","pattern":"^t-"},"mode":{"type":"string"}}}`)
}

func (tokenPlugin) Check(raw json.RawMessage) error {
	var c struct{ Mode string }
	_ = json.Unmarshal(raw, &c)
	if strings.Contains(c.Mode, "bad") {
		return errors.New(`mode "` + c.Mode + `" is not allowed`)
	}
	return nil
}

func (p tokenPlugin) Build(raw json.RawMessage, _ Env) (Instance, error) {
	if p.built != nil {
		*p.built = string(raw)
	}
	var c struct{ Mode string }
	_ = json.Unmarshal(raw, &c)
	if c.Mode == "t-build" {
		return nil, errors.New(`cannot build with mode "` + c.Mode + `"`)
	}
	return &fakeInstance{conf: string(raw)}, nil
}

// TestCheckRefs: Check and CheckConsumer resolve references and check
// what they resolve to; a refusal names the field and the reference,
// never the value, whichever message the schema or the plugin had.
func TestCheckRefs(t *testing.T) {
	const value = "bad s3cret"
	setRefEnv(t, value)
	r := NewRegistry(testTable)
	r.Register("test-a", tokenPlugin{})
	r.Register("test-auth", consumerSchema{})
	for _, tc := range []struct {
		plugin, conf string
		consumer     bool
		want, field  string
	}{
		{"test-a", `{"token":"t-$env://` + refVar + `"}`, false, "", ""}, // not a reference
		{"test-a", `{"mode":"$env://` + refVar + `"}`, false,
			`failed to check the configuration of plugin test-a err: with $env://` + refVar + ` resolved, the configuration is refused (the values are not shown)`, ""},
		{"test-a", `{"token":"$env://` + refVar + `"}`, false,
			`failed to check the configuration of plugin test-a err: property "token" validation failed: the value of $env://` + refVar + ` is refused by the plugin's schema`, "token"},
		// A refusal of another field quotes no value of the environment:
		// it is the schema's.
		{"test-a", `{"mode":"$env://` + refVar + `","token":"x-1"}`, false,
			`failed to check the configuration of plugin test-a err: property "token" validation failed: failed to match pattern "^t-" with "x-1"`, "token"},
		{"test-a", `{"token":"$env://` + refUnset + `"}`, false,
			`failed to check the configuration of plugin test-a err: property "token" validation failed: cannot resolve $env://` + refUnset + `: environment variable ` + refUnset + ` is not set`, "token"},
		{"test-auth", `{"key":"$env://` + refVar + `"}`, true, "", ""},
		{"test-auth", `{"key":"$env://` + refUnset + `"}`, true,
			`failed to check the configuration of plugin test-auth err: property "key" validation failed: cannot resolve $env://` + refUnset + `: environment variable ` + refUnset + ` is not set`, "key"},
		{"test-auth", `{"key":"$secret://vault/1/k"}`, true,
			`failed to check the configuration of plugin test-auth err: property "key" validation failed: $secret://vault/1/k: secret managers ($secret://) are not supported yet`, "key"},
		// Without a consumer schema a consumer's configuration is checked
		// as a route's, references too.
		{"test-a", `{"token":"$env://` + refUnset + `"}`, true,
			`failed to check the configuration of plugin test-a err: property "token" validation failed: cannot resolve $env://` + refUnset + `: environment variable ` + refUnset + ` is not set`, "token"},
	} {
		check := r.Check
		if tc.consumer {
			check = r.CheckConsumer
		}
		err := check(tc.plugin, json.RawMessage(tc.conf))
		if got := errString(err); got != tc.want {
			t.Errorf("%s %s: %q, want %q", tc.plugin, tc.conf, got, tc.want)
		}
		if err == nil {
			continue
		}
		var ve *spec.ValidationError
		if !errors.As(err, &ve) || ve.Field != tc.field || errors.Is(err, ErrReference) != strings.Contains(tc.want, "$") {
			t.Errorf("%s %s: %#v, want a refusal at %q, of a reference when it names one", tc.plugin, tc.conf, ve, tc.field)
		}
		if strings.Contains(err.Error(), "s3cret") {
			t.Errorf("%s %s: the refusal shows the value: %v", tc.plugin, tc.conf, err)
		}
	}
	// CheckAll names the plugin refused.
	name, err := r.CheckAll(map[string]json.RawMessage{"test-auth": json.RawMessage(`{"key":"$env://` + refUnset + `"}`)}, true)
	if name != "test-auth" || !errors.Is(err, ErrReference) {
		t.Errorf("CheckAll: %q, %v", name, err)
	}
}

// TestBuildRefs: a plugin is built from its configuration with the
// references resolved; a build that fails on a resolved value says so
// without it.
func TestBuildRefs(t *testing.T) {
	setRefEnv(t, "t-build")
	var built string
	r := NewRegistry(testTable)
	r.Register("test-a", tokenPlugin{built: &built})
	if _, err := r.Build(map[string]json.RawMessage{"test-a": json.RawMessage(`{"token":"$env://` + refJSON + `/user"}`)}, NewLocalEnv()); err == nil {
		t.Fatal("u-1 passed the pattern ^t-")
	}
	t.Setenv(refJSON, `{"user":"t-user"}`)
	if _, err := r.Build(map[string]json.RawMessage{"test-a": json.RawMessage(`{"token":"$env://` + refJSON + `/user"}`)}, NewLocalEnv()); err != nil {
		t.Fatal(err)
	}
	if built != `{"token":"t-user"}` {
		t.Errorf("built from %s, want the reference resolved", built)
	}
	_, err := r.Build(map[string]json.RawMessage{"test-a": json.RawMessage(`{"mode":"$env://` + refVar + `"}`)}, NewLocalEnv())
	if !errors.Is(err, ErrReference) || strings.Contains(err.Error(), "t-build") ||
		err.Error() != `failed to check the configuration of plugin test-a err: with $env://`+refVar+` resolved, the configuration is refused (the values are not shown)` {
		t.Errorf("Build refused: %v", err)
	}
	_, err = r.Build(map[string]json.RawMessage{"test-a": json.RawMessage(`{"mode":"$env://` + refUnset + `"}`)}, NewLocalEnv())
	if !errors.Is(err, ErrReference) {
		t.Errorf("Build of an unset variable: %v", err)
	}
	// A configuration without references is built from its own bytes.
	if _, err := r.Build(map[string]json.RawMessage{"test-a": json.RawMessage(`{ "token": "t-1" }`)}, NewLocalEnv()); err != nil || built != `{ "token": "t-1" }` {
		t.Errorf("built from %s, %v", built, err)
	}
}

// TestIndexConsumersRefs: credentials are indexed by what their
// references resolve to; a consumer or a credential object whose
// reference does not resolve is left out, whole, the rest indexed.
func TestIndexConsumersRefs(t *testing.T) {
	setRefEnv(t, "k-env")
	r := NewRegistry(testTable)
	r.Register("test-auth", consumerSchema{})
	r.Register("test-limit", fake{})
	conf := func(kv ...string) map[string]json.RawMessage {
		m := map[string]json.RawMessage{}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = json.RawMessage(kv[i+1])
		}
		return m
	}
	jack := &Consumer{Username: "jack", Plugins: conf("test-auth", `{"key":"$env://`+refVar+`"}`)}
	bob := &Consumer{Username: "bob", Plugins: conf("test-auth", `{"key":"$env://`+refUnset+`"}`)}
	ann := &Consumer{Username: "ann", Plugins: conf("test-auth", `{"key":"k-ann"}`, "test-limit", `{"key":"$env://`+refUnset+`"}`)}
	eve := &Consumer{Username: "eve", Plugins: conf("test-auth", `{"key":"k-env"}`)} // jack's, resolved
	joe := &Consumer{Username: "joe", Plugins: conf("test-auth", `{"key":"k-joe"}`)}
	x, err := r.IndexConsumers([]*Consumer{jack, bob, ann, eve, joe}, []Credential{
		{Username: "bob", ID: "c1", Plugins: conf("test-auth", `{"key":"k-bob"}`)},
		{Username: "joe", ID: "c2", Plugins: conf("test-auth", `{"key":"$secret://vault/1/joe"}`)},
		{Username: "joe", ID: "c3", Plugins: conf("test-auth", `{"key":"$env://`+refJSON+`/user"}`)},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		cred string
		want *Consumer
	}{
		{"k-env", jack},
		{"$env://" + refVar, nil},
		{"$env://" + refUnset, nil},
		{"k-bob", nil}, // bob is left out, and his credential with him
		{"k-ann", nil}, // another plugin's reference leaves ann out
		{"k-joe", joe},
		{"u-1", joe},
		{"$secret://vault/1/joe", nil},
	} {
		if got := x.ByCredential("test-auth", []byte(tc.cred)); got != tc.want {
			t.Errorf("ByCredential(%s) = %v, want %v", tc.cred, got, tc.want)
		}
	}
	if x.ByName("bob") != nil || x.ByName("ann") != nil || x.ByName("eve") != nil || x.ByName("jack") != jack || x.Len() != 2 {
		t.Errorf("consumers indexed: jack %v, bob %v, ann %v, eve %v, %d in all", x.ByName("jack"), x.ByName("bob"), x.ByName("ann"), x.ByName("eve"), x.Len())
	}
	var got []string
	for _, err := range x.Refused() {
		if !errors.Is(err, ErrReference) {
			t.Errorf("refusal %v is not ErrReference", err)
		}
		got = append(got, err.Error())
	}
	want := []string{
		`consumer bob: failed to check the configuration of plugin test-auth err: property "key" validation failed: cannot resolve $env://` + refUnset + `: environment variable ` + refUnset + ` is not set`,
		`consumer ann: failed to check the configuration of plugin test-limit err: property "key" validation failed: cannot resolve $env://` + refUnset + `: environment variable ` + refUnset + ` is not set`,
		`consumer eve: duplicate key of plugin test-auth found with consumer: jack, after references resolved`,
		`credential c2 of consumer joe: failed to check the configuration of plugin test-auth err: property "key" validation failed: $secret://vault/1/joe: secret managers ($secret://) are not supported yet`,
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("refused (-want +got):\n%s", d)
	}
	// Two literal keys alike still refuse the whole index.
	_, err = r.IndexConsumers([]*Consumer{joe, {Username: "zed", Plugins: conf("test-auth", `{"key":"k-joe"}`)}}, nil)
	if err == nil || errors.Is(err, ErrReference) {
		t.Errorf("literal duplicate: %v", err)
	}
}
