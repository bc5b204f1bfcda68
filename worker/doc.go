// Package worker is one gateway worker: a gnet event loop that accepts
// client connections, parses HTTP/1.1 requests, routes them with an
// immutable snapshot of the configuration, proxies them over kept-alive
// upstream connections and streams the answers back, with nginx's
// timeouts, limits and closing rules.
//
// # Ownership
//
// Everything a Worker holds is owned by its event loop and touched only
// there, without locks, except what is safe from any goroutine: the
// snapshot pointer (SetSnapshot: a request keeps the snapshot it was routed
// with), the published Stats and tick count, the bound address and Drain.
// Work that must block (enrolling a rescued connection, reaching the loop
// to drain) runs on a goroutine of its own and hands its result back to
// the loop with EventLoop.Execute; a node is connected to by the loop
// itself, without blocking (Worker.dial), at its IP address or at one of
// the addresses the resolver's goroutines keep for its host name
// (resolve.go), which the loop reads through an atomic pointer. gnet calls OnOpen, OnTraffic and
// OnClose on the loop, and the tick (gnet.WithLoopTick) too.
//
// # A client connection
//
// clientConn.state is the connection's phase. closed is apart from it: gnet
// may close a connection in any phase, inside any Write that fails, so code
// that writes checks closed before it goes on.
//
//	phase      waiting for                 event                       next phase
//	---------  --------------------------  --------------------------  ---------------------------------
//	csIdle     the first byte of a head    bytes arrive                csHead
//	           (keepalive_timeout, or      timeout                     closed, nothing sent
//	           client_header_timeout       drain, quiet for drainIdle  csClosing (lingering)
//	           from the accept)
//	csHead     the rest of the head        head parsed: start          csHold, csProxy, csDiscard,
//	           (client_header_timeout)                                 csDelay, csAwait, csIdle or
//	                                                                   csClosing (see below)
//	                                       malformed head              400, 414, 431…; csClosing
//	                                       timeout                     408, csClosing
//	csHold     a chunked body, judged      body within the limit       csProxy (dispatch)
//	           against client_max_body_    over it, or malformed       413/400, csClosing
//	           size before it is sent      timeout                     closed
//	           (bodylimit.go)
//	csBody     the whole body, read for    body read                   the request phases, then as start
//	           a plugin (BodyReader)                                   goes on: csHold, csProxy, csDelay,
//	           before the request phases                               csAwait, csDiscard, csIdle, …
//	           (client_body_timeout;       over the limit, malformed   413/400, csClosing
//	           readbody.go)                timeout                     408, csClosing
//	csProxy    the upstream: dial, the     response complete           csIdle (kept alive) or csClosing
//	           request and its body        attempt failed, no answer   another attempt (csProxy),
//	           (client_body_timeout while  sent yet                    or 502/504 and csIdle/csClosing
//	           uploading), the response    failure once answering      closed: the answer is cut short
//	                                       timeout                     closed
//	                                       101 to an upgrade the       csTunnel
//	                                       route allows
//	csTunnel   either side's bytes, or     bytes                       relayed to the other side
//	           its close (the upstream's   the upstream's close, or    csClosing (the client gets
//	           deadline: timeout.read      its idle timeout            what is queued, then FIN)
//	           since the last byte either  closed                      closed; the upstream closes
//	           way; tunnel.go)                                         once what it was sent is out
//	csDelay    a plugin's delay            the delay passed: the       csIdle, csDiscard or csClosing
//	           (Ctx.ExitAfter, Ctx.Delay,  plugin's answer             (as answered by start)
//	           on the connection's         or, after Delay alone,      csHold or csProxy (proceed)
//	           deadline)                   the request goes upstream
//	                                       closed                      closed (the timer with it)
//	csAwait    a plugin's operation (Ctx.  its Wake (runWakes): the    csAwait again (another Await), or
//	           Await: a Redis call), for   plugin's Resume, the        as start goes on: csHold, csProxy,
//	           at most awaitLimit; the     request phases after it     csDelay, csDiscard, csIdle or
//	           head is copied out of                                   csClosing
//	           gnet's buffer (keepHead)    awaitLimit passed           504, csClosing; a late Wake
//	                                                                   abandons (Resumer.Abandon)
//	                                       closed                      closed; the Wake abandons
//	csDiscard  the rest of the body of a   body read                   csIdle
//	           request the worker          malformed or oversized      csClosing (lingering)
//	           answered (lingering_time)   timeout                     closed
//	csClosing  the flush of the last       flushed, client may still   csLinger
//	           answer (send_timeout)       be sending (linger)
//	                                       flushed                     closed
//	                                       timeout                     closed
//	csLinger   the client's close, input   EOF                         closed
//	           read and dropped            lingering_timeout/time      closed
//	           (nginx's lingering_close)
//
// start routes a parsed head and runs the plugins' request phases
// (phases.go), and ends csHead: to csBody when a plugin of the route or
// of the global rules reads the body (the phases then wait for it), to
// csProxy when the request goes to an upstream, csHold when its chunked
// body must be judged first, csIdle when
// the worker or a plugin answered it (404, 503, a plugin's Exit, …) and it
// had no body, csDiscard when it had one to read and drop, csDelay when a
// plugin's answer waits for its delay, csAwait when a plugin awaits an
// operation off the loop (await.go; resumeAwait then goes on where start
// stopped), csClosing when it was refused (400, 413). While the request
// waits (csDelay, csAwait), the client's further input stays in gnet's
// buffer, its reading paused past maxPipelined, as in csProxy. Between requests, an answer larger than highWater still in
// the outbound buffer keeps the connection in csIdle with its reading
// paused until the answer is flushed (awaitHead): pipelined requests are
// read one answer at a time. Whatever the phase, when gnet closes the
// connection, closedByPeer unlinks its upstream connection, resets its
// exchange and keeps the clientConn for a later connection.
//
// # The exchange
//
// clientConn embeds an exchange: everything of one request and its answer,
// from start to requestDone (or the connection's close). resetExchange ends
// it with one assignment, so outside an exchange (csIdle, csHead) it is
// zero and nothing of one request is seen by the next; its buffers
// (exchangeBufs) are apart and keep only their capacity. Per-request state
// added later belongs there; the plugins' is exchange.plugin (pluginState:
// the phase tables the request runs, its consumer, an exit, the upstream
// request's edits), and pluginCtx is the plugins.Ctx over it. Within an
// exchange, progress is told by these flags:
//
//	reqDone      the whole request was written to the upstream (or answered locally)
//	bodySent     body bytes left the client buffer: the request cannot be replayed
//	respStarted  the response head went to the client: a failure now cuts the answer short
//	badBody      the chunked request body was refused (400) or too large (413)
//
// An upstream connection's share is its embedded upExchange (what was sent
// and received, the response framing, why it failed), zeroed when it is
// linked to a client. Its states:
//
//	usDialing  connect (and, to an https node,   -> usBusy (opened, ready), usClosed (dialFailed,
//	           the TLS handshake) in progress       handshakeFailed, the connect timeout)
//	usBusy     serving its client's exchange     -> usIdle (response done, kept alive),
//	                                                usClosed (failure, timeout, not reusable),
//	                                                usTunnel (a 101 to an upgrade: openTunnel)
//	usTunnel   relaying bytes both ways with its -> usClosed (either side's close, the idle
//	           client (tunnel.go); never pooled     timeout); paused on itself to flush what
//	                                                the client sent once the client is gone
//	usIdle     in its node's pool                -> usBusy (link), usClosed (idle timeout,
//	                                                stray bytes, the peer's close)
//
// A connection whose client left while it dialed joins its pool when the
// dial completes; one whose client left mid-response is aborted. Within
// usBusy, upExchange.phase tells rpHead (waiting for the response head; 1xx
// heads are read and dropped) from rpBody (forwarding the body).
//
// # Linking
//
// clientConn.up and upConn.cc point at each other while the upstream
// connection serves the client's exchange, and change only in link
// (dispatch) and unlink (the exchange's end on either side, a failure, a
// timeout, a close); link also starts the upstream's share of the exchange
// (upExchange) over. Apart from link, each side's fields are written only
// by its own code: clientConn's and its exchange's by clientConn's methods
// (client.go, headers.go, phases.go, …), upConn's by upConn's and its
// pool's (upstream.go, faultlog.go) and Worker.dial. The other side calls
// them: the upstream connection tells the client it is ready (connected),
// begins the client's answer (beginResponse, which runs header_filter and
// records the upstream's status), writes to it (writev) and ends or fails
// the exchange (requestDone, upstreamFailed); the client side writes the
// request through upConn.write, and aborts the connection or puts it back
// in its pool. Two kinds of state are shared code's, not a side's: the
// deadlines (timer.go), which the client side sets on its upstream
// connection while it writes the request to it (send_timeout per write,
// then read_timeout once the request is whole: afterBodyWrite) and the
// upstream side from then on; and the pause states (pause.go), each set by
// the side that pauses itself and cleared by the worker's tick once the
// peer it waits for drains (resumePaused). Each side reads the other's fields
// freely: the upstream side the exchange's (reqDone, isHead, http10,
// closed, chunkClose, the route's timeouts, plugin.reframe), the client
// side upExchange's and the state (gotBytes, sentAny, reused) for a
// retry's decision. All of it runs on the one event loop goroutine, one
// handler at a time, so no field is written while another handler reads
// it; what a call into the other side changes under its caller (a close
// inside a write) is the guard's to sort out (Re-entrancy).
//
// # Re-entrancy
//
// The loop runs one handler at a time, but a handler reaches other
// connections' code, and back: an upstream's response ends an exchange,
// which starts the client's next pipelined request, which may write to that
// same upstream connection; gnet runs OnClose inside the Write that fails.
// Each connection has one guard (reentry), held while its traffic call, a
// write to it (upstream) or a start of pipelined requests (client) is on
// the stack. While it is held, a close asked of the connection is left to
// the outermost holder, a failure reported by OnClose is left to the code
// that wrote, and pipelined requests are left to the traffic call.
//
// # Buffers: who owns which, until when
//
//   - gnet's inbound buffer of a connection: slices from Peek are valid until
//     Discard or until the handler returns (gnet then moves the unread rest
//     into the connection's ring buffer; a Peek across the ring's wrap is a
//     pooled copy that Discard frees). clientConn.req aliases it until
//     discardHead, in start: routing, vars, the plugins' request phases and
//     buildHead read the head before that, and exchange.host and curPath
//     alias it until then too. When a plugin runs later (header_filter,
//     log), or the access log is on (its line is rendered when the
//     exchange ends: accesslog.go), discardHead first copies the head into exchangeBufs.headCopy
//     and parses it again from there (keepHead): req, host and curPath then
//     alias the copy until the exchange ends. A
//     request body stays there until it is written upstream (takeBody's
//     slices, then Discard), held there in csHold and csBody, or dropped
//     in csDiscard; the body read for the plugins is also copied, its
//     data de-chunked, into exchangeBufs.reqBodyBuf (readbody.go), as is
//     the first part of a body copied for them as it goes upstream
//     (teebody.go): a buffer of the worker's pool (Worker.bodyBufs),
//     valid until the exchange ends, when it goes back to the pool.
//     upConn.resp aliases the upstream's inbound buffer; the response head
//     is rewritten into Worker.scratch and the body forwarded from the
//     buffer, both before the Discard that ends the handler (afterWrite).
//     For a log phase that reads them (plugins.ResponseHeadReader,
//     ResponseBodyReader), the head is copied into exchangeBufs.sentHead
//     as it is written (resphead.go) and the body's data, up to the
//     readers' limit, into exchangeBufs.respBody as it is forwarded
//     (respbody.go): both valid until the exchange ends.
//     In a tunnel (csTunnel, usTunnel) each side's bytes are written to
//     the other straight from its buffer, and discarded once written.
//     Back-pressure leaves bytes there: a peer whose outbound buffer passes
//     highWater pauses the reading of the side that feeds it (pause.go).
//   - gnet's Write and Writev send what they can and copy the rest into the
//     connection's outbound buffer: the caller's bytes are free once they
//     return. Writev may reslice the entries of the list it is given: every
//     caller clears the list after, which also drops its references.
//   - A TLS connection's plaintext (tlsConn.plain) stands for gnet's
//     inbound buffer, with the same rule: Peek slices of it are valid
//     until Discard or the next traffic call, where fill moves it.
//     Worker.tlsOut holds the records of one write until gnet took them.
//   - Worker.scratch (a response head or an answer of the worker's own),
//     Worker.iov (the list of one Writev) and Worker.connTok (the tokens of
//     the Connection fields being read) are the loop's, good for one use
//     at a time: until the write, until the next connTokens.
//   - The exchange's buffers (exchangeBufs: head, hostLine, hostValue,
//     hostBuf, pathBuf, servletBuf, targetBuf, reqLine, sizeLine, statuses, upAddrs,
//     and the
//     plugins' exitBody, respHdr, reqEdits, upURI, upMethod, upHost,
//     consumerName, headCopy, kept, reqBodyBuf, sentHead, respBody,
//     setVars)
//     and upConn.sizeLine are the connection's: their capacity is kept from
//     one exchange to the next, and each is written from its start before
//     it is read within one exchange (statuses, upAddrs, respHdr and reqEdits are
//     truncated by resetExchange; pluginState says which of the plugins'
//     are set). head outlives the client's head in gnet's buffer: it is
//     what each attempt sends again, with the plugins' edits in it.
//   - What a plugin's phase gets from pluginCtx aliases those buffers or
//     gnet's: valid for the call, as plugins.Ctx says. What it passes in
//     is copied. Plugin instances belong to the Snapshot; they are called
//     on this loop only.
//   - A Snapshot is immutable and shared by every exchange routed with it;
//     exchange.snap keeps it alive until the exchange ends.
//
// # TLS
//
// A connection accepted on a port of Config.TLSListen is a TLS one
// (clientConn.tls, tls.go); a connection to an https node is one too
// (upConn.tls, uptls.go). Both run in two stages.
//
// The handshake: crypto/tls runs it on a goroutine (it cannot be resumed
// after a read that would block, so it cannot run on the loop), over a
// tlsrec.HandshakeConn. The loop feeds it the peer's whole records as
// they arrive; what crypto/tls writes, and the handshake's end, come back
// to the loop as tasks (EventLoop.Execute), in the order they were made.
// The goroutine is one that finished a handshake and waits for the next
// (goHandshake), or a new one: a new goroutine's stack grew by copying at
// every handshake. A client's handshake is served from the snapshot
// current at its first record (Snapshot.certs: the ssls' certificates by
// SNI, tlsconf, their $env:// and $secret:// references read when the
// snapshot is built, sslref.go); it runs in csIdle under client_header_timeout, counted
// from the accept, so a client that stops mid-handshake is closed then,
// and its goroutine's read returns. An upstream's is bounded by the
// connect timeout.
//
// The records: once the handshake is done, tlsrec carries on with the
// keys crypto/tls logged (recordStream, tlsstream.go): at each traffic
// call fill decrypts the whole records gnet read into the connection's
// plaintext buffer, which the request and response code reads through
// the connection's io (Peek, Discard, InboundBuffered, with gnet's rules);
// each write seals records into Worker.tlsOut and writes them. The records
// the peer sent with its Finished are decrypted when the handshake ends,
// and the requests in them served. A close_notify follows the last answer
// of a connection the gateway closes; one from the peer, a record that
// fails to authenticate or a fatal alert end the connection, as an EOF
// does, once what came before it is read.
//
// Why this design, measured on this project's 2-vCPU machines (nginx
// 1.22 with OpenSSL 3.0 beside it, TLS 1.3, X25519, ECDSA P-256, 1 KiB
// answers): crypto/tls's own record layer, driven from the loop through a
// net.Conn whose reads report a temporary error when empty, cost 0.80×
// nginx's CPU per kept-alive request but allocates 16 bytes per read with
// data (its readFromUntil); tlsrec's record protection is 25–35 % cheaper
// per record and allocates nothing (its package doc has the figures), and
// a kept-alive request costs 0.76–0.84× nginx's. This kernel has no tls
// ULP (tcp_available_ulp lists mptcp only), so kTLS is not an option
// here. A handshake costs about what nginx's does (full 0.96×, resumed
// 0.89× in bench pair; X25519 and the ECDSA signature are half of it, in
// Go's crypto), and the handshakes on their goroutines leave the loop's
// kept-alive traffic a lower p99 than nginx's, whose handshakes run
// inline (bench: tls-p99-under-handshakes).
//
// # Files
//
// worker.go is the Worker and gnet's handlers; client.go a client
// connection; exchange.go the exchange, link and the guard; phases.go the
// plugin phases on the request path and pluginctx.go their plugins.Ctx; upstream.go
// upstream connections and their pools; headers.go the heads the gateway
// writes; bodylimit.go client_max_body_size for chunked bodies;
// readbody.go the body read whole for the plugins; pause.go
// back-pressure; timer.go deadlines; drain.go the graceful stop; snapshot.go
// compiling the configuration, and split.go the upstreams a plugin sends a
// route's requests to (Env.Upstreams, Ctx.SetUpstream: traffic-split),
// each a variant of the route made with the snapshot; balancer.go the choice of node and
// balancers.go the chash, least_conn and ewma balancers; faultlog.go
// the upstream error log; stats.go nginx's stub_status counters; tls.go
// TLS client connections; uptls.go TLS connections to https upstreams;
// tunnel.go the tunnel after a 101 (enable_websocket).
package worker
