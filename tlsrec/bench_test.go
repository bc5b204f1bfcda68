package tlsrec

import (
	"crypto/tls"
	"io"
	"net"
	"sync"
	"testing"
	"time"
)

// memConn is one end of an in-memory connection for crypto/tls: Write
// appends to the peer's input, Read waits for input. A benchmark that
// writes then reads on one goroutine never waits.
type memConn struct {
	mu   *sync.Mutex
	cond *sync.Cond
	in   *[]byte
	out  *[]byte
}

func memPair() (*memConn, *memConn) {
	mu := &sync.Mutex{}
	cond := sync.NewCond(mu)
	a, b := make([]byte, 0, 64<<10), make([]byte, 0, 64<<10)
	return &memConn{mu, cond, &a, &b}, &memConn{mu, cond, &b, &a}
}

func (c *memConn) Read(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for len(*c.in) == 0 {
		c.cond.Wait()
	}
	n := copy(p, *c.in)
	*c.in = (*c.in)[:copy(*c.in, (*c.in)[n:])]
	return n, nil
}

func (c *memConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	*c.out = append(*c.out, p...)
	c.mu.Unlock()
	c.cond.Broadcast()
	return len(p), nil
}

func (c *memConn) Close() error                     { return nil }
func (c *memConn) LocalAddr() net.Addr              { return &net.TCPAddr{} }
func (c *memConn) RemoteAddr() net.Addr             { return &net.TCPAddr{} }
func (c *memConn) SetDeadline(time.Time) error      { return nil }
func (c *memConn) SetReadDeadline(time.Time) error  { return nil }
func (c *memConn) SetWriteDeadline(time.Time) error { return nil }

// BenchmarkRecord: a 200-byte request from the client and a 1 KiB
// response (head and body, two parts) from the server, sealed and opened,
// by this package and by crypto/tls's Write and Read.
func BenchmarkRecord(b *testing.B) {
	req := pattern(200, 1)
	resp := pattern(1024, 2)
	for _, k := range []kase{cases[0], cases[1], cases[3]} {
		b.Run(k.name+"/tlsrec", func(b *testing.B) {
			cli, srv := connPairOf(b, k)
			wire := make([]byte, 0, 16<<10)
			plain := make([]byte, 0, 16<<10)
			parts := [][]byte{resp[:120], resp[120:]}
			b.ReportAllocs()
			for b.Loop() {
				w := cli.Seal(wire[:0], req)
				if _, _, err := srv.Open(plain[:0], w, cap(plain)); err != nil {
					b.Fatal(err)
				}
				w = srv.SealV(wire[:0], parts)
				if _, _, err := cli.Open(plain[:0], w, cap(plain)); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(k.name+"/crypto-tls", func(b *testing.B) {
			ca, sa := memPair()
			cc := tls.Client(ca, k.client(b))
			sc := tls.Server(sa, k.server(b))
			done := make(chan error, 1)
			go func() { done <- sc.Handshake() }()
			if err := cc.Handshake(); err != nil {
				b.Fatal(err)
			}
			if err := <-done; err != nil {
				b.Fatal(err)
			}
			// Let the client take the server's tickets.
			sc.Write([]byte("x"))
			io.ReadFull(cc, make([]byte, 1))
			buf := make([]byte, 2048)
			b.ReportAllocs()
			for b.Loop() {
				cc.Write(req)
				if _, err := io.ReadFull(sc, buf[:len(req)]); err != nil {
					b.Fatal(err)
				}
				sc.Write(resp[:120])
				sc.Write(resp[120:])
				if _, err := io.ReadFull(cc, buf[:len(resp)]); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
