package tlsrec

import (
	"bytes"
	"crypto/rand"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestConnWithCryptoTLS runs every supported suite crypto/tls lets us pick
// in both roles against a crypto/tls peer: handshake over a HandshakeConn,
// then application data both ways (small, larger than a record, empty
// records), close_notify both ways.
func TestConnWithCryptoTLS(t *testing.T) {
	for _, k := range cases {
		for _, isClient := range []bool{false, true} {
			t.Run(k.name+"/"+roleName(isClient), func(t *testing.T) {
				ours, peers := configs(t, k, isClient)
				s, peer := pair(t, k, isClient, ours, peers, nil)
				// A TLS 1.3 server's tickets went under the application
				// key before Handshake returned; TLS 1.2's Finished is 0.
				if w := s.conn.write.seq; k.version == tls.VersionTLS13 && !isClient && w == 0 ||
					k.version == tls.VersionTLS12 && (w != 1 || s.conn.read.seq != 1) {
					t.Fatalf("sequence numbers at the start: read %d, write %d", s.conn.read.seq, w)
				}

				// Small messages both ways, several times (sequence numbers).
				for i := 0; i < 3; i++ {
					req := pattern(200+i, byte(i))
					if _, err := peer.Write(req); err != nil {
						t.Fatal(err)
					}
					got, err := s.read(len(req))
					if err != nil || !bytes.Equal(got, req) {
						t.Fatalf("read %d: %v, got %d bytes", i, err, len(got))
					}
					resp := pattern(1024+i, byte(i+100))
					ch := peerRead(peer, len(resp))
					s.write(s.conn.SealV(nil, [][]byte{resp[:10], nil, resp[10:500], resp[500:]}))
					if got := <-ch; !bytes.Equal(got, resp) {
						t.Fatalf("peer read %d: %q", i, got[max(0, len(got)-80):])
					}
				}

				// Larger than a record, from parts: as few records as fit.
				big := pattern(40000, 3)
				sealed := s.conn.SealV(nil, [][]byte{big[:1], big[1:20000], big[20000:]})
				rs := records(t, sealed)
				if len(rs) != 3 {
					t.Fatalf("40000 bytes sealed in %d records, want 3", len(rs))
				}
				ch := peerRead(peer, len(big))
				s.write(sealed)
				if got := <-ch; !bytes.Equal(got, big) {
					t.Fatalf("peer read the big message wrong: %q", got[max(0, len(got)-80):])
				}
				if _, err := peer.Write(big); err != nil {
					t.Fatal(err)
				}
				if got, err := s.read(len(big)); err != nil || !bytes.Equal(got, big) {
					t.Fatalf("read big: %v, %d bytes", err, len(got))
				}

				// Empty records: the peer skips ours; an empty SealV seals nothing.
				if b := s.conn.SealV(nil, [][]byte{nil, {}}); len(b) != 0 {
					t.Fatalf("empty SealV appended %d bytes", len(b))
				}
				start := 0
				empty := s.conn.write.begin(nil, typeApplicationData)
				empty = s.conn.write.seal(empty, start, typeApplicationData)
				ch = peerRead(peer, 5)
				s.write(append(empty, s.conn.Seal(nil, []byte("after"))...))
				if got := <-ch; string(got) != "after" {
					t.Fatalf("peer read %q after an empty record", got)
				}

				// close_notify from the peer: io.EOF, with the data before it.
				if _, err := peer.Write([]byte("last")); err != nil {
					t.Fatal(err)
				}
				if err := peer.CloseWrite(); err != nil {
					t.Fatal(err)
				}
				got, err := s.read(1 << 20)
				if err != io.EOF || string(got) != "last" {
					t.Fatalf("after close_notify: %q, %v", got, err)
				}
				if _, _, err := s.conn.Open(nil, nil, 100); err != io.EOF {
					t.Fatalf("Open after close_notify: %v", err)
				}
				// Our side still writes (TLS 1.3 half-close), then closes.
				ch = peerRead(peer, 3)
				s.write(s.conn.Seal(nil, []byte("bye")))
				if got := <-ch; string(got) != "bye" {
					t.Fatalf("peer read %q", got)
				}
				s.write(s.conn.CloseNotify(nil))
				if b := s.conn.Seal(nil, []byte("x")); len(b) != 0 {
					t.Fatal("Seal after CloseNotify appended a record")
				}
				peer.SetReadDeadline(time.Now().Add(waitLimit))
				if n, err := peer.Read(make([]byte, 10)); err != io.EOF {
					t.Fatalf("peer read after our close_notify: %d, %v", n, err)
				}
			})
		}
	}
}

// coalescing holds what a peer writes after its first write until Release,
// so that its last handshake flight and its first application record reach
// us in one read.
type coalescing struct {
	net.Conn
	mu     sync.Mutex
	writes int
	held   []byte
}

func (c *coalescing) Write(b []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.writes++
	if c.writes == 1 || c.writes < 0 {
		return c.Conn.Write(b)
	}
	c.held = append(c.held, b...)
	return len(b), nil
}

func (c *coalescing) release() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, err := c.Conn.Write(c.held)
	c.held = nil
	c.writes = -1 << 30
	return err
}

