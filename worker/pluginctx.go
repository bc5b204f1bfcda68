package worker

import (
	"bytes"
	"net/netip"
	"strconv"
	"time"

	"coregate/httpvar"
	"coregate/plugins"
)

// pluginCtx is a client connection's exchange as the plugins see it: the
// worker's plugins.Ctx. It is the clientConn itself under another method
// set (as reqVars), so that handing it to a phase allocates nothing, and
// what it records goes into the exchange (pluginState, exchangeBufs), reset
// with it.
//
// What it returns aliases the request: gnet's inbound buffer while the
// request phases run (the head is still there), the exchange's copy of the
// head (exchangeBufs.headCopy, see keepHead) in header_filter and log.
// Either way it is valid for the phase call, as plugins.Ctx promises.
type pluginCtx clientConn

var _ plugins.Ctx = (*pluginCtx)(nil)

func (x *pluginCtx) cc() *clientConn { return (*clientConn)(x) }

// RequestBody implements plugins.Ctx: the body read before the phases
// (readbody.go), or the copy made as it goes upstream (teebody.go), valid
// until the exchange ends.
func (x *pluginCtx) RequestBody() []byte {
	if (!x.plugin.bodyRead && x.teeMax == 0) || len(x.reqBodyBuf) == 0 {
		return nil
	}
	return x.reqBodyBuf
}

// RequestBodyWhole implements plugins.Ctx.
func (x *pluginCtx) RequestBodyWhole() bool {
	switch {
	case x.reqBody == bodyNone, x.plugin.bodyRead:
		return true
	case x.teeMax > 0:
		return x.teeEnd && !x.teeCut
	}
	return false
}

// Method implements plugins.Ctx.
func (x *pluginCtx) Method() []byte { return x.req.Method }

// Path implements plugins.Ctx: the path as sent, without the query.
func (x *pluginCtx) Path() []byte { return x.req.Path }

// Query implements plugins.Ctx.
func (x *pluginCtx) Query() []byte { return x.req.Query }

// Header implements plugins.Ctx.
func (x *pluginCtx) Header(name string) []byte {
	hs := x.req.Headers
	for i := range hs {
		if eqFold(hs[i].Name, name) {
			return hs[i].Value
		}
	}
	return nil
}

// HeaderAt implements plugins.Ctx.
func (x *pluginCtx) HeaderAt(name string, i int) ([]byte, bool) {
	hs := x.req.Headers
	for j := range hs {
		if eqFold(hs[j].Name, name) {
			if i == 0 {
				return hs[j].Value, true
			}
			i--
		}
	}
	return nil, false
}

// SetClientAddr implements plugins.Ctx: the address's text goes into
// the exchange's buffers, read by remoteAddr and remotePort.
func (x *pluginCtx) SetClientAddr(ip netip.Addr, port uint16) {
	cc := x.cc()
	if !ip.IsValid() || cc.plugin.phase > plugins.BeforeProxy {
		return
	}
	if port == 0 {
		cc.realPort = append(cc.realPort[:0], cc.remotePort()...)
	} else {
		cc.realPort = strconv.AppendUint(cc.realPort[:0], uint64(port), 10)
	}
	cc.realIP = ip.Unmap().AppendTo(cc.realIP[:0])
	cc.plugin.realAddr = true
}

// RequestHeaderAt implements plugins.Ctx over the parsed request's
// fields.
func (x *pluginCtx) RequestHeaderAt(i int) (name, value []byte, ok bool) {
	hs := x.req.Headers
	if i < 0 || i >= len(hs) {
		return nil, nil, false
	}
	return hs[i].Name, hs[i].Value, true
}

// Var implements plugins.Ctx: varValue, which the route vars and the
// access log read too.
func (x *pluginCtx) Var(v httpvar.Var) []byte {
	val, _ := x.cc().varValue(&v)
	return val
}

// matchedURI returns the first of the uri patterns uris that path
// matches, as the router matches them: exactly, or by prefix for one
// ending in '*'; nil when none matches. The result is the route's
// pattern (a view of its string), which lives as long as its snapshot.
func matchedURI(uris []string, path []byte) []byte {
	for _, p := range uris {
		switch {
		case p == "":
		case p[len(p)-1] == '*':
			if len(path) >= len(p)-1 && string(path[:len(p)-1]) == p[:len(p)-1] {
				return viewBytes(p)
			}
		case string(path) == p:
			return viewBytes(p)
		}
	}
	return nil
}

