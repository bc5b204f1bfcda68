package tlsrec

import (
	"bytes"
	"crypto/tls"
	"io"
	"net"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"
)

// lockedBuffer is an io.Writer for a process's output read while it runs.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestOpenSSLClient: openssl s_client against our server for each TLS 1.3
// suite (crypto/tls lets no one choose among them), with s_client's "K"
// command: a KeyUpdate asking for ours, which goes before our next data.
func TestOpenSSLClient(t *testing.T) {
	if _, err := exec.LookPath("openssl"); err != nil {
		t.Skip("openssl not installed")
	}
	for _, suite := range []string{"TLS_AES_128_GCM_SHA256", "TLS_AES_256_GCM_SHA384", "TLS_CHACHA20_POLY1305_SHA256"} {
		t.Run(suite, func(t *testing.T) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			cmd := exec.Command("openssl", "s_client", "-connect", ln.Addr().String(), "-tls1_3",
				"-ciphersuites", suite, "-servername", "localhost")
			stdin, err := cmd.StdinPipe()
			if err != nil {
				t.Fatal(err)
			}
			out := &lockedBuffer{}
			cmd.Stdout, cmd.Stderr = out, out
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				stdin.Close()
				cmd.Process.Kill()
				cmd.Wait()
			})
			ln.(*net.TCPListener).SetDeadline(time.Now().Add(waitLimit))
			sock, err := ln.Accept()
			if err != nil {
				t.Fatalf("accept: %v\n%s", err, out)
			}
			defer sock.Close()
			s, err := handshake(t, sock, cases[0].server(t), false, nil)
			if err != nil {
				t.Fatalf("handshake: %v\n%s", err, out)
			}
			if name := tls.CipherSuiteName(s.state.CipherSuite); name != suite {
				t.Fatalf("negotiated %s", name)
			}
			io.WriteString(stdin, "hello\n")
			if got, err := s.read(6); err != nil || string(got) != "hello\n" {
				t.Fatalf("read %q, %v\n%s", got, err, out)
			}
			io.WriteString(stdin, "K\n")
			deadline := time.Now().Add(waitLimit)
			for !s.conn.Pending() && time.Now().Before(deadline) {
				if got, err := s.readSome(); err != nil || len(got) != 0 {
					t.Fatalf("waiting for the KeyUpdate: %q, %v", got, err)
				}
			}
			if !s.conn.Pending() {
				t.Fatalf("no KeyUpdate answer pending\n%s", out)
			}
			s.write(s.conn.Seal(nil, []byte("answer-after-keyupdate\n")))
			io.WriteString(stdin, "after\n")
			if got, err := s.read(6); err != nil || string(got) != "after\n" {
				t.Fatalf("read %q, %v\n%s", got, err, out)
			}
			for !strings.Contains(out.String(), "answer-after-keyupdate") && time.Now().Before(deadline) {
				time.Sleep(10 * time.Millisecond)
			}
			if !strings.Contains(out.String(), "answer-after-keyupdate") || !strings.Contains(out.String(), "KEYUPDATE") {
				t.Fatalf("s_client output:\n%s", out)
			}
		})
	}
}

// readSome opens what arrives within a short while.
func (s *side) readSome() ([]byte, error) {
	select {
	case c, ok := <-s.chunks:
		if !ok {
			return nil, io.ErrUnexpectedEOF
		}
		s.in = append(s.in, c...)
	case <-time.After(20 * time.Millisecond):
	}
	out, used, err := s.conn.Open(nil, s.in, 1<<30)
	s.in = s.in[used:]
	return out, err
}
