package worker

import (
	"crypto/rand"
	"crypto/tls"
	"reflect"
	"time"

	"github.com/panjf2000/gnet/v2"

	"coregate/admin/spec"
	"coregate/tlsconf"
	"coregate/tlsrec"
	"coregate/worker/shm"
)

// tlsConn is the TLS layer of a client connection accepted on a TLS
// listener: the handshake, run by crypto/tls on a goroutine of its own
// (handshake) while the loop owns the socket, then the records, protected
// and unprotected on the loop (recordStream), which are the connection's
// connIO once the handshake is done. Owned by the loop.
type tlsConn struct {
	recordStream
	cc *clientConn
	hs *handshake // the handshake in progress, nil once done
	// state is the handshake's result, for the TLS variables.
	state tls.ConnectionState
	// table is the certificates the handshake was served from (the
	// snapshot's at its start), entry the object it served (nil when
	// none), sni the name it was served for (fallback_sni when the
	// client sent none), verify $ssl_client_verify.
	table  *tlsconf.Table
	entry  *tlsconf.Entry
	sni    string
	verify string
	// vars holds the TLS variables read on the connection, computed once
	// (they do not change within it): names[i]'s value is
	// varBuf[varEnd[i-1]:varEnd[i]].
	names  []string
	varEnd []int
	varBuf []byte
}

// reset readies t for a new connection of cc.
func (t *tlsConn) reset(cc *clientConn) {
	t.recordStream.reset(cc.w, cc.c)
	t.cc = cc
	t.hs = nil
	t.state = tls.ConnectionState{}
	t.table, t.entry, t.sni, t.verify = nil, nil, "", ""
	t.names, t.varEnd, t.varBuf = t.names[:0], t.varEnd[:0], t.varBuf[:0]
}

// httpsOn is $https on a TLS connection.
var httpsOn = []byte("on")

// tlsVar is the value of a TLS variable (httpvar.TLS) on the connection:
// unset on a plain one, or before its handshake is done. The value is
// computed at its first read and kept for the connection's life: a
// request reads it without allocating.
func (cc *clientConn) tlsVar(name string) ([]byte, bool) {
	t := cc.tls
	if t == nil || t.rec == nil {
		return nil, false
	}
	if name == "https" {
		return httpsOn, true
	}
	start := 0
	for i, n := range t.names {
		if n == name {
			return t.varBuf[start:t.varEnd[i]], true
		}
		start = t.varEnd[i]
	}
	var v []byte
	var ok bool
	if name == "ssl_client_verify" {
		v, ok = append(t.varBuf, t.verify...), true
	} else {
		v, ok = tlsconf.Var(name, &t.state, t.varBuf)
	}
	if !ok {
		return nil, false
	}
	t.varBuf = v
	t.names = append(t.names, name)
	t.varEnd = append(t.varEnd, len(v))
	return v[start:], true
}

// checkClient is APISIX's request-time mTLS check (tlsconf's
// CheckClient) of the request started: 0 when it goes on, else the
// status to answer.
func (cc *clientConn) checkClient() int {
	t := cc.tls
	if t == nil || t.table == nil || !t.table.VerifiesClients() {
		return 0
	}
	return t.table.CheckClient(t.entry, t.verify, t.sni, cc.host, cc.curPath)
}

// handshake is one client handshake in progress: crypto/tls's server
// side, over the pipe. Its tasks find their connection through the
// tlsConn, whose hs must still be this handshake.
type handshake struct {
	pipe
	t     *tlsConn
	table *tlsconf.Table
	// What the goroutine learns after the handshake, for done: the
	// connection's state, the object served and the name it was served
	// for, and $ssl_client_verify (a chain verified off the loop).
	state  tls.ConnectionState
	entry  *tlsconf.Entry
	sni    string
	verify string
	// started: the goroutine runs (it starts at the client's first
	// record, so that a connection that sends nothing costs none).
	started bool
}

// startTLS makes cc a TLS connection waiting for the client's hello.
func (cc *clientConn) startTLS() {
	if cc.tls == nil {
		cc.tls = new(tlsConn)
	}
	t := cc.tls
	t.reset(cc)
	hs := &handshake{t: t}
	hs.init(cc.w.loop, cc.c, func() bool { return t.hs == hs && !cc.closed })
	t.hs = hs
	cc.io = t
}

// tlsTraffic runs first at each traffic call of a TLS connection: during
// the handshake it feeds the handshake and the request code does not run
// (ok false, act the traffic call's answer); after it, it decrypts what
// arrived for the request code to read.
func (cc *clientConn) tlsTraffic() (act gnet.Action, ok bool) {
	t := cc.tls
	if hs := t.hs; hs != nil {
		return hs.feedServer(), false
	}
	t.fill()
	return gnet.None, true
}

// feedServer feeds the handshake, which starts at the first record.
func (hs *handshake) feedServer() gnet.Action {
	if hs.feed() {
		return gnet.Close // not TLS: nothing to answer in
	}
	if !hs.started && len(hs.hc.Rest()) > 0 {
		hs.started = true
		snap := hs.t.cc.w.snap.Load()
		if snap == nil || snap.certs == nil {
			return gnet.Close // no configuration yet
		}
		hs.table = snap.certs
		hs.tc = tls.Server(hs.hc, hs.table.Config(&hs.sec))
		hs.t.cc.w.goHandshake(func() { hs.run(hs.learn, hs.done) })
	}
	return gnet.None
}