// TestFirstRecordWithFinished: the client's first application record
// arrives in the same Feed as its Finished; crypto/tls must not read it,
// and the Conn opens it from Rest.
func TestFirstRecordWithFinished(t *testing.T) {
	for _, k := range []kase{cases[0], cases[1]} {
		t.Run(k.name, func(t *testing.T) {
			if k.version == tls.VersionTLS12 {
				// A TLS 1.2 client's second flight is its second write;
				// the server's Finished comes back before it returns.
				t.Skip("a TLS 1.2 client sends its Finished before the server's; covered by TLS 1.3 and the Rest path")
			}
			a, b := tcpPair(t)
			cw := &coalescing{Conn: b}
			peer := tls.Client(cw, k.client(t))
			perr := make(chan error, 1)
			req := []byte("GET / HTTP/1.1\r\nHost: localhost\r\n\r\n")
			go func() {
				err := peer.Handshake()
				if err == nil {
					_, err = peer.Write(req)
				}
				if err == nil {
					err = cw.release()
				}
				perr <- err
			}()
			s, err := handshake(t, a, k.server(t), false, nil)
			if err != nil {
				t.Fatal(err)
			}
			if err := <-perr; err != nil {
				t.Fatal(err)
			}
			if s.rest == 0 {
				t.Fatal("the application record was not fed with the Finished (Rest is empty)")
			}
			got, err := s.read(len(req))
			if err != nil || !bytes.Equal(got, req) {
				t.Fatalf("first request: %q, %v", got, err)
			}
			ch := peerRead(peer, 2)
			s.write(s.conn.Seal(nil, []byte("ok")))
			if got := <-ch; string(got) != "ok" {
				t.Fatalf("peer read %q", got)
			}
		})
	}
}

// exchange checks one message each way between s and peer.
func exchange(t *testing.T, s *side, peer *tls.Conn, tag string) {
	t.Helper()
	msg := []byte("request " + tag)
	if _, err := peer.Write(msg); err != nil {
		t.Fatal(err)
	}
	if got, err := s.read(len(msg)); err != nil || !bytes.Equal(got, msg) {
		t.Fatalf("%s: read %q, %v", tag, got, err)
	}
	resp := []byte("response " + tag)
	ch := peerRead(peer, len(resp))
	s.write(s.conn.Seal(nil, resp))
	if got := <-ch; !bytes.Equal(got, resp) {
		t.Fatalf("%s: peer read %q", tag, got)
	}
}

// TestResumption: a second handshake resuming the first session's ticket
// continues right, as a server in both versions and as a TLS 1.2 client (a
// TLS 1.3 client's tickets come after the handshake and are dropped).
func TestResumption(t *testing.T) {
	for _, k := range []kase{cases[0], cases[1], cases[6]} {
		for _, isClient := range []bool{false, true} {
			if isClient && k.version == tls.VersionTLS13 {
				continue
			}
			t.Run(k.name+"/"+roleName(isClient), func(t *testing.T) {
				ours, peers := configs(t, k, isClient)
				ticketKeys(ours, peers)
				cache := tls.NewLRUClientSessionCache(4)
				prep := func(s *Secrets, c *tls.Config) {
					if isClient {
						c.ClientSessionCache = s.ClientSessionCache(cache)
					} else {
						c.UnwrapSession = s.UnwrapSession(c)
					}
				}
				if isClient {
					ours.ClientSessionCache = cache
				} else {
					peers.ClientSessionCache = cache
				}
				for i := 0; i < 2; i++ {
					s, peer := pair(t, k, isClient, ours, peers, prep)
					if s.state.DidResume != (i == 1) {
						t.Fatalf("handshake %d: DidResume %v", i, s.state.DidResume)
					}
					exchange(t, s, peer, "r")
					exchange(t, s, peer, "r2")
				}
			})
		}
	}
}

