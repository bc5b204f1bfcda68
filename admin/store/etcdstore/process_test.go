package etcdstore

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"coregate/admin/nodeconf"
	"coregate/admin/store"
	"coregate/internal/e2e"
)

// TestEtcdProcess runs the store suite against a real etcd process (a
// one-member cluster on free loopback ports, killed by its PID at the
// end; without an etcd binary the test is skipped, except under CI).
func TestEtcdProcess(t *testing.T) {
	e := e2e.NewEtcd(t)
	e.Start()
	runSuite(t, []string{e.Client})
}

// etcdMember is one member of a cluster of etcd processes.
type etcdMember struct {
	cmd    *exec.Cmd
	client string
	exited chan struct{}
}

// startEtcdCluster starts an n-member etcd cluster of processes on free
// loopback ports and waits until it answers; the members are killed (by
// PID) when the test ends.
func startEtcdCluster(t *testing.T, n int) []*etcdMember {
	t.Helper()
	bin, err := exec.LookPath("etcd")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("no etcd binary under CI (apt-get install etcd-server): %v", err)
		}
		t.Skipf("no etcd binary (apt-get install etcd-server): %v", err)
	}
	ports, err := freePorts(2*n, nil)
	if err != nil {
		t.Fatal(err)
	}
	var initial []string
	for i := range n {
		initial = append(initial, fmt.Sprintf("m%d=http://127.0.0.1:%d", i, ports[2*i+1]))
	}
	members := make([]*etcdMember, n)
	var logs []*bytes.Buffer
	for i := range n {
		client := fmt.Sprintf("http://127.0.0.1:%d", ports[2*i])
		peer := fmt.Sprintf("http://127.0.0.1:%d", ports[2*i+1])
		log := new(bytes.Buffer)
		logs = append(logs, log)
		cmd := exec.Command(bin,
			"--name", fmt.Sprintf("m%d", i),
			"--data-dir", filepath.Join(t.TempDir(), "etcd"),
			"--listen-client-urls", client, "--advertise-client-urls", client,
			"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
			"--initial-cluster", strings.Join(initial, ","),
			"--initial-cluster-state", "new",
			"--log-level", "error",
		)
		cmd.Stdout, cmd.Stderr = log, log
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		m := &etcdMember{cmd: cmd, client: client, exited: make(chan struct{})}
		go func() { m.cmd.Wait(); close(m.exited) }()
		members[i] = m
	}
	t.Cleanup(func() {
		for _, m := range members {
			m.kill()
		}
		if t.Failed() {
			for i, l := range logs {
				t.Logf("etcd member %d output:\n%s", i, l)
			}
		}
	})
	s, err := New(Options{Endpoints: endpointsOf(members), Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	deadline := time.Now().Add(60 * time.Second)
	for {
		if _, err := s.GenID(context.Background()); err == nil {
			return members
		} else if time.Now().After(deadline) {
			t.Fatalf("etcd cluster not answering after 60 s: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (m *etcdMember) kill() {
	m.cmd.Process.Kill()
	<-m.exited
}

func endpointsOf(ms []*etcdMember) []string {
	var eps []string
	for _, m := range ms {
		eps = append(eps, m.client)
	}
	return eps
}

// TestEtcdCluster: a store on a 3-member cluster keeps working when one
// member is stopped mid-test: a watch opened before delivers every change
// made after (resumed from its last revision if it ends), and the whole
// suite then runs with the member still down.
func TestEtcdCluster(t *testing.T) {
	members := startEtcdCluster(t, 3)
	eps := endpointsOf(members)
	s := newStore(t, eps)
	ctx := ctxT(t)
	dir := s.Prefix() + "/"
	_, rev, err := s.List(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	// put retries a write that found no leader or the stopped member: the
	// client moves to a live one.
	put := func(key string) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			_, _, err := s.Put(ctx, dir+key, []byte(`{}`), store.PutOptions{})
			if err == nil {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("Put %s with one member down: %v", key, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	seen := map[string]bool{}
	last := rev
	ch := s.Watch(ctx, dir, last+1)
	take := func(want int) {
		t.Helper()
		deadline := time.After(60 * time.Second)
		for len(seen) < want {
			select {
			case wr, ok := <-ch:
				if !ok || wr.Err != nil {
					// Lost with its member: resume from the last revision.
					ch = s.Watch(ctx, dir, last+1)
					continue
				}
				for _, ev := range wr.Events {
					seen[ev.KV.Key] = true
				}
				last = wr.Revision
			case <-deadline:
				t.Fatalf("watch saw %d keys, want %d", len(seen), want)
			}
		}
	}
	for i := range 5 {
		put(fmt.Sprintf("routes/before%d", i))
	}
	take(5)
	members[0].kill()
	for i := range 5 {
		put(fmt.Sprintf("routes/after%d", i))
	}
	take(10)
	runSuite(t, eps)
}

// writeCert writes a certificate for 127.0.0.1 signed by ca (self-signed
// when ca is nil) and its key, PEM, and returns it.
func writeCert(t *testing.T, dir, name string, ca *x509.Certificate, caKey *ecdsa.PrivateKey, isCA bool) (*x509.Certificate, *ecdsa.PrivateKey, string, string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: name},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		IsCA:         isCA, BasicConstraintsValid: true,
	}
	parent, signer := tmpl, key
	if ca != nil {
		parent, signer = ca, caKey
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, signer)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certPath, keyPath := filepath.Join(dir, name+".pem"), filepath.Join(dir, name+"-key.pem")
	if err := os.WriteFile(certPath, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyPath, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600); err != nil {
		t.Fatal(err)
	}
	return cert, key, certPath, keyPath
}

// TestEtcdProcessTLS: deployment.etcd.tls reaches etcd: an etcd process on
// https that requires a client certificate is read with tls.cert and
// tls.key and verify: false; verify: true refuses its certificate (signed
// by a CA the system does not trust) unless apisix.ssl.ssl_trusted_certificate
// names that CA; etcd refuses a client without a certificate.
func TestEtcdProcessTLS(t *testing.T) {
	bin, err := exec.LookPath("etcd")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("no etcd binary under CI (apt-get install etcd-server): %v", err)
		}
		t.Skipf("no etcd binary (apt-get install etcd-server): %v", err)
	}
	dir := t.TempDir()
	ca, caKey, caPath, _ := writeCert(t, dir, "ca", nil, nil, true)
	_, _, srvCert, srvKey := writeCert(t, dir, "server", ca, caKey, false)
	_, _, cliCert, cliKey := writeCert(t, dir, "client", ca, caKey, false)
	ports, err := freePorts(2, nil)
	if err != nil {
		t.Fatal(err)
	}
	client := fmt.Sprintf("https://127.0.0.1:%d", ports[0])
	peer := fmt.Sprintf("http://127.0.0.1:%d", ports[1])
	var log bytes.Buffer
	cmd := exec.Command(bin, "--name", "t", "--data-dir", filepath.Join(dir, "etcd"),
		"--listen-client-urls", client, "--advertise-client-urls", client,
		"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
		"--initial-cluster", "t="+peer, "--log-level", "error",
		"--cert-file", srvCert, "--key-file", srvKey,
		"--client-cert-auth", "--trusted-ca-file", caPath)
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-exited
		if t.Failed() {
			t.Logf("etcd output:\n%s", &log)
		}
	})
	open := func(tc nodeconf.EtcdTLS) *Store {
		return openConfig(t, nodeconf.EtcdConfig{Host: []string{client}, Prefix: "/apisix", Timeout: 2, TLS: tc})
	}
	ctx := ctxT(t)
	good := open(nodeconf.EtcdTLS{Cert: cliCert, Key: cliKey, Verify: false})
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, _, err := good.Put(ctx, "/apisix/routes/1", []byte(`{}`), store.PutOptions{})
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Put over TLS with a client certificate: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if _, err := open(nodeconf.EtcdTLS{Cert: cliCert, Key: cliKey, Verify: true}).Get(ctx, "/apisix/routes/1"); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("verify: true with an untrusted server certificate: %v, want ErrUnavailable", err)
	}
	// apisix.ssl.ssl_trusted_certificate names the CA: verify: true passes,
	// with the system's CAs beside it or without them.
	for _, trusted := range []string{caPath, "system, " + caPath} {
		if _, err := open(nodeconf.EtcdTLS{Cert: cliCert, Key: cliKey, Verify: true, TrustedCA: trusted}).Get(ctx, "/apisix/routes/1"); err != nil {
			t.Fatalf("verify: true, ssl_trusted_certificate %q: %v", trusted, err)
		}
	}
	if _, err := OptionsFrom(nodeconf.EtcdConfig{Host: []string{client}, TLS: nodeconf.EtcdTLS{Verify: true, TrustedCA: cliKey}}); err == nil {
		t.Fatal("OptionsFrom with a trusted CA file that holds no certificate: no error")
	}
	if _, err := open(nodeconf.EtcdTLS{Verify: false}).Get(ctx, "/apisix/routes/1"); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("no client certificate: %v, want ErrUnavailable", err)
	}
	if _, err := OptionsFrom(nodeconf.EtcdConfig{Host: []string{client}, TLS: nodeconf.EtcdTLS{Cert: filepath.Join(dir, "missing.pem"), Key: cliKey}}); err == nil {
		t.Fatal("OptionsFrom with a missing certificate file: no error")
	}
}
