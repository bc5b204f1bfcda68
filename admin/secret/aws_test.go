package secret

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

// smServer is a real HTTP server on loopback that answers AWS Secrets
// Manager's GetSecretValue as AWS documents it (JSON 1.1 protocol: POST /
// with X-Amz-Target secretsmanager.GetSecretValue), for requests signed
// (SigV4) with the access key AK; names maps a secret's name to its
// SecretString.
func smServer(t *testing.T, names map[string]string, hits *atomic.Int64) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.Header().Set("Content-Type", "application/x-amz-json-1.1")
		if r.Method != http.MethodPost || r.Header.Get("X-Amz-Target") != "secretsmanager.GetSecretValue" ||
			!strings.Contains(r.Header.Get("Authorization"), "Credential=AK/") {
			w.WriteHeader(http.StatusBadRequest)
			_, _ = w.Write([]byte(`{"__type":"UnrecognizedClientException","message":"The security token included in the request is invalid."}`))
			return
		}
		b, _ := io.ReadAll(r.Body)
		var in struct{ SecretId, VersionStage string }
		_ = json.Unmarshal(b, &in)
		v, ok := names[in.SecretId]
		if !ok || in.VersionStage != "AWSCURRENT" {
			w.WriteHeader(http.StatusBadRequest)
			_, _ = w.Write([]byte(`{"__type":"ResourceNotFoundException","message":"Secrets Manager can't find the specified secret."}`))
			return
		}
		out, _ := json.Marshal(map[string]any{"ARN": "arn:aws:secretsmanager:eu-west-1:1:secret:" + in.SecretId,
			"Name": in.SecretId, "SecretString": v, "VersionId": "v1", "VersionStages": []string{"AWSCURRENT"}, "CreatedDate": 1.7e9})
		_, _ = w.Write(out)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestAWSGet: a secret read with the official SDK from a loopback server
// answering as Secrets Manager: the whole value, a member of a JSON
// value, a name holding "/" found by moving segments into the member as
// APISIX does, and the refusals.
func TestAWSGet(t *testing.T) {
	var hits atomic.Int64
	srv := smServer(t, map[string]string{
		"plain":        "p-value",
		"apisix/jack":  `{"auth-key":"jack-value","n":1}`,
		"team/a/creds": `{"k/v":"deep"}`,
	}, &hits)
	ctx := context.Background()
	a := &AWS{AccessKeyID: "AK", SecretAccessKey: "SK", Region: "eu-west-1", EndpointURL: srv.URL}
	for key, want := range map[string]string{
		"plain":                "p-value",
		"apisix/jack/auth-key": "jack-value",
		"team/a/creds/k/v":     "deep",
	} {
		if v, err := a.Get(ctx, nil, key); err != nil || v != want {
			t.Errorf("%s: %q %v, want %q", key, v, err, want)
		}
	}
	for key, want := range map[string]string{
		"apisix/jack/missing": `no string member "missing" in the secret apisix/jack`,
		"apisix/jack/n":       `no string member "n" in the secret apisix/jack`,
		"nothing/here":        "failed to retrieve data from aws secret manager: ",
		"/x":                  "can't find main key, key: /x",
	} {
		if _, err := a.Get(ctx, nil, key); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", key, err, want)
		}
	}
	bad := &AWS{AccessKeyID: "other", SecretAccessKey: "SK-secret", Region: "eu-west-1", EndpointURL: srv.URL}
	if _, err := bad.Get(ctx, nil, "plain"); err == nil || !strings.Contains(err.Error(), "UnrecognizedClientException") || strings.Contains(err.Error(), "SK-secret") {
		t.Errorf("wrong access key: %v", err)
	}
	// Through a Resolver, with the secret access key sealed.
	k := testKeyring(t, "edd1c9f0985e76a2")
	obj := map[string]any{"id": "aws/a1", "access_key_id": "AK", "secret_access_key": "SK", "region": "eu-west-1", "endpoint_url": srv.URL}
	Seal(ManagerAWS, obj, k)
	raw, _ := json.Marshal(obj)
	r := NewResolver(k)
	r.Update([]json.RawMessage{raw})
	if v, err := r.Secret("$secret://aws/a1/apisix/jack/auth-key"); err != nil || v != "jack-value" {
		t.Errorf("resolver: %q %v", v, err)
	}
}