// ticketKeys gives the configurations fixed ticket keys: a clone of a
// Config that has not made tickets yet gets keys of its own.
func ticketKeys(cs ...*tls.Config) {
	var k [32]byte
	rand.Read(k[:])
	for _, c := range cs {
		c.SetSessionTicketKeys([][32]byte{k})
	}
}

// TestResumedTLS12WithoutHook: crypto/tls logs no master secret for a
// resumed TLS 1.2 session; without the hooks New says so.
func TestResumedTLS12WithoutHook(t *testing.T) {
	k := cases[1]
	ours, peers := configs(t, k, false)
	ticketKeys(ours, peers)
	peers.ClientSessionCache = tls.NewLRUClientSessionCache(4)
	s, peer := pair(t, k, false, ours, peers, nil)
	exchange(t, s, peer, "first")
	a, b := tcpPair(t)
	peer = tls.Client(b, peers)
	go peer.Handshake()
	_, err := handshake(t, a, ours, false, nil)
	if err == nil || !strings.Contains(err.Error(), "master secret") {
		t.Fatalf("New after a resumed TLS 1.2 handshake without the hook: %v", err)
	}
}

// TestMutualTLS: a server requiring client certificates (the client's
// certificate, CertificateVerify and Finished are received records; a TLS
// 1.3 server sends its tickets after them).
func TestMutualTLS(t *testing.T) {
	for _, k := range []kase{cases[0], cases[1], cases[5]} {
		t.Run(k.name, func(t *testing.T) {
			ours, peers := configs(t, k, false)
			ours.ClientAuth = tls.RequireAndVerifyClientCert
			ours.ClientCAs = clientCAs
			peers.Certificates = []tls.Certificate{clientCert}
			s, peer := pair(t, k, false, ours, peers, nil)
			if len(s.state.PeerCertificates) != 1 || s.state.PeerCertificates[0].Subject.CommonName != "client" {
				t.Fatalf("peer certificates: %v", s.state.PeerCertificates)
			}
			for i := 0; i < 3; i++ {
				exchange(t, s, peer, "m")
			}
		})
	}
}

// TestKeyUpdateWithCryptoTLS: our KeyUpdate with update_requested makes
// the crypto/tls peer update its read key and answer with one of its own,
// which Open handles; data flows both ways after. The Conn's own rekeying
// (lowered threshold) is accepted by the peer too.
func TestKeyUpdateWithCryptoTLS(t *testing.T) {
	k := cases[0]
	for _, isClient := range []bool{false, true} {
		t.Run(roleName(isClient), func(t *testing.T) {
			ours, peers := configs(t, k, isClient)
			s, peer := pair(t, k, isClient, ours, peers, nil)
			exchange(t, s, peer, "before")
			ch := peerRead(peer, 5)
			s.write(s.conn.Seal(s.conn.sealKeyUpdate(nil, true), []byte("after")))
			if got := <-ch; string(got) != "after" {
				t.Fatalf("peer read %q after our KeyUpdate", got)
			}
			// The peer's answer comes before its next data.
			readBefore := s.conn.read.secret
			exchange(t, s, peer, "answered")
			if bytes.Equal(s.conn.read.secret, readBefore) {
				t.Fatal("the peer's KeyUpdate did not update the read key")
			}
			if s.conn.Pending() {
				t.Fatal("an update_not_requested KeyUpdate left something pending")
			}
			// Rekeying before the limit, lowered to 3 records.
			s.conn.rekeyAt = 3
			w0 := s.conn.write.secret
			for i := 0; i < 8; i++ {
				exchange(t, s, peer, "rekey")
			}
			if bytes.Equal(w0, s.conn.write.secret) || s.conn.write.seq > 3 {
				t.Fatalf("no rekeying: seq %d", s.conn.write.seq)
			}
		})
	}
}

