package worker

import (
	"bytes"

	"coregate/worker/router"
)

// reqVars exposes the request in flight on a client connection as APISIX
// variables for route `vars` conditions. Values alias the parsed request and
// are valid while the head is in gnet's buffer (during routing).
type reqVars clientConn

var _ router.VarSource = (*reqVars)(nil)

var schemeHTTP = []byte("http")

// Lookup implements router.VarSource without allocating.
func (v *reqVars) Lookup(x *router.Var) ([]byte, bool) {
	cc := (*clientConn)(v)
	r := &cc.req
	switch x.Kind {
	case router.VarURI:
		return cc.curPath, true
	case router.VarHost:
		return cc.host, len(cc.host) > 0
	case router.VarRemoteAddr:
		return cc.ipText, true
	case router.VarRequestMethod:
		return r.Method, true
	case router.VarRequestURI:
		return r.Target, true
	case router.VarQueryString:
		return r.Query, r.Query != nil
	case router.VarScheme:
		return schemeHTTP, true
	case router.VarServerPort:
		return cc.portText, true
	case router.VarArg:
		return queryArg(r.Query, x.Name)
	case router.VarHTTP:
		for i := range r.Headers {
			h := &r.Headers[i]
			if len(h.Name) == len(x.Name) && headerNameEq(h.Name, x.Name) {
				return h.Value, true
			}
		}
	case router.VarCookie:
		for i := range r.Headers {
			h := &r.Headers[i]
			if len(h.Name) == 6 && headerNameEq(h.Name, "cookie") {
				if val, ok := cookieValue(h.Value, x.Name); ok {
					return val, true
				}
			}
		}
	}
	return nil, false
}

// lowerASCII returns b lower-cased: b itself when it has no upper-case
// letter, else a copy written into buf (reused, grown as needed).
func lowerASCII(b, buf []byte) (out, newBuf []byte) {
	i := 0
	for i < len(b) && (b[i] < 'A' || b[i] > 'Z') {
		i++
	}
	if i == len(b) {
		return b, buf
	}
	buf = append(buf[:0], b...)
	for ; i < len(buf); i++ {
		if c := buf[i]; 'A' <= c && c <= 'Z' {
			buf[i] = c + 'a' - 'A'
		}
	}
	return buf, buf
}

// headerNameEq compares a header name with a lower-case name.
func headerNameEq(b []byte, lower string) bool {
	for i := 0; i < len(b); i++ {
		c := b[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != lower[i] {
			return false
		}
	}
	return true
}

// queryArg returns the raw first value of argument name in q.
func queryArg(q []byte, name string) ([]byte, bool) {
	for len(q) > 0 {
		var part []byte
		if i := bytes.IndexByte(q, '&'); i >= 0 {
			part, q = q[:i], q[i+1:]
		} else {
			part, q = q, nil
		}
		k, val := part, []byte(nil)
		if i := bytes.IndexByte(part, '='); i >= 0 {
			k, val = part[:i], part[i+1:]
		}
		if string(k) == name {
			return val, true
		}
	}
	return nil, false
}

// cookieValue returns the value of cookie name in a Cookie header value.
func cookieValue(h []byte, name string) ([]byte, bool) {
	for len(h) > 0 {
		var part []byte
		if i := bytes.IndexByte(h, ';'); i >= 0 {
			part, h = h[:i], h[i+1:]
		} else {
			part, h = h, nil
		}
		part = bytes.TrimLeft(part, " \t")
		if i := bytes.IndexByte(part, '='); i >= 0 && string(part[:i]) == name {
			return bytes.TrimRight(part[i+1:], " \t"), true
		}
	}
	return nil, false
}