// matchedHost returns the first of the host patterns hosts that host
// matches, as the router matches them: exactly, or by suffix for one
// starting with '*'; nil when none matches. The result is the route's
// pattern, which lives as long as its snapshot.
func matchedHost(hosts [][]byte, host []byte) []byte {
	for _, p := range hosts {
		switch {
		case p[0] == '*':
			if len(host) >= len(p)-1 && bytes.Equal(host[len(host)-len(p)+1:], p[1:]) {
				return p
			}
		case bytes.Equal(host, p):
			return p
		}
	}
	return nil
}

// Exchange implements plugins.Ctx, from the exchange's clocks and
// counts (the loop's coarse clock: as of its last wake-up).
func (x *pluginCtx) Exchange() plugins.Exchange {
	cc := x.cc()
	if cc.plugin.phase != plugins.Log {
		return plugins.Exchange{}
	}
	now := cc.w.now
	e := plugins.Exchange{
		RequestTime: time.Duration(now - cc.started),
		Proxied:     cc.proxied,
		Upstreamed:  cc.upAnswered,
		BytesSent:   cc.sent,
	}
	if cc.proxied {
		e.UpstreamTime = time.Duration(now - cc.upStart)
	}
	e.RequestLength = int64(cc.req.HeadLen)
	switch cc.reqBody {
	case bodyLength:
		e.RequestLength += cc.req.ContentLength - cc.reqLeft
	case bodyChunked:
		e.RequestLength += cc.bodyBytes
	}
	return e
}

// RouteID implements plugins.Ctx.
func (x *pluginCtx) RouteID() string {
	if x.rt == nil {
		return ""
	}
	return x.rt.id()
}

// Now implements plugins.Ctx: the loop's coarse clock in Unix nanoseconds.
func (x *pluginCtx) Now() int64 { return x.w.epochUnix + x.w.now }

// Exit implements plugins.Ctx. It counts in the request phases only; the
// body is copied into exchangeBufs.exitBody. A status that cannot end a
// request (below 200: an interim answer, after which the client would
// take the next answer on the connection for this one's) is 500.
func (x *pluginCtx) Exit(status int, body []byte) {
	cc := x.cc()
	if cc.plugin.phase > plugins.BeforeProxy || cc.plugin.exited {
		return
	}
	if status < 200 || status > 999 {
		status = 500
	}
	cc.plugin.exited = true
	cc.plugin.exitStatus = status
	cc.plugin.exitPage = body == nil
	cc.exitBody = append(cc.exitBody[:0], body...)
}

// Exited implements plugins.Ctx.
func (x *pluginCtx) Exited() bool { return x.plugin.exited }

// ExitAfter implements plugins.Ctx: the exchange waits in csDelay, on the
// connection's deadline, and the answer leaves when it fires (expire).
func (x *pluginCtx) ExitAfter(d time.Duration, status int, body []byte) {
	cc := x.cc()
	if cc.plugin.phase > plugins.BeforeProxy || cc.plugin.exited {
		return
	}
	x.Exit(status, body)
	if d > 0 {
		cc.plugin.delay = d
	}
}

// Delay implements plugins.Ctx: the exchange waits in csDelay, on the
// connection's deadline, before it goes upstream (start) or its answer
// leaves (startPlugins).
func (x *pluginCtx) Delay(d time.Duration) {
	cc := x.cc()
	if cc.plugin.phase > plugins.BeforeProxy || cc.plugin.exited || d <= 0 {
		return
	}
	cc.plugin.hold += d
}