// connPair makes two Conns that continue one TLS 1.3 handshake, both ends
// ours; their records go through the caller.
func connPair(t testing.TB, k kase) (cli, srv *Conn) {
	a, b := tcpPair(t)
	type res struct {
		s   *side
		err error
	}
	ch := make(chan res, 1)
	go func() {
		s, err := handshake(t, b, k.server(t), false, nil)
		ch <- res{s, err}
	}()
	c, err := handshake(t, a, k.client(t), true, nil)
	if err != nil {
		t.Fatal(err)
	}
	r := <-ch
	if r.err != nil {
		t.Fatal(r.err)
	}
	// The server's tickets are in flight to the client: open them there.
	if _, err := c.read(0); err != nil {
		t.Fatal(err)
	}
	return c.conn, r.s.conn
}

// drain opens all of src, which must be whole records.
func drain(t *testing.T, c *Conn, src []byte) []byte {
	t.Helper()
	out, used, err := c.Open(nil, src, 1<<30)
	if err != nil || used != len(src) {
		t.Fatalf("Open: used %d of %d, %v", used, len(src), err)
	}
	return out
}

// TestKeyUpdateRequested: a peer asks for a KeyUpdate; the answer is
// queued, sealed under the old key before anything sealed after, and the
// peer opens it; empty records are accepted.
func TestKeyUpdateRequested(t *testing.T) {
	cli, srv := connPair(t, cases[0])
	// Let the client see the server's tickets (they were fed as chunks).
	wire := cli.sealKeyUpdate(nil, true)
	wire = cli.Seal(wire, []byte("ping"))
	if got := drain(t, srv, wire); string(got) != "ping" {
		t.Fatalf("server read %q", got)
	}
	if !srv.Pending() {
		t.Fatal("update_requested left nothing pending")
	}
	// SealV puts the answer first.
	wire = srv.Seal(nil, []byte("pong"))
	if srv.Pending() {
		t.Fatal("still pending after SealV")
	}
	if got := drain(t, cli, wire); string(got) != "pong" {
		t.Fatalf("client read %q", got)
	}
	if cli.Pending() {
		t.Fatal("update_not_requested answered")
	}
	// AppendPending alone, and empty records.
	wire = cli.sealKeyUpdate(nil, true)
	drain(t, srv, wire)
	wire = srv.AppendPending(nil)
	if len(wire) == 0 || srv.Pending() {
		t.Fatal("AppendPending appended nothing")
	}
	e := srv.write.begin(wire, typeApplicationData)
	wire = srv.write.seal(e, len(wire), typeApplicationData)
	wire = srv.Seal(wire, []byte("x"))
	if got := drain(t, cli, wire); string(got) != "x" {
		t.Fatalf("client read %q", got)
	}
	// A KeyUpdate followed by more in its record is refused.
	start := 0
	bad := cli.write.begin(nil, typeHandshake)
	bad = append(bad, msgKeyUpdate, 0, 0, 1, 0, msgKeyUpdate, 0, 0, 1, 0)
	bad = cli.write.seal(bad, start, typeHandshake)
	if _, _, err := srv.Open(nil, bad, 1<<20); err == nil || !srv.Pending() {
		t.Fatalf("two KeyUpdates in a record: %v", err)
	}
}

// TestTamperedRecord: a record changed on the wire fails; the Conn is
// finished, its alert reaches the crypto/tls peer.
func TestTamperedRecord(t *testing.T) {
	for _, k := range []kase{cases[0], cases[1], cases[3]} {
		t.Run(k.name, func(t *testing.T) {
			ours, peers := configs(t, k, false)
			s, peer := pair(t, k, false, ours, peers, nil)
			exchange(t, s, peer, "ok")
			if _, err := peer.Write([]byte("hello")); err != nil {
				t.Fatal(err)
			}
			for len(s.in) < 5 || RecordLen(s.in) == 0 {
				s.in = append(s.in, <-s.chunks...)
			}
			s.in[RecordLen(s.in)-1] ^= 1
			_, err := s.read(5)
			if !errors.Is(err, errBadRecordMAC) {
				t.Fatalf("tampered record: %v", err)
			}
			if _, _, err2 := s.conn.Open(nil, nil, 10); err2 != err {
				t.Fatalf("later Open: %v", err2)
			}
			if !s.conn.Pending() {
				t.Fatal("no alert pending")
			}
			wire := s.conn.Seal(nil, []byte("dropped"))
			if s.conn.Pending() || len(records(t, wire)) != 1 {
				t.Fatalf("Seal after the error: %d records", len(records(t, wire)))
			}
			s.write(wire)
			peer.SetReadDeadline(time.Now().Add(waitLimit))
			_, perr := peer.Read(make([]byte, 10))
			if perr == nil || !strings.Contains(perr.Error(), "bad record MAC") {
				t.Fatalf("peer got %v", perr)
			}
		})
	}
}

