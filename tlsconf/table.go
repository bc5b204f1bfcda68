package tlsconf

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"

	"coregate/admin/spec"
)

// Table is the server certificates of a configuration by SNI, built once
// from its ssls (Build). It is immutable but for its session ticket keys
// (SetTicketKeys) and safe for concurrent use.
type Table struct {
	exact map[string]*Entry
	// wild holds each wildcard name by what follows its '*'
	// ("*.example.com": ".example.com").
	wild     map[string]*Entry
	fallback string
	// tickets holds the session ticket keys every Entry's configuration
	// seals and opens tickets with.
	tickets *tls.Config
	// clients: some Entry verifies clients (CheckClient has work).
	clients bool
}

// Entry is one served ssl object: its prebuilt crypto/tls configuration
// and its client verification. Safe for concurrent use.
type Entry struct {
	ID     string
	SSL    *spec.SSL
	config *tls.Config
	client *client // nil: no client verification
}

// client is an object's mTLS: client.ca, client.depth and
// client.skip_mtls_uri_regex.
type client struct {
	pool  *x509.CertPool
	depth int
	skip  []*regexp.Regexp
}

// Build makes the Table of ssls under s: every object of type server
// and status 1, each of its names (sni or snis, lowercased, a final dot
// dropped) served with its certificates (cert/key, then certs/keys),
// its protocols (ssl_protocols, else s.Protocols), s's ciphers and
// tickets, and client verification when it has client.ca. decrypt
// turns a stored key that is not PEM (one that does not begin with
// "---") into PEM; its field argument names the key ("key", "keys[0]"); nil
// takes keys as stored.
//
// An object that cannot be served (a key that does not decrypt or parse,
// or does not match its certificate; no protocol left; a
// skip_mtls_uri_regex that does not compile) is left out, with one error
// naming it; the rest is served. A name two objects claim is the first's.
// Settings that cannot be served (Settings.Check) leave the Table empty.
func Build(ssls []*spec.SSL, s Settings, decrypt func(field, s string) (string, error)) (*Table, []error) {
	t := &Table{exact: map[string]*Entry{}, wild: map[string]*Entry{}, fallback: normalize(s.FallbackSNI),
		tickets: &tls.Config{}}
	suites, err := ParseCiphers(s.Ciphers)
	if err == nil {
		_, _, err = versions(s.Protocols)
	}
	if err != nil {
		return t, []error{err}
	}
	var errs []error
	for _, sl := range ssls {
		if !sl.Served() {
			continue
		}
		e, err := t.entry(sl, s, suites, decrypt)
		if err != nil {
			errs = append(errs, fmt.Errorf("tlsconf: ssl %s left out: %w", sl.ID.String(), err))
			continue
		}
		if e.client != nil {
			t.clients = true
		}
		for _, n := range sl.ServerNames() {
			n = normalize(n)
			m, key := t.exact, n
			if strings.HasPrefix(n, "*") {
				m, key = t.wild, n[1:]
			}
			if _, ok := m[key]; !ok {
				m[key] = e
			}
		}
	}
	return t, errs
}

// normalize is APISIX's reading of a name: lowercase, without a final dot.
func normalize(n string) string {
	return strings.ToLower(strings.TrimSuffix(n, "."))
}

