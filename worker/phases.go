package worker

import (
	"time"

	"coregate/httpparse"
	"coregate/httpvar"
	"coregate/plugins"
)

// The plugin phases on the request path. A request whose route, or a
// global rule, has plugins runs them as APISIX's http_access_phase does:
//
//	rewrite        the global rules', then the route's
//	               (a consumer attached: the rewrite of the plugins the
//	               consumer's configuration adds, its authentication
//	               plugins excepted; APISIX's rewrite_in_consumer)
//	access         the global rules', then the route's (merged with the
//	               consumer's from here on)
//	before_proxy   the global rules', then the route's
//
// in start, in the client connection's traffic call, after routing and
// before the head is discarded or the upstream contacted; a plugin's Exit
// ends them and the worker answers (answerExit), after ExitAfter's delay
// on the connection's deadline (csDelay). header_filter runs when the
// response head is about to be written, whoever made it (headerFilter:
// upConn.traffic0 for the upstream's, localHead for the worker's own), and
// log once the exchange ends (requestDone) or the connection does
// (closedByPeer). body_filter sees every body the client gets: the
// worker's own and a plugin's answers whole, with eof (answerLocal,
// answerError), the upstream's piece by piece as they are forwarded, then
// an empty last piece with eof (filterResponse). Since a plugin may change
// the body, a response whose body goes through body_filter loses its
// Content-Length: it goes chunked to an HTTP/1.1 client, delimited by the
// close to an HTTP/1.0 one; a local answer's length is that of the body
// body_filter returned. A head no body follows (a HEAD's, a 304's) keeps
// the upstream's Content-Length, or states the local answer's, unless a
// plugin removed it in header_filter because it changes the body
// (lengthRemoved).
//
// A request no route matched runs the global rules' rewrite and access
// phases before its 404, as APISIX does.

// noPhases is the route's tables of a request no route matched.
var noPhases plugins.Phases

// startPlugins runs the request phases of the exchange routed to rt (nil:
// no route matched) with snap. It reports whether the request is out of
// start's hands: a plugin ended it (it is answered, or waits for its
// delay) or awaits an operation (csAwait); the head is then discarded.
func (cc *clientConn) startPlugins(snap *Snapshot, rt *route) bool {
	p := &cc.plugin
	p.active = true
	p.gl = snap.global
	p.ph = &noPhases
	if rt != nil {
		p.ph = &rt.plugins
	}
	cc.runRequestPhases()
	if p.waiting {
		cc.suspend()
		return true
	}
	return cc.endRequestPhases()
}

// endRequestPhases follows the request phases once they ran to the end or
// to a plugin's Exit: it reports whether a plugin ended the request, and
// then answers it, or has it wait for its delay.
func (cc *clientConn) endRequestPhases() bool {
	p := &cc.plugin
	p.late = hasLate(p.gl) || hasLate(p.ph)
	p.filterBody = hasBodyFilter(p.gl) || hasBodyFilter(p.ph)
	cc.startRespTee()
	if !p.exited {
		return false
	}
	cc.discardHead()
	p.delay += p.hold
	if p.delay > 0 {
		cc.state = csDelay
		cc.w.setDeadline(cc, int64(p.delay))
		return true
	}
	cc.answerExit()
	return true
}

// awaitLimit bounds a request's wait for a plugin's operation (csAwait),
// whose own timeout (limit-count's redis_timeout) should end it first: past
// it the client gets 504 and the connection closes.
const awaitLimit = 60 * time.Second

// suspend parks the exchange while a plugin's operation runs: the head is
// copied out of gnet's buffer (the phases still to run read it, and the
// buffer moves on when the traffic call returns) and dropped from it.
func (cc *clientConn) suspend() {
	if !cc.plugin.kept {
		cc.keepHead()
	}
	cc.discardHead()
	cc.state = csAwait
	cc.w.setDeadline(cc, int64(awaitLimit))
}

// resumeAwait runs, on the loop, when the Wake of the exchange's Await arrives:
// the plugin's Resume, then the phases after it, then the request goes on
// as start would have taken it.
func (cc *clientConn) resumeAwait(r plugins.Resumer) {
	p := &cc.plugin
	p.waiting = false
	cc.w.clearDeadline(cc)
	p.phase = stagePhase[p.stage]
	r.Resume((*pluginCtx)(cc))
	if !p.exited && !p.waiting {
		cc.runRequestPhases()
	}
	if p.waiting {
		cc.w.setDeadline(cc, int64(awaitLimit))
		return
	}
	if cc.endRequestPhases() {
		return
	}
	cc.routed()
}

