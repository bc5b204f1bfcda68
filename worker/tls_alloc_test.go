//go:build !race

package worker

import (
	"bytes"
	"crypto/tls"
	"errors"
	"net"
	"testing"

	"coregate/admin/spec"
	"coregate/tlsrec"
)

// tlsrecPair makes the two record layers of one TLS connection: a real
// crypto/tls handshake in memory, each side over a tlsrec.HandshakeConn
// whose writes feed the other's. client is the gateway's side.
func tlsrecPair(t testing.TB, cert tls.Certificate) (client, server *tlsrec.Conn) {
	t.Helper()
	var cs, ss tlsrec.Secrets
	var chc, shc *tlsrec.HandshakeConn
	chc = tlsrec.NewHandshakeConn(&cs, func(b []byte) { shc.Feed(b) })
	shc = tlsrec.NewHandshakeConn(&ss, func(b []byte) { chc.Feed(b) })
	ct := tls.Client(chc, &tls.Config{InsecureSkipVerify: true, KeyLogWriter: &cs, MinVersion: tls.VersionTLS12}) //nolint:gosec // a test's own server
	st := tls.Server(shc, &tls.Config{Certificates: []tls.Certificate{cert}, KeyLogWriter: &ss})
	errs := make(chan error, 1)
	go func() { errs <- st.Handshake() }()
	if err := ct.Handshake(); err != nil {
		t.Fatal(err)
	}
	if err := <-errs; err != nil {
		t.Fatal(err)
	}
	cstate, sstate := ct.ConnectionState(), st.ConnectionState()
	var err error
	if client, err = tlsrec.New(&cstate, true, &cs); err != nil {
		t.Fatal(err)
	}
	if server, err = tlsrec.New(&sstate, false, &ss); err != nil {
		t.Fatal(err)
	}
	// What the server sent after its Finished (session tickets).
	if rest := chc.Rest(); len(rest) > 0 {
		if _, used, err := client.Open(nil, rest, 1<<20); err != nil || used != len(rest) {
			t.Fatalf("records after the handshake: %d of %d used, %v", used, len(rest), err)
		}
	}
	return client, server
}

// TestAllocHTTPSUpstream guards the request path to an https node over a
// kept-alive TLS connection: the request sealed, the response opened and
// forwarded.
func TestAllocHTTPSUpstream(t *testing.T) {
	u, err := spec.DecodeUpstream([]byte(`{"id":"1","scheme":"https","pass_host":"node","nodes":{"127.0.0.1:1980":1}}`))
	if err != nil {
		t.Fatal(err)
	}
	r, err := spec.DecodeRoute([]byte(`{"id":"1","uri":"/hello","upstream_id":"1"}`))
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, &spec.Spec{Routes: []*spec.Route{r}, Upstreams: []*spec.Upstream{u}})
	cert := newTestCA(t).pair(t, "origin", "origin.test")
	client, server := tlsrecPair(t, cert)

	// The kept-alive connection, in the pool of the name the requests
	// go with (the node's address: pass_host=node).
	rt := h.w.snap.Load().routes.at(0)
	p := h.w.poolFor(rt.up, rt.up.nodes[0], []byte("127.0.0.1"))
	up := &fakeConn{loop: h.loop,
		laddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 50001},
		raddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 1980}}
	uc := p.newConn()
	uc.c, up.ctx = up, uc
	uc.tls = &upTLS{uc: uc}
	uc.tls.recordStream.reset(h.w, up)
	uc.tls.rec = client
	uc.io = uc.tls
	uc.state = usBusy
	p.put(uc)
	h.up = up

	req := []byte("GET /hello HTTP/1.1\r\nHost: example.com\r\nUser-Agent: bench\r\nAccept: */*\r\n\r\n")
	resp := append([]byte("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 1024\r\n\r\n"), bytes.Repeat([]byte("x"), 1024)...)
	// The node's side: it opens each request (the sequence numbers go
	// on) and seals the response.
	var sealed, plain []byte
	var used int
	var openErr error
	parts := [][]byte{resp}
	run := func() (toUp, toClient []byte) {
		sealed = server.SealV(sealed[:0], parts)
		toUp, toClient = h.roundTrip(req, sealed)
		plain, used, openErr = server.Open(plain[:0], toUp, 1<<20)
		return toUp, toClient
	}
	for range 10 {
		run()
	}
	toUp, got := run()
	if openErr != nil || used != len(toUp) || !bytes.HasPrefix(plain, []byte("GET /hello HTTP/1.1\r\nHost: 127.0.0.1:1980\r\n")) {
		t.Fatalf("the node got %q (%d of %d bytes opened, %v)", plain, used, len(toUp), openErr)
	}
	if !bytes.HasPrefix(got, []byte("HTTP/1.1 200 OK\r\n")) || !bytes.HasSuffix(got, resp[len(resp)-1024:]) {
		t.Fatalf("unexpected answer:\n%s", got)
	}
	if uc.state != usIdle || len(p.idle) != 1 {
		t.Fatalf("the connection is not back in its pool (state %d)", uc.state)
	}
	allocs := testing.AllocsPerRun(200, func() { run() })
	if allocs != 0 {
		t.Fatalf("https upstream path allocates %.1f times per request, want 0", allocs)
	}
}

// TestAllocTLSClient guards the request path of a client's kept-alive TLS
// connection: the request opened, routed and proxied, the answer sealed.
func TestAllocTLSClient(t *testing.T) {
	h := newHarness(t, helloSpec(t, 100))
	cert := newTestCA(t).pair(t, "gateway", "gateway.test")
	// The test's client is tlsrecPair's client side; the gateway's
	// connection continues its server side.
	client, server := tlsrecPair(t, cert)
	cc := h.cl.ctx.(*clientConn)
	cc.tls = new(tlsConn)
	cc.tls.reset(cc)
	cc.tls.rec = server
	cc.io = cc.tls

	req := []byte("GET /hello HTTP/1.1\r\nHost: example.com\r\nUser-Agent: bench\r\nAccept: */*\r\n\r\n")
	resp := append([]byte("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 1024\r\n\r\n"), bytes.Repeat([]byte("x"), 1024)...)
	var sealed, plain []byte
	var used int
	var openErr error
	run := func() []byte {
		sealed = client.Seal(sealed[:0], req)
		_, toClient := h.roundTrip(sealed, resp)
		plain, used, openErr = client.Open(plain[:0], toClient, 1<<20)
		if used != len(toClient) && openErr == nil {
			openErr = errPartial
		}
		return plain
	}
	for range 10 {
		run()
	}
	got := run()
	if openErr != nil || !bytes.HasPrefix(got, []byte("HTTP/1.1 200 OK\r\n")) || !bytes.HasSuffix(got, resp[len(resp)-1024:]) {
		t.Fatalf("the client got %q, %v", got, openErr)
	}
	if allocs := testing.AllocsPerRun(200, func() { run() }); allocs != 0 {
		t.Fatalf("TLS client request path allocates %.1f times per request, want 0", allocs)
	}
}

var errPartial = errors.New("a partial record")
