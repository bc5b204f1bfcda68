package worker

import (
	"bytes"
	"encoding/base64"
	"math/rand/v2"
	"os"
	"strconv"

	"coregate/httpparse"
	"coregate/httpvar"
	"coregate/worker/accesslog"
)

// The access log (nginx_config.http.enable_access_log). When it is on,
// every exchange that start began (logOn) ends with one line, rendered on
// the loop by accessLog beside the log phase (requestDone, closedByPeer)
// from the compiled format's parts into the Log's buffer, with no
// allocation; the Log's writer goroutine writes the buffers to the file.
// The request head is kept for it as for a late plugin phase (keepHead),
// so that the request's variables are still there when the exchange ends.

// accessLogger is a worker's access log, owned by its loop.
type accessLogger struct {
	log   *accesslog.Log
	parts []accesslog.Part
	esc   accesslog.Escape
	clock accesslog.Clock
	rng   rand.PCG // request ids
	pid   []byte
	// val is a value rendered before it is escaped (numbers, the
	// decoded user), valid until the next part.
	val []byte
}

func newAccessLogger(l *accesslog.Log, f *accesslog.Format) *accessLogger {
	if l == nil || f == nil {
		return nil
	}
	a := &accessLogger{log: l, parts: f.Parts, esc: f.Escape}
	a.rng.Seed(rand.Uint64(), rand.Uint64())
	a.pid = strconv.AppendInt(nil, int64(os.Getpid()), 10)
	a.val = make([]byte, 0, 128)
	return a
}

// accessLog writes the access log's line for the exchange ending now, once.
func (cc *clientConn) accessLog() {
	a := cc.w.alog
	if a == nil || !cc.logOn {
		return
	}
	cc.logOn = false
	b := a.log.Line()
	for i := range a.parts {
		b = cc.appendPart(a, b, &a.parts[i])
	}
	a.log.Commit(b)
}