func hasLate(ph *plugins.Phases) bool {
	return ph != nil && (len(ph.HeaderFilter) > 0 || len(ph.BodyFilter) > 0 || len(ph.Log) > 0)
}

func hasBodyFilter(ph *plugins.Phases) bool { return ph != nil && len(ph.BodyFilter) > 0 }

// bodyFilter runs the body_filter phase on one piece of the body; it
// returns what to send instead (see plugins.BodyFilterPhase).
func (cc *clientConn) bodyFilter(chunk []byte, eof bool) []byte {
	p := &cc.plugin
	p.phase = plugins.BodyFilter
	ctx := (*pluginCtx)(cc)
	if gl := p.gl; gl != nil {
		for _, f := range gl.BodyFilter {
			chunk = f.BodyFilter(ctx, chunk, eof)
		}
	}
	for _, f := range p.ph.BodyFilter {
		chunk = f.BodyFilter(ctx, chunk, eof)
	}
	return chunk
}

// filterLocal runs header_filter and body_filter on an answer of the
// worker's own (status, body) and returns the body to send. The body is
// copied first: a filter may change the piece it gets, and the worker's
// pages are shared. What it returns is valid until the next filterLocal or
// filterResponse. An answer whose status has no body (bodylessStatus)
// runs no body_filter, as an upstream's does not (beginResponse).
func (cc *clientConn) filterLocal(status int, body []byte) []byte {
	cc.headerFilter(status)
	if bodylessStatus(cc.respStatus) {
		return nil
	}
	cc.filtBuf = append(cc.filtBuf[:0], body...)
	out := cc.bodyFilter(cc.filtBuf, true)
	if len(out) > 0 && &out[0] == &cc.filtBuf[0] {
		return out
	}
	// Another buffer of the plugin's: copied, so that it need stay valid
	// only for the call.
	cc.filtBuf = append(cc.filtBuf[:0], out...)
	return cc.filtBuf
}

// filterResponse runs body_filter on the upstream body pieces of
// iov[start:] (they alias gnet's buffer) and replaces them with what it
// returned, framed in cc.filtBuf: a chunk per piece for an HTTP/1.1
// client, the bytes as they are for an HTTP/1.0 one. done: the body ends
// there, and the last piece (empty, eof) and the last chunk follow.
func (cc *clientConn) filterResponse(iov [][]byte, start int, done bool) [][]byte {
	out := cc.filtBuf[:0]
	for _, piece := range iov[start:] {
		piece = cc.bodyFilter(piece, false)
		if cc.plugin.respMax > 0 {
			cc.teeRespBody(piece)
		}
		out = cc.appendFiltered(out, piece)
	}
	if done {
		out = cc.endFiltered(out)
	}
	cc.filtBuf = out
	clear(iov[start:])
	iov = iov[:start]
	if len(out) > 0 {
		iov = append(iov, out)
	}
	return iov
}

// endFiltered appends the body_filter phase's last piece and, for an
// HTTP/1.1 client, the last chunk.
func (cc *clientConn) endFiltered(out []byte) []byte {
	last := cc.bodyFilter(nil, true)
	if cc.plugin.respMax > 0 {
		cc.teeRespBody(last)
	}
	out = cc.appendFiltered(out, last)
	if !cc.http10 {
		out = append(out, lastChunk...)
	}
	return out
}

// finishFiltered sends the end of a re-framed body whose upstream ended
// it by closing (filterResponse never saw done).
func (cc *clientConn) finishFiltered() {
	if cc.closed {
		return
	}
	cc.filtBuf = cc.endFiltered(cc.filtBuf[:0])
	cc.write(cc.filtBuf)
}

func (cc *clientConn) appendFiltered(out, data []byte) []byte {
	if len(data) == 0 {
		return out // an empty chunk would end the body
	}
	if cc.http10 {
		return append(out, data...)
	}
	out = httpparse.AppendChunkSize(out, len(data))
	out = append(out, data...)
	return append(out, crlf...)
}

