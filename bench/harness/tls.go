package harness

import (
	"bufio"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"coregate/bench/certs"
	"coregate/bench/load"
	"coregate/bench/scenario"
)

// ErrNoTLS is returned, wrapped with the reason, when a coregate target of
// a TLS scenario does not serve TLS as configured: it did not start with
// apisix.ssl, refused the handshake, or did not resume (or resumed) as its
// session ticket setting says. The harness leaves coregate out of that
// scenario and lists it with the reason, so that a run stays green before
// the gateway serves TLS.
var ErrNoTLS = errors.New("harness: coregate does not serve TLS")

// withTLS returns s with its TLS port (a free one) and the run's TLS
// files, and the address of that port; s itself when it is not a TLS
// scenario.
func (r *Runner) withTLS(s scenario.Scenario) (scenario.Scenario, string, error) {
	if s.TLS == nil {
		return s, "", nil
	}
	if r.certs == nil {
		dir := filepath.Join(r.o.WorkDir, "tls")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return s, "", err
		}
		set, err := certs.Write(dir)
		if err != nil {
			return s, "", err
		}
		r.certs = set
	}
	port, err := FreePort()
	if err != nil {
		return s, "", err
	}
	s = s.WithTLSPort(port)
	pair, ok := r.certs.Server[s.TLS.Key]
	if !ok {
		return s, "", fmt.Errorf("harness: scenario %s: no %q certificate", s.Name, s.TLS.Key)
	}
	s.TLS.Files = scenario.Files{
		CertFile: pair.CertFile, KeyFile: pair.KeyFile, CAFile: r.certs.CAFile,
		CertPEM: pair.CertPEM, KeyPEM: pair.KeyPEM, CAPEM: r.certs.CAPEM,
		TicketKeyFile: r.certs.TicketKeyFile,
	}
	return s, "127.0.0.1:" + strconv.Itoa(port), nil
}

// clientTLS is the load generator's TLS configuration for s, with a
// session cache of its own when s resumes.
func (r *Runner) clientTLS(s scenario.Scenario) (*tls.Config, error) {
	return r.certs.ClientConfig(s.TLS.MTLS, s.TLS.Tickets)
}

// probeTLS checks t's TLS listener as s configures it: GET /hello over
// two new connections from one session cache answers 200 both times, and
// the second resumes the first's session exactly when s has tickets on.
// It retries for up to 3 s (the listener may come up after the plain
// one) and describes what was negotiated.
func (r *Runner) probeTLS(s scenario.Scenario, t *target) (string, error) {
	var err error
	for deadline := time.Now().Add(3 * time.Second); ; {
		var desc string
		if desc, err = r.probeTLSOnce(s, t); err == nil {
			return desc, nil
		}
		if time.Now().After(deadline) || t.proc != nil && t.proc.Exited() {
			return "", fmt.Errorf("%s at %s: %w", t.name, t.tlsAddr, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (r *Runner) probeTLSOnce(s scenario.Scenario, t *target) (string, error) {
	cfg, err := r.certs.ClientConfig(s.TLS.MTLS, true)
	if err != nil {
		return "", err
	}
	var st [2]tls.ConnectionState
	for i := range st {
		if st[i], err = tlsGet(t.tlsAddr, cfg, s.Load.Header); err != nil {
			return "", err
		}
	}
	switch resumed := st[1].DidResume; {
	case s.TLS.Tickets && !resumed:
		return "", errors.New("a second connection did not resume the first's session, with tickets on")
	case !s.TLS.Tickets && resumed:
		return "", errors.New("a second connection resumed the first's session, with tickets off")
	}
	return fmt.Sprintf("%s, %s, %s", tls.VersionName(st[0].Version), tls.CipherSuiteName(st[0].CipherSuite), st[0].CurveID), nil
}

// tlsGet sends one GET /hello over a new TLS connection to addr and
// returns the connection's state once the answer is 200.
func tlsGet(addr string, cfg *tls.Config, header string) (tls.ConnectionState, error) {
	d := &net.Dialer{Timeout: time.Second}
	c, err := tls.DialWithDialer(d, "tcp", addr, cfg)
	if err != nil {
		return tls.ConnectionState{}, err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := fmt.Fprintf(c, "GET /hello HTTP/1.1\r\nHost: %s\r\n%sConnection: close\r\n\r\n", certs.ServerName, header); err != nil {
		return tls.ConnectionState{}, err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return tls.ConnectionState{}, err
	}
	if f := strings.Fields(line); len(f) < 2 || f[1] != "200" {
		return tls.ConnectionState{}, fmt.Errorf("harness: GET /hello over TLS: %q", strings.TrimSpace(line))
	}
	return c.ConnectionState(), nil
}

// drive loads t with s's load for d: over TLS to its TLS listener in a
// TLS scenario, and there with s's second load of new connections beside
// it, if any (bg, over the same time; zero otherwise).
func (r *Runner) drive(s scenario.Scenario, t *target, d time.Duration, progress func(load.Progress)) (res, bg load.Result, err error) {
	cfg := load.Config{Addr: t.addr, Path: "/hello", Conns: s.Load.ConnsFor(t.workers), Rate: s.Load.Rate, Header: s.Load.Header,
		Threads: len(r.o.LoadCPUs), Duration: d, Progress: progress}
	if s.TLS == nil || t.tlsAddr == "" {
		res, err = load.Run(cfg)
		return res, bg, err
	}
	cfg.Addr, cfg.Host, cfg.NewConn = t.tlsAddr, certs.ServerName, s.TLS.NewConn
	if cfg.TLS, err = r.clientTLS(s); err != nil {
		return res, bg, err
	}
	if s.TLS.Handshakes <= 0 {
		res, err = load.Run(cfg)
		return res, bg, err
	}
	hcfg := cfg
	hcfg.Progress, hcfg.Conns, hcfg.Rate, hcfg.NewConn = nil, max(1, s.TLS.HandshakeConns), s.TLS.Handshakes, true
	hcfg.Duration = d + time.Second // ended by stop, once the measured load is done
	if hcfg.TLS, err = r.certs.ClientConfig(s.TLS.MTLS, false); err != nil {
		return res, bg, err
	}
	var stop atomic.Bool
	hcfg.Stop = &stop
	done := make(chan error, 1)
	go func() {
		var e error
		bg, e = load.Run(hcfg)
		done <- e
	}()
	res, err = load.Run(cfg)
	stop.Store(true)
	if e := <-done; err == nil && e != nil {
		err = fmt.Errorf("harness: handshake load: %w", e)
	}
	return res, bg, err
}