// entry builds an object's configuration.
func (t *Table) entry(sl *spec.SSL, s Settings, suites []uint16, decrypt func(field, s string) (string, error)) (*Entry, error) {
	e := &Entry{ID: sl.ID.String(), SSL: sl}
	protocols := s.Protocols
	if len(sl.SSLProtocols) > 0 {
		protocols = sl.SSLProtocols
	}
	minV, maxV, err := versions(protocols)
	if err != nil {
		return nil, err
	}
	var certs []tls.Certificate
	add := func(cert, key, field string) error {
		if !strings.HasPrefix(key, "---") && decrypt != nil {
			k, err := decrypt(field, key)
			if err != nil {
				return fmt.Errorf("%s: failed to decrypt previous encrypted key: %w", field, err)
			}
			key = k
		}
		c, err := tls.X509KeyPair([]byte(cert), []byte(key))
		if err != nil {
			return fmt.Errorf("%s: %w", field, err)
		}
		certs = append(certs, c)
		return nil
	}
	if err := add(sl.Cert, sl.Key, "key"); err != nil {
		return nil, err
	}
	for i := range sl.Certs {
		if i >= len(sl.Keys) {
			return nil, errors.New("mismatched number of certs and keys")
		}
		if err := add(sl.Certs[i], sl.Keys[i], fmt.Sprintf("keys[%d]", i)); err != nil {
			return nil, err
		}
	}
	// ECDSA (and Ed25519) first: of the certificates a client supports,
	// crypto/tls serves the first, as OpenSSL prefers the ECDSA suites of
	// the default list.
	var ordered []tls.Certificate
	for _, pass := range []bool{true, false} {
		for _, c := range certs {
			switch c.PrivateKey.(type) {
			case *ecdsa.PrivateKey, ed25519.PrivateKey:
				if pass {
					ordered = append(ordered, c)
				}
			default:
				if !pass {
					ordered = append(ordered, c)
				}
			}
		}
	}
	cfg := &tls.Config{
		Certificates:           ordered,
		MinVersion:             minV,
		MaxVersion:             maxV,
		CipherSuites:           suites,
		SessionTicketsDisabled: !s.SessionTickets,
		// HTTP/1.1 only: a client that offers h2 and http/1.1 gets the
		// latter.
		NextProtos: []string{"http/1.1"},
	}
	if !cfg.SessionTicketsDisabled {
		cfg.WrapSession = func(cs tls.ConnectionState, ss *tls.SessionState) ([]byte, error) {
			ss.Extra = append(ss.Extra, e.binding(cs.ServerName))
			return t.tickets.EncryptTicket(cs, ss)
		}
		cfg.UnwrapSession = func(identity []byte, cs tls.ConnectionState) (*tls.SessionState, error) {
			ss, err := t.tickets.DecryptTicket(identity, cs)
			if err != nil || ss == nil {
				return nil, err
			}
			// A session resumes only with the object and the name it
			// was made for: one from a name without client verification
			// must not skip another's (APISIX's
			// verify_tls_session_resumption). Otherwise a full handshake.
			want := e.binding(cs.ServerName)
			for _, x := range ss.Extra {
				if bytes.Equal(x, want) {
					return ss, nil
				}
			}
			return nil, nil
		}
	}
	if sl.Client != nil {
		c := &client{pool: x509.NewCertPool(), depth: sl.Client.EffectiveDepth()}
		cas, err := spec.ParseCertificates(sl.Client.CA)
		if err != nil {
			return nil, fmt.Errorf("client.ca: %w", err)
		}
		for _, ca := range cas {
			c.pool.AddCert(ca)
		}
		for i, p := range sl.Client.SkipMTLSURIRegex {
			re, err := regexp.Compile(p)
			if err != nil {
				return nil, fmt.Errorf("client.skip_mtls_uri_regex[%d]: %w", i, err)
			}
			c.skip = append(c.skip, re)
		}
		e.client = c
		cfg.ClientCAs = c.pool
		if len(c.skip) == 0 {
			// Verified in the handshake, which fails without a
			// certificate or with one that does not verify, as
			// APISIX's reject_in_handshake.
			cfg.ClientAuth = tls.RequireAndVerifyClientCert
			cfg.VerifyPeerCertificate = func(_ [][]byte, chains [][]*x509.Certificate) error {
				if c.deepEnough(chains) {
					return nil
				}
				return errChainTooLong
			}
		} else {
			// Asked for, verified after the handshake (Entry.Verify),
			// required by request (Table.CheckClient).
			cfg.ClientAuth = tls.RequestClientCert
		}
	}
	e.config = cfg
	return e, nil
}

var errChainTooLong = errors.New("tlsconf: client certificate chain too long for client.depth")

// binding is what a session ticket of the entry for name carries.
func (e *Entry) binding(name string) []byte {
	return []byte("coregate ssl " + e.ID + " " + normalize(name))
}

// deepEnough reports whether one of chains (leaf first, trust anchor
// last) is within client.depth as OpenSSL counts it: depth n allows n
// intermediate certificates between the client's and the CA's.
func (c *client) deepEnough(chains [][]*x509.Certificate) bool {
	for _, ch := range chains {
		if len(ch)-2 <= c.depth {
			return true
		}
	}
	return false
}

