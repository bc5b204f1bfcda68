// Package tlsrec is a TLS record layer an event loop drives: it continues
// a connection whose handshake crypto/tls made, opening and sealing records
// in the caller's buffers without blocking, locking or allocating.
//
// crypto/tls cannot run on an event loop as it is: its handshake blocks on
// its net.Conn and is not restartable after a would-block, and its Read
// allocates. So the handshake runs with crypto/tls on a goroutine of its
// own over a HandshakeConn, which the loop feeds the records it reads and
// which hands back what crypto/tls writes. The handshake's Config has a
// Secrets as its KeyLogWriter; once Handshake returns, New makes a Conn
// from the ConnectionState and the Secrets, and the loop goes on with
// Conn.Open and Conn.SealV on the socket's bytes, starting with
// HandshakeConn.Rest (the peer's records fed but not read).
//
// # What is implemented
//
// TLS 1.3 with TLS_AES_128_GCM_SHA256, TLS_AES_256_GCM_SHA384 and
// TLS_CHACHA20_POLY1305_SHA256, and TLS 1.2 with the ECDHE-ECDSA and
// ECDHE-RSA suites with AES-128-GCM, AES-256-GCM and CHACHA20-POLY1305, in
// both roles; New refuses anything else. After the handshake: application
// data, close_notify (Open returns io.EOF; CloseNotify sends one), fatal
// alerts both ways, TLS 1.3 KeyUpdate both ways (a requested answer is
// sealed before the next record we seal), NewSessionTicket on the client
// side (dropped: a TLS 1.3 client does not learn tickets sent after its
// handshake). Not implemented: renegotiation and every other TLS 1.2
// handshake message after the handshake, post-handshake client
// authentication, 0-RTT, CBC and non-ECDHE suites, heartbeats. Any alert
// from the peer but close_notify is an error, user_canceled and TLS 1.2
// warnings included.
//
// A TLS 1.3 Conn sealing with AES-GCM updates its own write key (a
// KeyUpdate of its own, update_not_requested) every 2^24 records, within
// RFC 8446 §5.5's limit of 2^24.5.
//
// # Keys and sequence numbers
//
// TLS 1.3 keys come from the CLIENT_TRAFFIC_SECRET_0 and
// SERVER_TRAFFIC_SECRET_0 key log lines. TLS 1.2 keys come from the key
// block derived from the CLIENT_RANDOM line's master secret and the hello
// randoms the Secrets saw go by. crypto/tls writes no key log line when it
// resumes a TLS 1.2 session: Secrets.UnwrapSession (server) and
// Secrets.ClientSessionCache (client) take the master secret from the
// session state instead; without them New fails on a resumed TLS 1.2
// session. (A per-connection clone of a tls.Config that has not issued
// tickets yet gets ticket keys of its own: set them with
// SetSessionTicketKeys for resumption to work across connections.)
//
// crypto/tls may have protected records under the application keys before
// Handshake returns: a TLS 1.3 server's NewSessionTicket messages, sent
// before or after the key log line. New tells how many, in each
// direction, from the records the handshake sent and read: for TLS 1.3 it
// tries the protected records with the application key from sequence
// number 0 (a record under a handshake key fails authentication) and
// counts those from the first that opens, every one of which must open in
// turn; for TLS 1.2 the Finished after ChangeCipherSpec is sequence number
// 0 in each direction and application data starts at 1, which New checks
// by opening the Finished. HandshakeConn's Read never returns bytes past
// the record being read, so crypto/tls never reads a record of the peer's
// after the one that ends its handshake; such records stay in Rest.
//
// # Concurrency
//
// A Conn is one goroutine's (the loop's). A Secrets is the handshake
// goroutine's until Handshake returns, then New's. HandshakeConn's Feed,
// Close and Rest are the loop's, its Read and Write the handshake
// goroutine's; Close may come from any goroutine and ends a blocked Read.
//
// # Buffers
//
// Open appends to dst and returns it as out (grown when dst lacks room); it
// does not write to src, and keeps nothing of either: an incomplete
// post-handshake message is copied. SealV copies the parts into dst and
// seals them there in place; the parts are not kept. A Conn keeps only its
// keys and, for a post-handshake message split across records, its start.
// HandshakeConn copies what Feed hands it and passes send a copy of what
// crypto/tls writes. Nothing is allocated by Open, Seal, SealV,
// AppendPending and CloseNotify once dst has room (alloc_test.go); a
// KeyUpdate allocates its new keys.
//
// # Cost
//
// BenchmarkRecord: a 200-byte request sealed by the client and opened by
// the server, then a 1 KiB response in two parts (head, body) sealed by the
// server and opened by the client; medians of 6 runs on a 2-core Intel
// Xeon shared with other work, Go 1.26, per exchange:
//
//	                          tlsrec           crypto/tls
//	TLS 1.3 AES-128-GCM       ~690 ns, 0 allocs  ~1290 ns, 2 allocs (48 B)
//	TLS 1.2 AES-128-GCM       ~605 ns, 0 allocs  ~1310 ns, 2 allocs (48 B)
//	TLS 1.2 CHACHA20-POLY1305 ~1650 ns, 0 allocs ~2420 ns, 2 allocs (48 B)
//
// crypto/tls's Write and Read run over an in-memory conn (a mutex per
// call) and its two Writes of the response make two records where SealV
// makes one, as a proxy writing head and body would with each; the
// figures compare the two ways of doing a proxy's work, not the ciphers.
package tlsrec
