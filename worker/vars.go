package worker

import (
	"bytes"
	"unsafe"

	"coregate/httpvar"
	"coregate/worker/router"
)

// reqVars exposes the request in flight on a client connection as APISIX
// variables for route `vars` conditions. Values alias the parsed request and
// are valid while the head is in gnet's buffer (during routing).
type reqVars clientConn

var _ router.VarSource = (*reqVars)(nil)

var (
	schemeHTTP  = []byte("http")
	schemeHTTPS = []byte("https")
)

// scheme is $scheme: https on a TLS connection.
func (cc *clientConn) scheme() []byte {
	if cc.tls != nil {
		return schemeHTTPS
	}
	return schemeHTTP
}

// serverNameVar is $server_name: the name of nginx's server block, "_" in
// APISIX's configuration (ngx_tpl.lua's "server_name _;") whatever the
// Host or SNI, for every listener.
var serverNameVar = []byte("_")

// noValue is the value of a variable set to nothing (an empty header).
var noValue = []byte{}

// Lookup implements router.VarSource without allocating: varValue, with no
// route matched yet (the exchange variables are unset).
func (v *reqVars) Lookup(x *httpvar.Var) ([]byte, bool) {
	return (*clientConn)(v).varValue(x)
}

// varValue is the value of a request or exchange variable (httpvar) for
// the exchange in flight: the one reading of the request state behind
// route vars (reqVars), the plugins' Var (pluginCtx) and the access log
// (appendPart). ok is false when the variable is not set: a missing
// header, argument or cookie, an exchange variable not known yet, a log
// variable. It does not allocate; the value aliases the request (see
// pluginCtx for how long it lives) or the route, which lives as long as
// its snapshot.
func (cc *clientConn) varValue(x *httpvar.Var) ([]byte, bool) {
	r := &cc.req
	switch x.Kind {
	case httpvar.URI:
		return cc.curPath, cc.curPath != nil
	case httpvar.RequestURI:
		return r.Target, r.Target != nil
	case httpvar.Args:
		a := cc.args()
		return a, a != nil
	case httpvar.Host:
		return cc.host, len(cc.host) > 0
	case httpvar.RemoteAddr:
		return cc.remoteAddr(), true
	case httpvar.RemotePort:
		return cc.remotePort(), true
	case httpvar.RequestMethod:
		return r.Method, r.Method != nil
	case httpvar.Scheme:
		return cc.scheme(), true
	case httpvar.ServerPort:
		return cc.portText, true
	case httpvar.ServerAddr:
		return cc.serverAddr(), true
	case httpvar.ServerName:
		return serverNameVar, true
	case httpvar.Hostname:
		return cc.w.hostname, cc.w.hostname != nil
	case httpvar.Arg:
		return httpvar.QueryArg(cc.args(), x.Name)
	case httpvar.HTTP:
		for i := range r.Headers {
			if h := &r.Headers[i]; httpvar.HeaderIs(h.Name, x.Name) {
				if h.Value == nil {
					return noValue, true
				}
				return h.Value, true
			}
		}
	case httpvar.TLS:
		return cc.tlsVar(x.Name)
	case httpvar.Cookie:
		for i := range r.Headers {
			h := &r.Headers[i]
			if len(h.Name) == 6 && headerNameEq(h.Name, "cookie") {
				if val, ok := httpvar.CookieValue(h.Value, x.Name); ok {
					return val, true
				}
			}
		}
	case httpvar.ConsumerName:
		if cc.plugin.consumer != nil {
			return cc.consumerName, true
		}
	case httpvar.UpstreamAddr, httpvar.BalancerIP:
		// As nginx's $upstream_addr: the address of every attempt,
		// comma-separated, once a node was picked; for a node given by
		// host name, the address connected to. $balancer_ip is the last
		// attempt's alone, as APISIX's.
		if cc.tries == 0 || cc.rt == nil || cc.rt.up == nil || cc.node >= len(cc.rt.up.nodes) {
			return nil, false
		}
		if x.Kind == httpvar.BalancerIP {
			if cc.upAP.IsValid() {
				cc.upIPBuf = cc.upAP.Addr().AppendTo(cc.upIPBuf[:0])
				return cc.upIPBuf, true
			}
			return viewBytes(cc.rt.up.nodes[cc.node].host()), true
		}
		if cc.attemptsListed() {
			return cc.upAddrs, true // the last attempt failed: listed
		}
		if len(cc.upAddrs) == 0 && !cc.upAP.IsValid() {
			return viewBytes(cc.rt.up.nodes[cc.node].addr), true
		}
		b := cc.upAddrBuf[:0]
		if len(cc.upAddrs) > 0 {
			b = append(append(b, cc.upAddrs...), ", "...)
		}
		cc.upAddrBuf = cc.appendAttemptAddr(b)
		return cc.upAddrBuf, true
	case httpvar.OTelTraceparent, httpvar.OTelTraceID, httpvar.OTelSpanID:
		return cc.setVar(x.Kind)
	default:
		if x.Kind.Exchange() && cc.rt != nil {
			v := cc.routeVar(x.Kind)
			return v, v != nil
		}
	}
	return nil, false
}

