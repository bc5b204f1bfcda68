package worker

import "coregate/plugins"

// The response body the client got, its first bytes kept for the log
// phase of a route or global rule with a plugins.ResponseBodyReader (the
// loggers' include_resp_body): a tee, as the body is relayed, into
// exchangeBufs.respBody, up to the readers' largest ResponseBodyLimit.
// The response is neither held back nor buffered whole: each piece is
// copied (as much of it as the limit leaves room for) and sent on as it
// would be without the tee. What is kept is the body's data, de-chunked,
// after body_filter when plugins change it: the upstream's pieces
// (forward, filterResponse), or the worker's own answer (answerLocal,
// answerError). A route without such a reader copies nothing;
// pluginState.respMax, the copy's limit, says, set once the request phases
// are done (startRespTee), as the request body's copy has its limit set
// once per exchange (startTee).

// startRespTee sets the limit of the response body's copy: the largest
// ResponseBodyLimit of the exchange's phases (the route's, merged with its
// consumer's, and the global rules'); 0 when none reads the body.
func (cc *clientConn) startRespTee() {
	p := &cc.plugin
	p.respMax = 0
	if !p.active {
		return
	}
	var n int64
	if p.gl != nil {
		n = p.gl.RespBodyLimit()
	}
	if p.ph != nil {
		n = max(n, p.ph.RespBodyLimit())
	}
	p.respMax = n
}

// teeRespBody keeps as much of data, a piece of the body the client gets,
// as the limit leaves room for.
func (cc *clientConn) teeRespBody(data []byte) {
	room := cc.plugin.respMax - int64(len(cc.respBody))
	if room <= 0 || len(data) == 0 {
		return
	}
	if int64(len(data)) > room {
		data = data[:room]
	}
	cc.respBody = append(cc.respBody, data...)
}

// teeRelayed keeps the data of iov, pieces of the upstream's body as
// takeBody took them for the client: the framing it wrote (uc.sizeLine,
// crlf, lastChunk) is left out.
func (cc *clientConn) teeRelayed(uc *upConn, iov [][]byte) {
	for _, piece := range iov {
		if len(piece) == 0 || &piece[0] == &crlf[0] || &piece[0] == &lastChunk[0] ||
			len(uc.sizeLine) > 0 && &piece[0] == &uc.sizeLine[0] {
			continue
		}
		cc.teeRespBody(piece)
	}
}

// ResponseBody implements plugins.Ctx: the kept start of the body.
func (x *pluginCtx) ResponseBody() []byte {
	cc := x.cc()
	if cc.plugin.phase != plugins.Log || cc.plugin.respMax == 0 || len(cc.respBody) == 0 {
		return nil
	}
	return cc.respBody
}