// SetResponseHeader implements plugins.Ctx: the header goes into the head
// the worker writes, replacing any of that name the upstream sent.
// Framing and hop-by-hop names are the worker's and ignored.
func (x *pluginCtx) SetResponseHeader(name string, value []byte) {
	cc := x.cc()
	if cc.plugin.filtered && cc.plugin.phase != plugins.HeaderFilter || workerOwnedResponse(name) || !fieldOK(name, value) {
		return
	}
	k, found := 0, false
	for i := range cc.respHdr {
		h := &cc.respHdr[i]
		if !eqFoldStr(h.name, name) {
			// Compact by swapping, so that each slot keeps a value
			// buffer of its own.
			cc.respHdr[k], cc.respHdr[i] = cc.respHdr[i], cc.respHdr[k]
			k++
			continue
		}
		if !found {
			found = true
			h.value = append(h.value[:0], value...)
			h.add, h.remove = false, false
			cc.respHdr[k], cc.respHdr[i] = cc.respHdr[i], cc.respHdr[k]
			k++
		}
	}
	cc.respHdr = cc.respHdr[:k]
	if !found {
		cc.addRespHdr(name, value, false)
	}
}

// AddResponseHeader implements plugins.Ctx: the field goes into the head
// after the upstream's of that name, which stay. Framing and hop-by-hop
// names are the worker's and ignored.
func (x *pluginCtx) AddResponseHeader(name string, value []byte) {
	cc := x.cc()
	if cc.plugin.filtered && cc.plugin.phase != plugins.HeaderFilter || workerOwnedResponse(name) || !fieldOK(name, value) {
		return
	}
	cc.addRespHdr(name, value, true)
}

// addRespHdr appends a response header edit, reusing the buffer of the
// slot past the end.
func (cc *clientConn) addRespHdr(name string, value []byte, add bool) {
	n := len(cc.respHdr)
	if n < cap(cc.respHdr) {
		cc.respHdr = cc.respHdr[:n+1]
	} else {
		cc.respHdr = append(cc.respHdr, headerEdit{})
	}
	h := &cc.respHdr[n]
	h.name = name
	h.value = append(h.value[:0], value...)
	h.add, h.remove = add, false
}

// RemoveResponseHeader implements plugins.Ctx: the edits of that name go,
// and one that removes takes their place, so that the upstream's fields
// and the worker's Date or Server are left out of the head. Content-Length,
// which a plugin removes when it changes the body, is left out only of a
// head no body follows (a HEAD's, a 304's: responseHead, localHead); where
// one does, the worker frames it. Content-Length, which every plugin that
// changes the body removes, is compared with once, not checked as a name
// and then as one of the worker's.
func (x *pluginCtx) RemoveResponseHeader(name string) {
	cc := x.cc()
	if cc.plugin.filtered && cc.plugin.phase != plugins.HeaderFilter ||
		!eqFoldStr("content-length", name) && (!fieldOK(name, nil) || workerOwnedResponse(name)) {
		return
	}
	k := 0
	for i := range cc.respHdr {
		if !eqFoldStr(cc.respHdr[i].name, name) {
			cc.respHdr[k], cc.respHdr[i] = cc.respHdr[i], cc.respHdr[k]
			k++
		}
	}
	cc.respHdr = cc.respHdr[:k]
	cc.addRespHdr(name, nil, false)
	cc.respHdr[k].remove = true
}

// Status implements plugins.Ctx.
func (x *pluginCtx) Status() int { return x.plugin.status }

// SetStatus implements plugins.Ctx: the status the head is written with
// once header_filter ends (headerFilter). Framing decides: a 1xx, 204 or
// 304 response, which has no body, keeps its status, and a response is
// not given 204 or 304, which would have to drop its body.
func (x *pluginCtx) SetStatus(status int) {
	p := &x.plugin
	if p.phase != plugins.HeaderFilter || p.filtered || status < 200 || status > 599 || status == 204 || status == 304 {
		return
	}
	if s := p.status; s < 200 || s == 204 || s == 304 {
		return
	}
	p.status = status
}

// ResponseHeader implements plugins.Ctx: a plugin's set field, else the
// upstream's (plugin.resp, during header_filter) unless a plugin removed
// them, else a plugin's added one. A field that is there with an empty
// value is an empty slice, not nil (present).
func (x *pluginCtx) ResponseHeader(name string) []byte {
	cc := x.cc()
	var added []byte
	removed := false
	for i := range cc.respHdr {
		if h := &cc.respHdr[i]; eqFoldStr(h.name, name) {
			if h.remove {
				removed = true
				continue
			}
			if !h.add {
				return present(h.value)
			}
			if added == nil {
				added = present(h.value)
			}
		}
	}
	if resp := cc.plugin.resp; resp != nil && !removed {
		for i := range resp.Headers {
			if h := &resp.Headers[i]; eqFold(h.Name, name) {
				return present(h.Value)
			}
		}
	}
	return added
}