// The stages of the request phases, in order (pluginState.stage).
const (
	stageGlobalRewrite = iota
	stageRewrite
	// stageConsumer is the rewrite of the plugins an attached consumer's
	// configuration adds (APISIX's rewrite_in_consumer); from it on, ph
	// is the route's phases merged with the consumer's.
	stageConsumer
	stageGlobalAccess
	stageAccess
	stageGlobalBeforeProxy
	stageBeforeProxy
	stagesDone
)

var stagePhase = [stagesDone + 1]plugins.Phase{plugins.Rewrite, plugins.Rewrite, plugins.Rewrite,
	plugins.Access, plugins.Access, plugins.BeforeProxy, plugins.BeforeProxy, plugins.BeforeProxy}

// runRequestPhases runs rewrite, access and before_proxy from the cursor
// (stage, next) until a plugin exits or awaits, or they are done.
func (cc *clientConn) runRequestPhases() {
	ctx := (*pluginCtx)(cc)
	p := &cc.plugin
	for ; p.stage < stagesDone; p.stage, p.next = p.stage+1, 0 {
		p.phase = stagePhase[p.stage]
		if p.stage == stageConsumer && p.next == 0 {
			p.fresh = nil
			if p.consumer != nil && cc.rt != nil {
				if cp := cc.rt.about.byConsumer[p.consumer]; cp != nil {
					p.ph = &cp.phases
					p.fresh = cp.fresh
				}
			}
		}
		for p.next < cc.stageLen() {
			i := p.next
			p.next++
			cc.runStage(ctx, i)
			if p.exited || p.waiting {
				return
			}
		}
	}
}

// stageLen is the number of plugins of the current stage.
func (cc *clientConn) stageLen() int {
	p := &cc.plugin
	gl, ph := p.gl, p.ph
	if gl == nil {
		gl = &noPhases
	}
	switch p.stage {
	case stageGlobalRewrite:
		return len(gl.Rewrite)
	case stageRewrite:
		return len(ph.Rewrite)
	case stageConsumer:
		return len(p.fresh)
	case stageGlobalAccess:
		return len(gl.Access)
	case stageAccess:
		return len(ph.Access)
	case stageGlobalBeforeProxy:
		return len(gl.BeforeProxy)
	case stageBeforeProxy:
		return len(ph.BeforeProxy)
	}
	return 0
}

// runStage runs the i-th plugin of the current stage.
func (cc *clientConn) runStage(ctx *pluginCtx, i int) {
	p := &cc.plugin
	switch p.stage {
	case stageGlobalRewrite:
		p.gl.Rewrite[i].Rewrite(ctx)
	case stageRewrite:
		p.ph.Rewrite[i].Rewrite(ctx)
	case stageConsumer:
		p.fresh[i].Rewrite(ctx)
	case stageGlobalAccess:
		p.gl.Access[i].Access(ctx)
	case stageAccess:
		p.ph.Access[i].Access(ctx)
	case stageGlobalBeforeProxy:
		p.gl.BeforeProxy[i].BeforeProxy(ctx)
	case stageBeforeProxy:
		p.ph.BeforeProxy[i].BeforeProxy(ctx)
	}
}

// headerFilter runs the header_filter phase, once per exchange, for a
// response of status about to be written.
func (cc *clientConn) headerFilter(status int) {
	p := &cc.plugin
	if p.active && p.filtered {
		return // decided, a plugin's SetStatus included (filterLocal, then localHead)
	}
	cc.respStatus = status
	if !p.active {
		return
	}
	p.status = status
	p.phase = plugins.HeaderFilter
	ctx := (*pluginCtx)(cc)
	if gl := p.gl; gl != nil {
		for _, i := range gl.HeaderFilter {
			i.HeaderFilter(ctx)
		}
	}
	for _, i := range p.ph.HeaderFilter {
		i.HeaderFilter(ctx)
	}
	p.filtered = true
	cc.respStatus = p.status // a plugin's SetStatus
}

// logPhase runs the log phase, once per exchange: when it ends, or when
// its connection does (Status is then 0 if no answer was begun).
func (cc *clientConn) logPhase() {
	p := &cc.plugin
	if !p.active || p.logged {
		return
	}
	p.logged = true
	p.phase = plugins.Log
	ctx := (*pluginCtx)(cc)
	if gl := p.gl; gl != nil {
		for _, i := range gl.Log {
			i.Log(ctx)
		}
	}
	for _, i := range p.ph.Log {
		i.Log(ctx)
	}
}