// Config returns the crypto/tls configuration of one handshake: it serves
// the Entry the ClientHello's SNI matches (Match), or for a ClientHello
// without SNI fallback_sni's, and fails the handshake when there is none,
// as APISIX does. The configuration served is the Entry's, with
// KeyLogWriter keyLog (nil: none); a keyLog with a Resumed method (a
// tlsrec.Secrets) is also told the session a TLS 1.2 handshake resumes.
// It allocates: call it once per handshake, off the event loop.
func (t *Table) Config(keyLog io.Writer) *tls.Config {
	return &tls.Config{
		GetConfigForClient: func(hello *tls.ClientHelloInfo) (*tls.Config, error) {
			name, e := t.Served(hello.ServerName)
			switch {
			case name == "":
				return nil, errNoSNI
			case e == nil:
				return nil, errNoCertificate
			}
			c := e.config.Clone()
			c.KeyLogWriter = keyLog
			if r, ok := keyLog.(resumer); ok && c.UnwrapSession != nil {
				unwrap := c.UnwrapSession
				c.UnwrapSession = func(identity []byte, cs tls.ConnectionState) (*tls.SessionState, error) {
					ss, err := unwrap(identity, cs)
					if err == nil && ss != nil && cs.Version == tls.VersionTLS12 {
						r.Resumed(ss)
					}
					return ss, err
				}
			}
			return c, nil
		},
	}
}

// resumer is a key log that must be told the session a TLS 1.2
// handshake resumes: crypto/tls logs the master secret of full
// handshakes only (tlsrec.Secrets).
type resumer interface{ Resumed(*tls.SessionState) }

var (
	errNoSNI         = errors.New("tlsconf: failed to find SNI: the client sent none and there is no fallback_sni")
	errNoCertificate = errors.New("tlsconf: failed to find any SSL certificate by SNI")
)

// Match returns the Entry served for sni (lowercase, no final dot): the
// object naming it exactly, else the most specific wildcard. A wildcard
// "*<suffix>" matches a name that ends with <suffix> and has no dot before
// it, as APISIX's radixtree_sni: "*.example.com" matches "a.example.com",
// neither "example.com" nor "a.b.example.com"; of "*.example.com" and
// "*.b.example.com", "x.b.example.com" gets the latter. nil when none.
// It does not allocate.
func (t *Table) Match(sni string) *Entry {
	if e := t.exact[sni]; e != nil {
		return e
	}
	return t.matchWild(sni)
}

func (t *Table) matchWild(sni string) *Entry {
	if len(t.wild) == 0 {
		return nil
	}
	end := strings.IndexByte(sni, '.')
	if end < 0 {
		end = len(sni)
	}
	// The longest suffix first: the most specific wildcard.
	for i := 0; i <= end; i++ {
		if e := t.wild[sni[i:]]; e != nil {
			return e
		}
	}
	return nil
}

// matchBytes is Match for a name as bytes, without allocating.
func (t *Table) matchBytes(name []byte) *Entry {
	if e := t.exact[string(name)]; e != nil {
		return e
	}
	if len(t.wild) == 0 {
		return nil
	}
	end := bytes.IndexByte(name, '.')
	if end < 0 {
		end = len(name)
	}
	for i := 0; i <= end; i++ {
		if e := t.wild[string(name[i:])]; e != nil {
			return e
		}
	}
	return nil
}

// SetTicketKeys installs the session ticket keys the node's workers
// share: the first seals new tickets, all open them. Without them each
// Table seals with keys of its own, rotated by crypto/tls. Safe for
// concurrent use with handshakes.
func (t *Table) SetTicketKeys(keys [][32]byte) {
	if len(keys) == 0 {
		return
	}
	t.tickets.SetSessionTicketKeys(keys)
}

// Served returns the name a handshake with this SNI (as the client sent
// it) is served for, and the Entry that serves it (nil: none): the SNI
// lowercased without a final dot, or fallback_sni for none. It
// allocates for a name to lowercase.
func (t *Table) Served(sni string) (string, *Entry) {
	name := normalize(sni)
	if name == "" {
		name = t.fallback
	}
	if name == "" {
		return "", nil
	}
	return name, t.Match(name)
}

// VerifiesClients reports whether an object of the Table verifies
// clients: only then may CheckClient refuse a request.
func (t *Table) VerifiesClients() bool { return t.clients }

// Len returns how many names the Table serves.
func (t *Table) Len() int { return len(t.exact) + len(t.wild) }
