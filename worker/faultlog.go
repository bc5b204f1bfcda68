package worker

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"time"

	"coregate/httpparse"
)

// The error log of failed upstream exchanges, in nginx's words: what went
// wrong, while doing what, with the upstream, the route, the client and the
// request. Nothing here runs for an exchange that succeeds: a failure is
// recorded on the upstream connection (upConn.fault) where it is seen, and
// logged where the exchange ends. The log is rate-limited per worker, so that
// a failing upstream under load cannot flood it: at most faultLogPerSecond
// lines a second, the rest counted and reported once a second.

// upFault is why an exchange with an upstream failed.
type upFault uint8

const (
	faultNone      upFault = iota
	faultConnect           // the connect failed or timed out (uc.err)
	faultClosed            // the upstream closed the connection too early
	faultIOError           // a read or write failed, a reset mostly (uc.err)
	faultTimeout           // timeout.send or timeout.read passed
	faultBadHead           // a response head that does not parse (uc.err)
	faultBigHead           // a response head over the limits
	faultSwitching         // 101 to a request that asked for no upgrade
	faultBadChunk          // a chunked body that breaks the grammar (uc.err)
	faultExtraData         // bytes after the end of the response
	faultStopped           // the worker's stop closed the connection mid-exchange
	faultCoding            // a transfer coding other than chunked to an HTTP/1.0 request
	faultHandshake         // the TLS handshake with an https node failed (uc.err)
	faultSlowTLS           // the TLS handshake took longer than timeout.connect
)

// faultText is each fault in nginx's words, without where it happened.
var faultText = [...]string{
	faultNone:      "upstream failed",
	faultConnect:   "connect() failed",
	faultClosed:    "upstream prematurely closed connection",
	faultIOError:   "upstream connection failed",
	faultTimeout:   "upstream timed out",
	faultBadHead:   "upstream sent invalid header",
	faultBigHead:   "upstream sent too big header",
	faultSwitching: "upstream sent 101 to a request without upgrade",
	faultBadChunk:  "upstream sent invalid chunked response",
	faultExtraData: `upstream sent more data than specified in "Content-Length" header`,
	faultStopped:   "worker stopped before the upstream answered in full",
	faultCoding:    `upstream sent unknown "Transfer-Encoding" to an HTTP/1.0 request`,
	faultHandshake: "SSL_do_handshake() failed",
	faultSlowTLS:   "upstream timed out",
}

// faultLogPerSecond bounds the upstream error lines a worker writes in a
// second.
const faultLogPerSecond = 20

// faultLog is the rate limiter's state, owned by the event loop.
type faultLog struct {
	windowStart int64 // Worker.now when the current one-second window began
	lines       int   // lines written in the window
	suppressed  int   // lines left out since the last report
}

// setFault records why the exchange on uc failed, unless a cause is
// recorded already (the first one seen is the cause; what follows, such as
// the close after a reset, is its consequence).
func (uc *upConn) setFault(f upFault, err error) {
	if uc.fault == faultNone {
		uc.fault, uc.err = f, err
	}
}

// closeFault records the cause of a close gnet reports with err: the
// upstream's FIN (io.EOF), a failed read or write, or (nil, the worker's
// own close) the engine's stop at the end of a drain, whose deadline
// passed with the exchange still in progress.
func (uc *upConn) closeFault(err error) {
	switch {
	case err == nil && uc.w.stopping:
		uc.setFault(faultStopped, nil)
	case err == nil || errors.Is(err, io.EOF):
		uc.setFault(faultClosed, nil)
	default:
		uc.setFault(faultIOError, err)
	}
}

// headFault records a response head that failed to parse.
func (uc *upConn) headFault(err error) {
	if errors.Is(err, httpparse.ErrHeadersTooLarge) {
		uc.setFault(faultBigHead, err)
		return
	}
	uc.setFault(faultBadHead, err)
}

// logFault writes the error log line of the failed exchange of cc on uc.
// status is what the client was answered, 0 when its response was cut
// short (or, for faultExtraData, delivered whole).
func (w *Worker) logFault(uc *upConn, cc *clientConn, status int) {
	if !w.faultAllowed() {
		return
	}
	f := uc.fault
	msg := faultText[f] + " while " + faultWhile(uc, cc)
	attrs := make([]slog.Attr, 0, 8)
	if uc.err != nil {
		attrs = append(attrs, slog.String("err", uc.err.Error()))
	}
	attrs = append(attrs, slog.String("upstream", uc.pool.addr))
	if cc.rt != nil {
		attrs = append(attrs, slog.String("route", cc.rt.id()))
	}
	attrs = append(attrs, slog.String("client", string(cc.remoteAddr())))
	// The client's request line, as nginx's request: "...", not the one
	// sent upstream.
	if len(cc.reqLine) > 0 {
		attrs = append(attrs, slog.String("request", string(cc.reqLine)))
	} else if cc.lineEnd > 0 && cc.lineEnd <= len(cc.head) {
		attrs = append(attrs, slog.String("request", string(bytes.TrimRight(cc.head[:cc.lineEnd], "\r\n"))))
	}
	if status != 0 {
		attrs = append(attrs, slog.Int("status", status))
	} else if f != faultExtraData {
		attrs = append(attrs, slog.Bool("truncated", true))
	}
	level := slog.LevelError
	if f == faultExtraData {
		level = slog.LevelWarn
	}
	w.log.LogAttrs(context.Background(), level, msg, attrs...)
}

// faultWhile says what the exchange was doing when it failed.
func faultWhile(uc *upConn, cc *clientConn) string {
	switch {
	case uc.fault == faultConnect:
		return "connecting to upstream"
	case uc.fault == faultHandshake, uc.fault == faultSlowTLS:
		return "SSL handshaking to upstream"
	case uc.phase == rpBody:
		return "reading upstream"
	case !cc.reqDone && !uc.gotBytes:
		return "sending request to upstream"
	}
	return "reading response header from upstream"
}

// faultAllowed reports whether one more upstream error line may be written
// now, and counts it (or the one left out).
func (w *Worker) faultAllowed() bool {
	fl := &w.faultLog
	if w.now-fl.windowStart >= int64(time.Second) {
		w.reportSuppressed()
		fl.windowStart = w.now
		fl.lines = 0
	}
	if fl.lines >= faultLogPerSecond {
		fl.suppressed++
		return false
	}
	fl.lines++
	return true
}

// reportSuppressed logs how many upstream error lines were left out, if
// any; the tick calls it once the window that left them out is over.
func (w *Worker) reportSuppressed() {
	fl := &w.faultLog
	if fl.suppressed == 0 {
		return
	}
	w.log.Warn("upstream errors not logged: more than the log takes in a second",
		"suppressed", fl.suppressed, "limit", faultLogPerSecond)
	fl.suppressed = 0
}

// tickFaultLog reports left-out lines once their window is over.
func (w *Worker) tickFaultLog() {
	if fl := &w.faultLog; fl.suppressed > 0 && w.now-fl.windowStart >= int64(time.Second) {
		w.reportSuppressed()
		fl.windowStart = w.now
		fl.lines = 0
	}
}