// appendPart appends one part of the format: the log's own variables
// here, the request's and the exchange's as route vars and plugins read
// them (varValue).
func (cc *clientConn) appendPart(a *accessLogger, b []byte, p *accesslog.Part) []byte {
	w := cc.w
	r := &cc.req
	esc := a.esc
	val := func(v []byte) []byte { return accesslog.AppendValue(b, v, esc) }
	opt := func(v []byte) []byte {
		if v == nil {
			return accesslog.AppendUnset(b, esc)
		}
		return accesslog.AppendValue(b, v, esc)
	}
	num := func(n int64) []byte { return strconv.AppendInt(b, n, 10) }
	if p.Kind == accesslog.Literal {
		return append(b, p.Text...)
	}
	if !p.Kind.LogOnly() {
		if v, ok := cc.varValue(&httpvar.Var{Kind: p.Kind, Name: p.Name}); ok {
			return val(v)
		}
		return accesslog.AppendUnset(b, esc)
	}
	switch p.Kind {
	case httpvar.RemoteUser:
		return opt(cc.basicUser(a))
	case httpvar.TimeLocal:
		return a.clock.AppendTimeLocal(b, w.epochUnix+w.now)
	case httpvar.TimeISO8601:
		return a.clock.AppendISO8601(b, w.epochUnix+w.now)
	case httpvar.Msec:
		return accesslog.AppendMillis(b, w.epochUnix+w.now)
	case httpvar.Request:
		if r.Method == nil {
			return accesslog.AppendUnset(b, esc)
		}
		b = accesslog.AppendValue(b, r.Method, esc)
		b = append(b, ' ')
		b = accesslog.AppendValue(b, r.Target, esc)
		return appendProto(append(b, ' '), r.Major, r.Minor)
	case httpvar.ServerProtocol:
		if r.Method == nil {
			return accesslog.AppendUnset(b, esc)
		}
		return appendProto(b, r.Major, r.Minor)
	case httpvar.Status:
		if cc.respStatus == 0 {
			// No answer was begun: nginx logs 499 for a client that
			// left first.
			return append(b, "499"...)
		}
		return num(int64(cc.respStatus))
	case httpvar.BodyBytesSent:
		return num(max(cc.sent-int64(cc.respHead), 0))
	case httpvar.BytesSent:
		return num(cc.sent)
	case httpvar.RequestLength:
		n := int64(r.HeadLen)
		if cc.reqBody == bodyLength {
			n += r.ContentLength - cc.reqLeft
		} else {
			n += cc.bodyBytes
		}
		return num(n)
	case httpvar.RequestTime:
		return accesslog.AppendMillis(b, w.now-cc.started)
	case httpvar.UpstreamStatus:
		// As nginx's: one entry for each attempt, as $upstream_addr
		// lists them; "-" for the last one while it has no status.
		if len(cc.statuses) == 0 && cc.upStatus == 0 {
			return accesslog.AppendUnset(b, esc)
		}
		for i, s := range cc.statuses {
			if i > 0 {
				b = append(b, ", "...)
			}
			b = strconv.AppendInt(b, int64(s), 10)
		}
		if cc.upStatus != 0 || !cc.attemptsListed() {
			if len(cc.statuses) > 0 {
				b = append(b, ", "...)
			}
			if cc.upStatus == 0 {
				return append(b, '-')
			}
			b = strconv.AppendInt(b, int64(cc.upStatus), 10)
		}
		return b
	case httpvar.UpstreamResponseTime:
		if cc.tries == 0 {
			return accesslog.AppendUnset(b, esc)
		}
		return accesslog.AppendMillis(b, w.now-cc.upStart)
	case httpvar.UpstreamConnectTime:
		if cc.tries == 0 || cc.upConnected == 0 {
			return accesslog.AppendUnset(b, esc)
		}
		return accesslog.AppendMillis(b, cc.upConnected-cc.upStart)
	case httpvar.UpstreamScheme:
		if cc.rt != nil && cc.rt.up != nil && cc.rt.up.tls != nil {
			return append(b, "https"...)
		}
		return append(b, "http"...)
	case httpvar.UpstreamHost:
		// hostLine is this exchange's once an attempt was sent (its
		// connection ready), else a past exchange's.
		if h := cc.hostLine; cc.tries > 0 && cc.upConnected != 0 && len(h) > len("Host: \r\n") {
			return val(h[len("Host: ") : len(h)-2])
		}
		return opt(httpHeader(r, "host"))
	case httpvar.UpstreamURI:
		if cc.tries > 0 && cc.lineEnd > 0 && cc.lineEnd <= len(cc.head) {
			line := cc.head[:cc.lineEnd]
			if i := bytes.IndexByte(line, ' '); i >= 0 {
				line = line[i+1:]
				if j := bytes.IndexByte(line, ' '); j >= 0 {
					return val(line[:j])
				}
			}
		}
		return b // APISIX's $upstream_uri is '' until the proxy sets it
	case httpvar.RequestID:
		x, y := a.rng.Uint64(), a.rng.Uint64()
		b = appendHex64(b, x)
		return appendHex64(b, y)
	case httpvar.Pid:
		return append(b, a.pid...)
	case httpvar.SentHTTP:
		for i := range cc.respHdr {
			if h := &cc.respHdr[i]; httpvar.HeaderIs(h.name, p.Name) {
				return val(h.value)
			}
		}
		return accesslog.AppendUnset(b, esc)
	}
	return accesslog.AppendUnset(b, esc)
}

// httpHeader returns the value of the request's first header field named
// lower (lower-case), or nil.
func httpHeader(r *httpparse.Request, lower string) []byte {
	for i := range r.Headers {
		h := &r.Headers[i]
		if len(h.Name) == len(lower) && headerNameEq(h.Name, lower) {
			if h.Value == nil {
				return []byte{}
			}
			return h.Value
		}
	}
	return nil
}

// basicUser is the user name of the request's Basic authorization, decoded
// into a.val, or nil.
func (cc *clientConn) basicUser(a *accessLogger) []byte {
	v := httpHeader(&cc.req, "authorization")
	const basic = "basic "
	if len(v) <= len(basic) || !headerNameEq(v[:len(basic)], basic) {
		return nil
	}
	v = bytes.TrimLeft(v[len(basic):], " ")
	n := base64.StdEncoding.DecodedLen(len(v))
	if n > cap(a.val) {
		return nil
	}
	d := a.val[:n]
	m, err := base64.StdEncoding.Decode(d, v)
	if err != nil {
		return nil
	}
	d = d[:m]
	if i := bytes.IndexByte(d, ':'); i >= 0 {
		d = d[:i]
	}
	if len(d) == 0 {
		return nil
	}
	return d
}

func appendProto(b []byte, major, minor uint8) []byte {
	b = append(b, "HTTP/"...)
	b = strconv.AppendInt(b, int64(major), 10)
	b = append(b, '.')
	return strconv.AppendInt(b, int64(minor), 10)
}

func appendHex64(b []byte, x uint64) []byte {
	const digits = "0123456789abcdef"
	for shift := 60; shift >= 0; shift -= 4 {
		b = append(b, digits[(x>>uint(shift))&15])
	}
	return b
}
