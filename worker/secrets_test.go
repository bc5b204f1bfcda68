package worker

import (
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"coregate/plugins"
)

// objSecrets is a SecretSource that reads its values from the secret
// objects the build hands it (plugins.Registry.UpdateSecrets), each
// {"id":"<manager>/<id>","value":…}, as admin/secret's Resolver reads
// them from Vault with the objects (which the worker may not import).
type objSecrets struct {
	mu      sync.Mutex
	values  map[string]string // "<manager>/<id>" → value
	updates int
}

func (s *objSecrets) Update(objs []json.RawMessage) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.updates++
	s.values = map[string]string{}
	for _, raw := range objs {
		var o struct{ ID, Value string }
		if json.Unmarshal(raw, &o) == nil {
			s.values[o.ID] = o.Value
		}
	}
}

func (s *objSecrets) Secret(ref string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rest := strings.TrimPrefix(ref, "$secret://")
	parts := strings.SplitN(rest, "/", 3)
	if len(parts) < 3 {
		return "", errors.New("error format")
	}
	v, ok := s.values[parts[0]+"/"+parts[1]]
	if !ok {
		return "", errors.New("no secret conf, secret_uri: " + ref)
	}
	return v, nil
}

// TestCompileResolvesSecrets: a consumer's $secret:// key is resolved
// with the Spec's secret objects when the worker builds; a change of the
// secret object alone builds again with the new value; a reference to a
// secret the Spec lacks leaves its consumer out, logged with the
// reference and never a value.
func TestCompileResolvesSecrets(t *testing.T) {
	src := &objSecrets{}
	plugins.Default.SetSecrets(src)
	t.Cleanup(func() { plugins.Default.SetSecrets(nil) })

	up := `"upstream":{"nodes":{"127.0.0.1:1980":1}}`
	s := pluginSpec(t, []string{`{"id":"r1","uri":"/a","plugins":{"key-auth":{}},` + up + `}`}, nil, []string{
		`{"username":"jack","plugins":{"key-auth":{"key":"$secret://vault/v1/jack/key"}}}`,
		`{"username":"bob","plugins":{"key-auth":{"key":"$secret://vault/gone/bob/key"}}}`,
	}, nil)
	s.Secrets = []json.RawMessage{json.RawMessage(`{"id":"vault/v1","value":"k-one"}`)}
	s.SetHash()
	var log bytes.Buffer
	w := New(Config{Listen: []string{"127.0.0.1:0"}, Logger: slog.New(slog.NewTextHandler(&log, nil))})
	if err := w.SetSpec(s, nil); err != nil {
		t.Fatal(err)
	}
	want := `msg="configuration: object left out" err="consumer bob: failed to check the configuration of plugin key-auth err: property \"key\" validation failed: cannot resolve $secret://vault/gone/bob/key: no secret conf`
	if !strings.Contains(log.String(), want) {
		t.Errorf("log lacks %s:\n%s", want, log.String())
	}
	if strings.Contains(log.String(), "k-one") {
		t.Errorf("the log shows a value:\n%s", log.String())
	}
	h := newHarnessSnap(t, w, w.snap.Load())
	try := func(key, status string) {
		t.Helper()
		resp := []byte(upOK)
		if status != "200" {
			resp = nil
		}
		_, got := h.roundTrip([]byte("GET /a HTTP/1.1\r\nHost: h\r\napikey: "+key+"\r\n\r\n"), resp)
		if !bytes.HasPrefix(got, []byte("HTTP/1.1 "+status+" ")) {
			t.Errorf("apikey %s: answer %q, want %s", key, got, status)
		}
	}
	try("k-one", "200")
	try("$secret://vault/v1/jack/key", "401")

	// The secret object changes, nothing else: built again, with the
	// new value.
	next := *s
	next.Secrets = []json.RawMessage{json.RawMessage(`{"id":"vault/v1","value":"k-two"}`)}
	next.SetHash()
	if err := w.SetSpec(&next, nil); err != nil {
		t.Fatal(err)
	}
	try("k-two", "200")
	try("k-one", "401")
}