// TestPeerAlert: the crypto/tls peer answers a tampered record of ours
// with an alert, which Open returns as PeerAlert.
func TestPeerAlert(t *testing.T) {
	for _, k := range []kase{cases[0], cases[2]} {
		for _, isClient := range []bool{false, true} {
			t.Run(k.name+"/"+roleName(isClient), func(t *testing.T) {
				ours, peers := configs(t, k, isClient)
				s, peer := pair(t, k, isClient, ours, peers, nil)
				exchange(t, s, peer, "ok")
				wire := s.conn.Seal(nil, []byte("tampered"))
				wire[len(wire)-3] ^= 0x80
				go peer.Read(make([]byte, 10))
				s.write(wire)
				_, err := s.read(1)
				var a PeerAlert
				if !errors.As(err, &a) || a != alertBadRecordMAC {
					t.Fatalf("Open after the peer's alert: %v", err)
				}
				if s.conn.Pending() || len(s.conn.Seal(nil, []byte("x"))) != 0 {
					t.Fatal("the Conn still sends after the peer's fatal alert")
				}
			})
		}
	}
}

// TestOpenLimit: Open stops before a record that would take its output
// past limit, and goes on from there.
func TestOpenLimit(t *testing.T) {
	cli, srv := connPair(t, cases[0])
	wire := cli.Seal(nil, pattern(100, 1))
	wire = cli.Seal(wire, pattern(100, 2))
	out, used, err := srv.Open(make([]byte, 0, 512), wire, 150)
	if err != nil || len(out) != 100 || used != len(wire)/2 {
		t.Fatalf("limit 150: %d bytes out, used %d of %d, %v", len(out), used, len(wire), err)
	}
	out, used2, err := srv.Open(out, wire[used:], 250)
	if err != nil || len(out) != 200 || used+used2 != len(wire) || !bytes.Equal(out[100:], pattern(100, 2)) {
		t.Fatalf("second Open: %d bytes out, %v", len(out), err)
	}
	// Partial records are left.
	more := cli.Seal(nil, []byte("partial"))
	out, used, err = srv.Open(nil, more[:len(more)-1], 1<<20)
	if err != nil || used != 0 || len(out) != 0 {
		t.Fatalf("partial record: used %d, %v", used, err)
	}
}

// TestMalformed: bad records finish the Conn with the matching alert.
func TestMalformed(t *testing.T) {
	for _, tc := range []struct {
		name  string
		src   func(c *Conn) []byte
		alert byte
	}{
		{"header", func(*Conn) []byte { return []byte("GET / HTTP/1.1\r\n") }, alertDecodeError},
		{"short", func(*Conn) []byte { return []byte{23, 3, 3, 0, 3, 1, 2, 3} }, alertBadRecordMAC},
		{"ccs", func(*Conn) []byte { return []byte{20, 3, 3, 0, 1, 1} }, alertUnexpectedMessage},
		{"plain-handshake", func(*Conn) []byte {
			return []byte{22, 3, 3, 0, 20, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20}
		}, alertUnexpectedMessage},
		{"ticket-to-server", func(c *Conn) []byte {
			b := c.write.begin(nil, typeHandshake)
			b = append(b, msgNewSessionTicket, 0, 0, 0)
			return c.write.seal(b, 0, typeHandshake)
		}, alertUnexpectedMessage},
		{"alert-length", func(c *Conn) []byte {
			b := c.write.begin(nil, typeAlert)
			b = append(b, 2, 40, 0)
			return c.write.seal(b, 0, typeAlert)
		}, alertDecodeError},
		{"no-content-type", func(c *Conn) []byte {
			b := c.write.begin(nil, typeApplicationData)
			b = append(b, 0, 0)
			// seal appends a content type; seal a zero one.
			return c.write.seal(b, 0, 0)
		}, alertUnexpectedMessage},
		{"renegotiation-type", func(c *Conn) []byte {
			b := c.write.begin(nil, typeHandshake)
			b = append(b, 1, 0, 0, 0)
			return c.write.seal(b, 0, typeHandshake)
		}, alertUnexpectedMessage},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cli, srv := connPair(t, cases[0])
			src := tc.src(cli)
			_, _, err := srv.Open(nil, src, 1<<20)
			if err == nil || srv.alert != tc.alert {
				t.Fatalf("err %v, alert %d, want alert %d", err, srv.alert, tc.alert)
			}
			if _, _, err2 := srv.Open(nil, nil, 1<<20); err2 != err {
				t.Fatalf("later Open: %v", err2)
			}
			wire := srv.AppendPending(nil)
			if _, _, err := cli.Open(nil, wire, 1<<20); !errors.Is(err, PeerAlert(tc.alert)) {
				t.Fatalf("the peer got %v", err)
			}
		})
	}
}