// remoteAddr is $remote_addr: the address a plugin set
// (Ctx.SetClientAddr), else the connection's.
func (cc *clientConn) remoteAddr() []byte {
	if cc.plugin.realAddr {
		return cc.realIP
	}
	return cc.ipText
}

// remotePort is $remote_port, as remoteAddr.
func (cc *clientConn) remotePort() []byte {
	if cc.plugin.realAddr {
		return cc.realPort
	}
	return cc.rportText
}

// serverAddr is $server_addr: the local address of the client's
// connection, without port, as nginx's. On a listener bound to every
// address it is the one the client dialled, read from the socket once per
// connection (the loop's only system call for it, which does not block).
func (cc *clientConn) serverAddr() []byte {
	if len(cc.saddrText) == 0 {
		ip := cc.lip
		if ip.IsUnspecified() {
			if a, ok := localIP(cc.c.Fd()); ok {
				ip = a
			}
		}
		cc.saddrText = ip.AppendTo(cc.saddrText[:0])
	}
	return cc.saddrText
}

// appendAttemptAddr appends the address of the attempt at cc.node to b:
// for a node given by host name, the one connected to (upAP); the node's
// otherwise.
func (cc *clientConn) appendAttemptAddr(b []byte) []byte {
	if cc.upAP.IsValid() {
		return cc.upAP.AppendTo(b)
	}
	return append(b, cc.rt.up.nodes[cc.node].addr...)
}

// args is $args: the query of the target an earlier plugin set
// (SetUpstreamURI), as key-auth's hide_credentials edits ngx.var.args and
// the plugins after it read the edited arguments; the request's query when
// no plugin set one. nil when there is none.
func (cc *clientConn) args() []byte {
	if !cc.plugin.upURI {
		return cc.req.Query
	}
	if i := bytes.IndexByte(cc.upURI, '?'); i >= 0 && i+1 < len(cc.upURI) {
		return cc.upURI[i+1:]
	}
	return nil
}

// viewBytes is s's bytes as a slice, made without a copy: for the
// variables' values, which their readers do not write, of the strings a
// worker keeps per route or node (50 000 routes and more).
func viewBytes(s string) []byte {
	return unsafe.Slice(unsafe.StringData(s), len(s))
}

// idBytes is the route's id as bytes, for the route_id variable.
func (rt *route) idBytes() []byte { return viewBytes(rt.id()) }

// routeVar is a variable of the matched route (cc.rt, not nil): its id and
// name, its service's id and name, and the uri and host patterns the
// request matched (APISIX's curr_req_matched._path and _host).
func (cc *clientConn) routeVar(k httpvar.Kind) []byte {
	rt := cc.rt
	switch k {
	case httpvar.RouteID:
		return rt.idBytes()
	case httpvar.RouteName:
		return rt.about.name
	case httpvar.ServiceID:
		return rt.about.serviceID
	case httpvar.ServiceName:
		return rt.about.serviceName
	case httpvar.MatchedURI:
		return matchedURI(rt.in.URIs, cc.curPath)
	case httpvar.MatchedHost:
		return matchedHost(rt.about.hosts, cc.host)
	}
	return nil
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
