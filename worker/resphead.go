package worker

import (
	"bytes"

	"coregate/plugins"
)

// The response head the client got, kept for the log phase of a route or
// global rule with a plugins.ResponseHeadReader (the loggers' default
// entry's response.headers): the head is written into w.scratch, which
// the next answer reuses, so it is copied into exchangeBufs.sentHead as it
// is written (beginResponse, localHead, answerError) and read back field
// by field (Ctx.ResponseHeaderAt). A route without such a reader copies
// nothing.

// keepsRespHead reports whether the exchange's plugins read the response
// head in their log phase.
func (cc *clientConn) keepsRespHead() bool {
	p := &cc.plugin
	return p.active && (p.ph != nil && p.ph.RespHead() || p.gl != nil && p.gl.RespHead())
}

// keepRespHead copies head, the head just written for the client (status
// line to the blank line), when the exchange's plugins read it; a later
// call (answerError's X-APISIX-Upstream-Status) replaces it.
func (cc *clientConn) keepRespHead(head []byte) {
	if !cc.keepsRespHead() {
		return
	}
	cc.sentHead = append(cc.sentHead[:0], head...)
	cc.plugin.headKept = true
}

// ResponseHeaderAt implements plugins.Ctx over the kept head: the i-th
// field line after the status line, split at its colon, the value
// without the spaces around it. It walks the head from its start, which
// for the score of fields a head has costs less than keeping an index.
func (x *pluginCtx) ResponseHeaderAt(i int) (name, value []byte, ok bool) {
	cc := x.cc()
	if cc.plugin.phase != plugins.Log || !cc.plugin.headKept || i < 0 {
		return nil, nil, false
	}
	rest := cc.sentHead
	if k := bytes.IndexByte(rest, '\n'); k >= 0 {
		rest = rest[k+1:] // the status line
	}
	for n := 0; ; n++ {
		k := bytes.IndexByte(rest, '\n')
		if k < 0 {
			return nil, nil, false
		}
		line := rest[:k]
		rest = rest[k+1:]
		if m := len(line); m > 0 && line[m-1] == '\r' {
			line = line[:m-1]
		}
		if len(line) == 0 {
			return nil, nil, false // the blank line ending the head
		}
		if n < i {
			continue
		}
		c := bytes.IndexByte(line, ':')
		if c < 0 {
			return line, nil, true
		}
		return line[:c], bytes.TrimLeft(line[c+1:], " \t"), true
	}
}
