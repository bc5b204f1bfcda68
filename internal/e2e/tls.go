package e2e

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"testing"
	"time"
)

// HTTPSClient returns an HTTP client whose every connection goes to addr
// (a gateway's TLSAddr) over TLS with a copy of cfg, its ServerName, when
// cfg has none, the host of the request's URL: https://a.example.com/x
// is sent to addr with SNI and Host a.example.com, as curl --resolve
// sends it. With keepAlive false each request has a connection, and so a
// handshake, of its own. Connections are closed when the test ends;
// a request fails after 10 s.
func HTTPSClient(t testing.TB, addr string, cfg *tls.Config, keepAlive bool) *http.Client {
	d := &net.Dialer{Timeout: 2 * time.Second}
	tr := &http.Transport{
		DisableCompression: true,
		DisableKeepAlives:  !keepAlive,
		IdleConnTimeout:    5 * time.Second,
		TLSClientConfig:    cfg.Clone(),
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return d.DialContext(ctx, network, addr)
		},
	}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 10 * time.Second}
}

// DialTLS opens a TLS connection to addr with cfg and runs its handshake,
// both within 2 s; the connection is closed when the test ends, and
// everything done on it must end within 15 s. It returns the error of
// the dial or of the handshake.
func DialTLS(t testing.TB, addr string, cfg *tls.Config) (*tls.Conn, error) {
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 2 * time.Second}, "tcp", addr, cfg)
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(15 * time.Second))
	return c, nil
}
