package worker

import (
	"encoding/json"
	"testing"

	"coregate/admin/keyring"
	"coregate/worker/router"
)

// TestCompileCheck: an upstream whose tls.client_key is stored encrypted
// builds with the node's keyring, and is refused without it (the key as
// stored makes no pair with the certificate).
func TestCompileCheck(t *testing.T) {
	ca := newTestCA(t)
	certPEM, keyPEM := ca.issue(t, "the gateway")
	k, err := keyring.Parse(keyring.Default)
	if err != nil {
		t.Fatal(err)
	}
	conf, _ := json.Marshal(map[string]string{"client_cert": string(certPEM), "client_key": k.Encrypt(string(keyPEM))})
	s := testSpec(t, nil, httpsRoute("127.0.0.1:1", `"tls":`+string(conf)))
	if _, err := CompileCheck(s, router.HostURI, k.DecryptPrivateKey); err != nil {
		t.Errorf("with the keyring: %v", err)
	}
	if _, err := CompileCheck(s, router.HostURI, nil); err == nil {
		t.Error("without the keyring: built")
	}
}