// learn runs on the handshake's goroutine once it succeeded: what done
// installs on the connection.
func (hs *handshake) learn(err error) {
	if err != nil {
		return
	}
	hs.state = hs.tc.ConnectionState()
	hs.sni, hs.entry = hs.table.Served(hs.state.ServerName)
	hs.verify = hs.entry.Verify(&hs.state)
}

// abortServer ends a handshake whose connection closed.
func (hs *handshake) abortServer() {
	hs.t.hs = nil
	hs.abort()
}

// done runs on the loop when the handshake ended: the record layer takes
// over, with the client's records that came after its Finished, and
// requests that came with them are read.
func (hs *handshake) done(err error) {
	t := hs.t
	if t.hs != hs {
		return // the connection closed meanwhile
	}
	cc := t.cc
	t.hs = nil
	var rec *tlsrec.Conn
	if err == nil {
		t.state, t.table, t.entry, t.sni, t.verify = hs.state, hs.table, hs.entry, hs.sni, hs.verify
		rec, err = tlsrec.New(&t.state, false, &hs.sec)
	}
	if err == nil {
		_ = t.start(rec, hs.hc.Rest())
	}
	if err != nil {
		cc.w.closeConn(cc.c)
		return
	}
	cc.guard.enter()
	cc.traffic0()
	if cc.guard.leave() || t.ended() {
		cc.w.closeConn(cc.c)
	}
}

// ticketKeys are the session ticket keys the worker's tables seal and
// open tickets with: the node's (Config.TicketKeys), which every worker
// shares, else keys of the worker's own, made once. Either way the same
// from one configuration to the next, so that a session resumes across
// a change of ssls. It runs off the loop (buildCerts), and allocates.
func (w *Worker) ticketKeys() [][32]byte {
	if t := w.cfg.TicketKeys; t != nil {
		if keys, _, ok := t.Load(make([][32]byte, 0, shm.TicketKeyCount)); ok {
			return keys
		}
	}
	w.ticketOnce.Do(func() {
		var k [32]byte
		if _, err := rand.Read(k[:]); err == nil {
			w.tickets = [][32]byte{k}
		}
	})
	return w.tickets
}

// rotateTickets runs on the loop's tick: when the supervisor rotated the
// node's ticket keys (their generation moved), the table the handshakes
// take now seals with the new first key. A table built afterwards reads
// them itself (ticketKeys).
func (w *Worker) rotateTickets() {
	t := w.cfg.TicketKeys
	if t == nil || t.Gen() == w.ticketGen {
		return
	}
	keys, gen, ok := t.Load(w.ticketBuf[:0])
	if !ok {
		return // a writer died mid-write: the previous keys stay
	}
	w.ticketBuf, w.ticketGen = keys, gen
	if snap := w.snap.Load(); snap != nil && snap.certs != nil {
		snap.certs.SetTicketKeys(keys)
	}
}

// buildCerts gives snap the certificate table of ssls for the TLS
// listeners: the previous snapshot's when the objects are the same (a
// change elsewhere in the configuration), else a new one (tlsconf.Build;
// an object that cannot be served is logged and left out). A handshake
// takes the table of the snapshot current at its first record; the
// connections made with an older one keep it. Objects holding $env:// or
// $secret:// references are read (resolveSSLs) at every build, so that
// a changed secret is served once its cache time is over.
func (w *Worker) buildCerts(snap *Snapshot, ssls []*spec.SSL) {
	if len(w.cfg.TLSListen) == 0 {
		return
	}
	refs := sslHasRefs(ssls)
	if prev := w.snap.Load(); prev != nil && prev.certs != nil && !refs && reflect.DeepEqual(prev.ssls, ssls) {
		snap.certs, snap.ssls = prev.certs, prev.ssls
		return
	}
	served, errs := ssls, []error(nil)
	if refs {
		served, errs = resolveSSLs(ssls, snap.reg)
	}
	t, berrs := tlsconf.Build(served, w.cfg.TLS, w.cfg.Decrypt)
	for _, err := range append(errs, berrs...) {
		w.log.Error("configuration: ssl left out", "err", err)
	}
	t.SetTicketKeys(w.ticketKeys())
	snap.certs, snap.ssls = t, ssls
}

// handshakeIdle is how long a handshake goroutine that finished waits for
// the next handshake before it ends.
const handshakeIdle = 10 * time.Second

// goHandshake runs fn, a handshake's goroutine body, on a goroutine that
// waits for work (Worker.handshakes) or a new one. The goroutines that
// ran handshakes keep their stacks, grown by crypto/tls to what a
// handshake takes, for the next: a new goroutine's stack grows by copying
// at each handshake, and its start and end go through the scheduler
// (measured: 6 % of a full handshake's CPU). As many run at once as
// handshakes are in progress; they end after handshakeIdle without one.
// It runs on the loop, and does not block.
func (w *Worker) goHandshake(fn func()) {
	select {
	case w.handshakes <- fn:
	default:
		go w.handshaker(fn)
	}
}

// handshaker runs handshakes until none comes for handshakeIdle.
func (w *Worker) handshaker(fn func()) {
	idle := time.NewTimer(handshakeIdle)
	defer idle.Stop()
	for {
		fn()
		idle.Reset(handshakeIdle)
		select {
		case fn = <-w.handshakes:
		case <-idle.C:
			return
		}
	}
}