// present is a field's value v, not nil where it is empty: ResponseHeader
// answers nil for a field that is absent only.
func present(v []byte) []byte {
	if v == nil {
		return noValue
	}
	return v
}

// SetUpstreamURI implements plugins.Ctx.
func (x *pluginCtx) SetUpstreamURI(uri []byte) {
	cc := x.cc()
	if cc.plugin.phase > plugins.BeforeProxy || len(uri) == 0 {
		return
	}
	cc.plugin.upURI = true
	cc.upURI = append(cc.upURI[:0], uri...)
}

// SetUpstreamMethod implements plugins.Ctx.
func (x *pluginCtx) SetUpstreamMethod(method []byte) {
	cc := x.cc()
	if cc.plugin.phase > plugins.BeforeProxy || len(method) == 0 {
		return
	}
	cc.plugin.upMethod = true
	cc.upMethod = append(cc.upMethod[:0], method...)
}

// SetUpstreamHost implements plugins.Ctx: the Host sent on every attempt,
// whatever the upstream's pass_host.
func (x *pluginCtx) SetUpstreamHost(host []byte) {
	cc := x.cc()
	if cc.plugin.phase > plugins.BeforeProxy || len(host) == 0 {
		return
	}
	cc.plugin.upHost = true
	cc.upHost = append(cc.upHost[:0], host...)
}

// SetUpstream implements plugins.Ctx: the route's variant for u
// (route.splits, made with the snapshot), taken when the request phases
// are done (routed). An upstream the route has no variant for (not built
// for its plugins) is ignored.
func (x *pluginCtx) SetUpstream(u plugins.Upstream) {
	cc := x.cc()
	if cc.plugin.phase > plugins.Access || cc.rt == nil {
		return
	}
	cu, _ := u.(*upstream)
	if cu == nil {
		cc.plugin.split = nil
		return
	}
	if v := cc.rt.about.splits[cu]; v != nil {
		cc.plugin.split = v
	}
}

// SetRequestHeader implements plugins.Ctx. The edits are kept in order,
// normalised: a set drops the edits of that name before it, so that
// buildHead drops the client's fields of a set name and appends the edits
// with a value.
func (x *pluginCtx) SetRequestHeader(name string, value []byte) {
	cc := x.cc()
	if cc.plugin.phase > plugins.BeforeProxy || workerOwnedRequest(name) || !fieldOK(name, value) {
		return
	}
	// Swapped rather than copied, so that every element keeps a value
	// buffer of its own.
	k := 0
	for i := range cc.reqEdits {
		if !eqFoldStr(cc.reqEdits[i].name, name) {
			cc.reqEdits[k], cc.reqEdits[i] = cc.reqEdits[i], cc.reqEdits[k]
			k++
		}
	}
	cc.reqEdits = cc.reqEdits[:k]
	x.addEdit(name, value, true)
}

// AddRequestHeader implements plugins.Ctx.
func (x *pluginCtx) AddRequestHeader(name string, value []byte) {
	cc := x.cc()
	if cc.plugin.phase > plugins.BeforeProxy || workerOwnedRequest(name) || value == nil || !fieldOK(name, value) {
		return
	}
	x.addEdit(name, value, false)
}

func (x *pluginCtx) addEdit(name string, value []byte, set bool) {
	cc := x.cc()
	n := len(cc.reqEdits)
	if n < cap(cc.reqEdits) {
		cc.reqEdits = cc.reqEdits[:n+1]
	} else {
		cc.reqEdits = append(cc.reqEdits, headerEdit{})
	}
	e := &cc.reqEdits[n]
	e.name, e.set, e.remove = name, set, value == nil
	e.value = append(e.value[:0], value...)
}

// keptValue is one value a plugin kept (Ctx.Keep).
type keptValue struct {
	owner any
	v     uint64
}

// Keep implements plugins.Ctx: the values live in exchangeBufs.kept, whose
// capacity grows up to plugins.MaxKept once and is reused.
func (x *pluginCtx) Keep(owner any, v uint64) bool {
	cc := x.cc()
	for i := range cc.kept {
		if cc.kept[i].owner == owner {
			cc.kept[i].v = v
			return true
		}
	}
	if len(cc.kept) >= plugins.MaxKept {
		return false
	}
	cc.kept = append(cc.kept, keptValue{owner, v})
	return true
}

