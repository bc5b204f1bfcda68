// Package tlsconf turns a configuration's ssl objects (spec.SSL) and
// config.yaml's apisix.ssl (Settings) into the crypto/tls configuration
// an HTTPS listener serves, as APISIX serves them: a Table of server
// certificates by SNI (Build), the configuration of each handshake
// (Table.Config), the request-time mTLS check (Table.CheckClient) and
// nginx's TLS variables (Var).
//
// # Names
//
// An object of type server and status 1 is served for its sni or snis,
// lowercased, a final dot dropped. A handshake's SNI picks the object
// naming it exactly, else the most specific wildcard: "*.example.com"
// matches one label before ".example.com" (APISIX's radixtree_sni). A
// handshake without SNI is served as fallback_sni; with none, or with a
// name no object serves, the handshake fails, as APISIX's does.
//
// # Certificates, protocols, ciphers
//
// cert/key and each certs/keys pair are offered together: crypto/tls
// serves the first, ECDSA before RSA, that the client's signature
// algorithms and suites support. Keys that are not PEM are decrypted by
// Build's decrypt function (apisix.data_encryption). An object's
// ssl_protocols replace the settings'; TLSv1 and TLSv1.1 are never
// offered. ssl_ciphers names TLS 1.2 suites as OpenSSL does (ParseCiphers):
// only AEAD suites (AES-GCM, ChaCha20-Poly1305) are offered, the record
// layer's; CBC and DHE suites and unknown names are ignored, and a list
// with nothing usable is refused. TLS 1.3's suites are not configurable
// in crypto/tls; all three are offered. The suites' order is crypto/tls's.
//
// # Client verification (mTLS)
//
// An object with client.ca verifies clients as APISIX does. Without
// skip_mtls_uri_regex the handshake requires a certificate that chains
// to client.ca within client.depth (nginx's ssl_verify_depth: depth n
// allows n intermediate certificates) and fails otherwise. With it, the
// handshake asks for a certificate without requiring one; Entry.Verify
// gives the connection's $ssl_client_verify and Table.CheckClient answers
// 400 to a request whose $uri no pattern matches unless it is SUCCESS.
// Either way a request whose Host names an object that verifies clients
// must have that name as SNI. A session ticket resumes only with the
// object and the name it was made for, so that a session from a name
// without verification cannot skip another's.
//
// # Tickets
//
// With ssl_session_tickets, tickets are sealed with the keys given to
// SetTicketKeys, which the workers of a node share, so that a session
// made with one resumes with another.
//
// # Concurrency
//
// A Table and its Entries are immutable once built, but for their
// ticket keys, and safe for concurrent use. Match, CheckClient and Var
// (but for the DNs, and dst's growth) allocate nothing and do not block:
// they may run on an event loop. Config, Build and Entry.Verify allocate and verify
// certificates: off the event loop.
package tlsconf
