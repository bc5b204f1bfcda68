package load

import (
	"crypto/tls"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"coregate/bench/certs"
)

// tlsServer starts a TLS 1.3 HTTP server on loopback answering 1 KiB,
// with session tickets as given, and returns its address, the certificate
// set and a count of the connections it accepted.
func tlsServer(t *testing.T, tickets bool) (string, *certs.Set, *atomic.Int64) {
	t.Helper()
	set, err := certs.Write(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	cert, err := tls.LoadX509KeyPair(set.Server[certs.ECDSA].CertFile, set.Server[certs.ECDSA].KeyFile)
	if err != nil {
		t.Fatal(err)
	}
	body := strings.Repeat("1234567890", 102) + "1234"
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Host != certs.ServerName || r.URL.Path != "/hello" {
			w.WriteHeader(http.StatusNotFound)
			return
		}
		_, _ = w.Write([]byte(body))
	}))
	var conns atomic.Int64
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS13, SessionTicketsDisabled: !tickets}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "https://"), set, &conns
}

func TestTLSKeepAlive(t *testing.T) {
	addr, set, conns := tlsServer(t, false)
	cfg, err := set.ClientConfig(false, false)
	if err != nil {
		t.Fatal(err)
	}
	res, err := Run(Config{Addr: addr, Host: certs.ServerName, Conns: 8, Duration: 20 * time.Second, MaxRequests: 3000, TLS: cfg})
	if err != nil {
		t.Fatal(err)
	}
	if res.Requests != 3000 || res.Errors != 0 || res.Non2xx != 0 || res.Latency.Count() != 3000 {
		t.Errorf("requests %d errors %d non-2xx %d recorded %d; want 3000 answered", res.Requests, res.Errors, res.Non2xx, res.Latency.Count())
	}
	// The probe connection is the first connection's: 8 in all.
	if res.Handshakes != 8 || res.Resumed != 0 || conns.Load() != 8 {
		t.Errorf("handshakes %d resumed %d, server saw %d connections; want 8 kept alive", res.Handshakes, res.Resumed, conns.Load())
	}
	// A wrong Host is counted as non-2xx, which the harness refuses.
	res, err = Run(Config{Addr: addr, Conns: 2, Duration: 20 * time.Second, MaxRequests: 10, TLS: cfg})
	if err != nil || res.Non2xx != 10 {
		t.Errorf("wrong Host: %d non-2xx of %d, %v", res.Non2xx, res.Requests, err)
	}
}

// TestTLSNewConn: with NewConn every request has a connection and a
// handshake of its own; with tickets and a session cache they resume,
// without either none does.
func TestTLSNewConn(t *testing.T) {
	for _, tickets := range []bool{false, true} {
		addr, set, conns := tlsServer(t, tickets)
		cfg, err := set.ClientConfig(false, tickets)
		if err != nil {
			t.Fatal(err)
		}
		res, err := Run(Config{Addr: addr, Host: certs.ServerName, Conns: 4, Duration: 20 * time.Second, MaxRequests: 200, NewConn: true, TLS: cfg})
		if err != nil {
			t.Fatal(err)
		}
		if res.Requests != 200 || res.Errors != 0 || res.Non2xx != 0 || res.Handshakes != 200 {
			t.Errorf("tickets %v: requests %d errors %d non-2xx %d handshakes %d; want 200 each", tickets, res.Requests, res.Errors, res.Non2xx, res.Handshakes)
		}
		// the probe connection, closed unused, and one per request
		if n := conns.Load(); n != 201 {
			t.Errorf("tickets %v: server saw %d connections, want 201", tickets, n)
		}
		switch {
		case !tickets && res.Resumed != 0:
			t.Errorf("no tickets: %d handshakes resumed", res.Resumed)
		case tickets && res.Resumed < 200-4:
			t.Errorf("tickets: %d of 200 handshakes resumed; want all but each connection's first", res.Resumed)
		}
	}
}

// TestTLSFixedRate: at a fixed rate the run sends about rate × duration
// requests, not as many as the server can answer, and a Stop ends it.
func TestTLSFixedRate(t *testing.T) {
	addr, set, _ := tlsServer(t, false)
	cfg, err := set.ClientConfig(false, false)
	if err != nil {
		t.Fatal(err)
	}
	res, err := Run(Config{Addr: addr, Host: certs.ServerName, Conns: 4, Duration: time.Second, Rate: 400, TLS: cfg})
	if err != nil {
		t.Fatal(err)
	}
	if res.Requests < 300 || res.Requests > 410 || res.Errors != 0 {
		t.Errorf("400 req/s for 1 s: %d requests, %d errors", res.Requests, res.Errors)
	}
	var stop atomic.Bool
	time.AfterFunc(300*time.Millisecond, func() { stop.Store(true) })
	start := time.Now()
	res, err = Run(Config{Addr: addr, Host: certs.ServerName, Conns: 4, Duration: 20 * time.Second, Rate: 400, TLS: cfg, Stop: &stop})
	if err != nil || time.Since(start) > 5*time.Second || res.Requests == 0 {
		t.Errorf("stopped run: %v, %d requests, %v", time.Since(start), res.Requests, err)
	}
	if _, err := Run(Config{Addr: "127.0.0.1:1", Conns: 1, Duration: time.Second, TLS: cfg}); err == nil {
		t.Error("no error from a port nobody listens on")
	}
}