// Kept implements plugins.Ctx.
func (x *pluginCtx) Kept(owner any) (uint64, bool) {
	cc := x.cc()
	for i := range cc.kept {
		if cc.kept[i].owner == owner {
			return cc.kept[i].v, true
		}
	}
	return 0, false
}

// Consumer implements plugins.Ctx.
func (x *pluginCtx) Consumer() *plugins.Consumer { return x.plugin.consumer }

// SetConsumer implements plugins.Ctx: from the end of the rewrite phase on,
// the request runs the route's plugins merged with c's (runRequestPhases).
func (x *pluginCtx) SetConsumer(c *plugins.Consumer) {
	cc := x.cc()
	if cc.plugin.phase > plugins.BeforeProxy {
		return
	}
	cc.plugin.consumer = c
	if c != nil {
		cc.consumerName = append(cc.consumerName[:0], c.Username...)
	}
}

// headerEdit is one header a plugin set: a response header
// (SetResponseHeader) or an edit of the upstream request's
// (SetRequestHeader, AddRequestHeader). name is the plugin's string, kept
// as given; value is the edit's own buffer, whose capacity is reused.
type headerEdit struct {
	name   string
	value  []byte
	set    bool // replaces the client's fields of that name
	remove bool // a set with no value: the fields go, nothing is added
	add    bool // a response field added: the upstream's of that name stay
}

// fieldOK reports whether a header field can be written as given: a
// non-empty name without separators or controls, a value without CR, LF or
// NUL (a value from a $var could otherwise add a field of its own).
func fieldOK(name string, value []byte) bool {
	if name == "" {
		return false
	}
	for i := 0; i < len(name); i++ {
		if c := name[i]; c <= ' ' || c == ':' || c >= 0x7f {
			return false
		}
	}
	for _, c := range value {
		if c == '\r' || c == '\n' || c == 0 {
			return false
		}
	}
	return true
}

// workerOwnedRequest reports the request headers the worker writes itself
// (framing, hop-by-hop, Host, and the X-Forwarded-* and X-Real-IP fields
// of buildHead): a plugin's edit of one is ignored.
func workerOwnedRequest(name string) bool {
	switch len(name) {
	case 2:
		return eqFoldStr("te", name)
	case 4:
		return eqFoldStr("host", name)
	case 6:
		return eqFoldStr("expect", name)
	case 7:
		return eqFoldStr("trailer", name) || eqFoldStr("upgrade", name)
	case 9:
		return eqFoldStr("x-real-ip", name)
	case 10:
		return eqFoldStr("connection", name) || eqFoldStr("keep-alive", name)
	}
	return workerOwnedCommon(name) ||
		eqFoldStr("x-forwarded-for", name) || eqFoldStr("x-forwarded-proto", name) ||
		eqFoldStr("x-forwarded-host", name) || eqFoldStr("x-forwarded-port", name)
}

// workerOwnedResponse reports the response headers whose value is the
// worker's (framing and hop-by-hop): a plugin's SetResponseHeader of one
// is ignored.
func workerOwnedResponse(name string) bool {
	switch len(name) {
	case 2:
		return eqFoldStr("te", name)
	case 7:
		return eqFoldStr("trailer", name) || eqFoldStr("upgrade", name)
	case 10:
		return eqFoldStr("connection", name) || eqFoldStr("keep-alive", name)
	}
	return workerOwnedCommon(name)
}

func workerOwnedCommon(name string) bool {
	return eqFoldStr("content-length", name) || eqFoldStr("transfer-encoding", name) ||
		eqFoldStr("proxy-connection", name)
}

// eqFold compares a header name with a string, ASCII case-insensitively.
func eqFold(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := 0; i < len(b); i++ {
		if lowerByte(b[i]) != lowerByte(s[i]) {
			return false
		}
	}
	return true
}

// eqFoldStr is eqFold for two strings.
func eqFoldStr(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		if lowerByte(a[i]) != lowerByte(b[i]) {
			return false
		}
	}
	return true
}

func lowerByte(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}