// keepHead copies the request head out of gnet's buffer into
// exchangeBufs.headCopy before discardHead drops it, and points cc.req,
// host and curPath (all aliasing the head) at the copy, so that they stay
// valid for the phases that run later (pluginState.late) and the access
// log. When gnet's Peek hands back other memory than the head was parsed
// from (a head that spanned two reads is assembled anew at each Peek), the
// copy is parsed again instead.
func (cc *clientConn) keepHead() {
	buf, _ := cc.io.Peek(cc.req.HeadLen)
	cc.headCopy = append(cc.headCopy[:0], buf...)
	cc.plugin.kept = true
	if cc.req.Rebase(buf, cc.headCopy) {
		cc.host = httpparse.Rebase(cc.host, buf, cc.headCopy)
		cc.curPath = httpparse.Rebase(cc.curPath, buf, cc.headCopy)
		return
	}
	cc.parser.Reset()
	if cc.parser.Parse(cc.headCopy, &cc.req) != nil {
		return // the same bytes parsed a moment ago
	}
	cc.host, cc.hostBuf = lowerASCII(httpvar.HostOnly(cc.req.Host), cc.hostBuf)
	if path, pb, ok := normalizePath(cc.req.Path, cc.pathBuf); ok {
		cc.curPath, cc.pathBuf = path, pb
		if cc.w.cfg.NormalizeURILikeServlet {
			if sp, sb, ok := servletPath(path, cc.servletBuf); ok {
				cc.curPath, cc.servletBuf = sp, sb
			}
		}
	}
}

// answerExit answers a request a plugin ended: its body as given, or the
// gateway's page for the status when it gave none.
func (cc *clientConn) answerExit() {
	p := &cc.plugin
	hasBody := cc.reqBody != bodyNone
	if p.exitPage {
		if page := errorPages[p.exitStatus]; page != nil {
			cc.answerLocal(p.exitStatus, ctHTML, page, hasBody)
			return
		}
		cc.answerLocal(p.exitStatus, ctText, nil, hasBody)
		return
	}
	cc.answerLocal(p.exitStatus, ctText, cc.exitBody, hasBody)
}

// respHas reports whether a plugin set the response header name
// (SetResponseHeader: its value replaces the worker's or the upstream's;
// an added one does not) or removed it (RemoveResponseHeader).
func (cc *clientConn) respHas(name string) bool {
	for i := range cc.respHdr {
		if h := &cc.respHdr[i]; !h.add && eqFoldStr(h.name, name) {
			return true
		}
	}
	return false
}

// respNamed is respHas for a header name of a response.
func (cc *clientConn) respNamed(name []byte) bool {
	for i := range cc.respHdr {
		if h := &cc.respHdr[i]; !h.add && eqFold(name, h.name) {
			return true
		}
	}
	return false
}

// appendRespHeaders appends the response headers plugins set or added.
func (cc *clientConn) appendRespHeaders(b []byte) []byte {
	for i := range cc.respHdr {
		h := &cc.respHdr[i]
		if h.remove {
			continue
		}
		b = append(b, h.name...)
		b = append(b, ':', ' ')
		b = append(b, h.value...)
		b = append(b, '\r', '\n')
	}
	return b
}

// editSets reports whether a plugin's edit replaces or removes the
// upstream request's fields of that name.
func (cc *clientConn) editSets(name []byte) bool {
	for i := range cc.reqEdits {
		if e := &cc.reqEdits[i]; e.set && eqFold(name, e.name) {
			return true
		}
	}
	return false
}

// appendEdits appends the header fields plugins set or added for the
// upstream.
func (cc *clientConn) appendEdits(b []byte) []byte {
	for i := range cc.reqEdits {
		e := &cc.reqEdits[i]
		if e.remove {
			continue
		}
		b = append(b, e.name...)
		b = append(b, ':', ' ')
		b = append(b, e.value...)
		b = append(b, '\r', '\n')
	}
	return b
}

// appendStatusLine appends the status line of an answer of the worker's
// own: nginx's reason phrase, or none for a status it has none for.
func appendStatusLine(b []byte, status int) []byte {
	if l, ok := statusLines[status]; ok {
		return append(b, l...)
	}
	b = append(b, "HTTP/1.1 "...)
	b = appendStatus(b, status)
	b = append(b, ' ')
	b = append(b, reasonPhrases[status]...)
	return append(b, '\r', '\n')
}
