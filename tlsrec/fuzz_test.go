package tlsrec

import (
	"bytes"
	"crypto/tls"
	"io"
	"testing"
)

// fuzzConns returns a client and server Conn with fixed keys (no
// handshake), so that a seed sealed by one opens in the other.
func fuzzConns(t testing.TB, version uint16) (cli, srv *Conn) {
	mk := func(isClient bool) *Conn {
		st := &tls.ConnectionState{Version: version, CipherSuite: tls.TLS_AES_128_GCM_SHA256}
		s := &Secrets{clientTraffic: bytes.Repeat([]byte{1}, 32), serverTraffic: bytes.Repeat([]byte{2}, 32),
			master: bytes.Repeat([]byte{3}, 48), clientRandom: bytes.Repeat([]byte{4}, 32)}
		if version == tls.VersionTLS12 {
			st.CipherSuite = tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256
			copy(s.sent.hello[6:], s.clientRandom)
			copy(s.recv.hello[6:], bytes.Repeat([]byte{5}, 32))
			s.sent.helloN, s.recv.helloN = 38, 38
			if !isClient {
				s.sent.hello, s.recv.hello = s.recv.hello, s.sent.hello
			}
		}
		c := &Conn{version: version, isClient: isClient}
		su, _ := suiteFor(version, st.CipherSuite)
		if version == tls.VersionTLS13 {
			rs, ws := s.serverTraffic, s.clientTraffic
			if !isClient {
				rs, ws = ws, rs
			}
			if err := c.read.setKey13(su, rs); err != nil {
				t.Fatal(err)
			}
			if err := c.write.setKey13(su, ws); err != nil {
				t.Fatal(err)
			}
		} else if err := c.keys12(su, st.CipherSuite, isClient, s); err != nil {
			t.Fatal(err)
		}
		return c
	}
	return mk(true), mk(false)
}

// FuzzOpen: Open never panics on any bytes, stops only on the record
// boundaries RecordLen gives, and agrees with it on where input is
// malformed. The second half seals the input as records of chosen types
// and contents (a byte of type, a byte of length, the content), which
// drives the alert and post-handshake message handling.
func FuzzOpen(f *testing.F) {
	for _, v := range []uint16{tls.VersionTLS13, tls.VersionTLS12} {
		cli, _ := fuzzConns(f, v)
		w := cli.Seal(nil, []byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"))
		w = cli.Seal(w, nil)
		f.Add(w)
		f.Add(cli.CloseNotify(nil))
	}
	cli, _ := fuzzConns(f, tls.VersionTLS13)
	f.Add(cli.sealKeyUpdate(nil, true))
	f.Add([]byte{23, 5, 'h', 'e', 'l', 'l', 'o', 22, 5, 24, 0, 0, 1, 1, 23, 1, 'x'})
	f.Add([]byte{22, 4, 4, 0, 0, 9, 22, 9, 1, 2, 3, 4, 5, 6, 7, 8, 9, 21, 2, 1, 0})
	f.Add([]byte("GET / HTTP/1.1\r\n\r\n"))
	f.Fuzz(func(t *testing.T, src []byte) {
		for _, v := range []uint16{tls.VersionTLS13, tls.VersionTLS12} {
			cli, srv := fuzzConns(t, v)
			// Raw bytes.
			bounds := map[int]bool{0: true}
			end, bad := 0, false
			for {
				n := RecordLen(src[end:])
				if n <= 0 {
					bad = n < 0
					break
				}
				end += n
				bounds[end] = true
			}
			_, used, err := srv.Open(nil, src, 1<<30)
			if !bounds[used] || used > end {
				t.Fatalf("Open used %d, not a record boundary (records end at %d)", used, end)
			}
			if err == nil && (used != end || bad) {
				t.Fatalf("Open used %d without error, records end at %d (malformed after: %v)", used, end, bad)
			}
			// Sealed contents.
			var wire, want []byte
			for b := src; len(b) >= 2; {
				typ, n := b[0], int(b[1])
				b = b[2:]
				n = min(n, len(b))
				content := b[:n]
				b = b[n:]
				start := len(wire)
				wire = cli.write.begin(wire, typ)
				wire = append(wire, content...)
				wire = cli.write.seal(wire, start, typ)
				if v == tls.VersionTLS13 && typ == 0 {
					// A zero type is padding: the content's last
					// non-zero byte is the type.
					i := len(content) - 1
					for i >= 0 && content[i] == 0 {
						i--
					}
					if i < 0 {
						continue
					}
					typ, content = content[i], content[:i]
				}
				if typ == typeApplicationData {
					want = append(want, content...)
				}
			}
			_, srv = fuzzConns(t, v)
			out, used, err := srv.Open(nil, wire, 1<<30)
			if err == nil && (used != len(wire) || !bytes.Equal(out, want)) {
				t.Fatalf("sealed records: used %d of %d, %d bytes out of %d", used, len(wire), len(out), len(want))
			}
			if err != nil && err != io.EOF && !srv.Pending() {
				if _, ok := err.(PeerAlert); !ok {
					t.Fatalf("error %v without an alert to send", err)
				}
			}
		}
	})
}