// TestRecordLen checks the header rules.
func TestRecordLen(t *testing.T) {
	for _, tc := range []struct {
		b    []byte
		want int
	}{
		{nil, 0},
		{[]byte{23}, 0},
		{[]byte{23, 3}, 0},
		{[]byte{23, 3, 3, 0}, 0},
		{[]byte{23, 3, 3, 0, 0}, 5},
		{[]byte{23, 3, 3, 0, 2, 1}, 0},
		{[]byte{23, 3, 3, 0, 2, 1, 2, 9}, 7},
		{[]byte{22, 3, 1, 0, 1, 1}, 6},
		{[]byte{24}, -1},
		{[]byte{19}, -1},
		{[]byte("G"), -1},
		{[]byte{23, 2}, -1},
		{[]byte{23, 3, 3, 0x41, 0x00}, 5 + 0x4100},
		{[]byte{23, 3, 3, 0x41, 0x01}, -1},
	} {
		b := tc.b
		if tc.want > 8 {
			b = append(b, make([]byte, tc.want-5)...)
		}
		if got := RecordLen(b); got != tc.want {
			t.Errorf("RecordLen(% x) = %d, want %d", tc.b, got, tc.want)
		}
	}
}

// TestUnsupported: New refuses suites outside the record layer.
func TestUnsupported(t *testing.T) {
	_, err := New(&tls.ConnectionState{Version: tls.VersionTLS12, CipherSuite: tls.TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA}, false, &Secrets{})
	if err == nil || !strings.Contains(err.Error(), "unsupported") {
		t.Fatalf("CBC suite: %v", err)
	}
	_, err = New(&tls.ConnectionState{Version: tls.VersionTLS13, CipherSuite: tls.TLS_AES_128_GCM_SHA256}, false, &Secrets{})
	if err == nil {
		t.Fatal("no secrets: no error")
	}
}

// TestHandshakeConnClose: Close ends a Read blocked for bytes.
func TestHandshakeConnClose(t *testing.T) {
	h := NewHandshakeConn(&Secrets{}, func([]byte) {})
	done := make(chan error, 1)
	go func() {
		_, err := h.Read(make([]byte, 10))
		done <- err
	}()
	h.Feed([]byte{22, 3}) // less than a header: Read keeps waiting
	select {
	case err := <-done:
		t.Fatalf("Read returned %v before a header", err)
	case <-time.After(50 * time.Millisecond):
	}
	h.Close()
	select {
	case err := <-done:
		if !errors.Is(err, net.ErrClosed) {
			t.Fatalf("Read after Close: %v", err)
		}
	case <-time.After(waitLimit):
		t.Fatal("Close did not end the Read")
	}
	if _, err := h.Write([]byte{1}); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Write after Close: %v", err)
	}
}

// TestHandshakeConnRecordBoundary: Read never crosses a record.
func TestHandshakeConnRecordBoundary(t *testing.T) {
	h := NewHandshakeConn(&Secrets{}, func([]byte) {})
	h.Feed([]byte{22, 3, 3, 0, 2, 'a', 'b', 23, 3, 3, 0, 1, 'c'})
	b := make([]byte, 100)
	n, _ := h.Read(b)
	if n != 7 {
		t.Fatalf("first Read %d bytes, want 7", n)
	}
	n, _ = h.Read(b[:3])
	if n != 3 {
		t.Fatalf("second Read %d", n)
	}
	if r := h.Rest(); len(r) != 3 || r[2] != 'c' {
		t.Fatalf("Rest %q", r)
	}
}
