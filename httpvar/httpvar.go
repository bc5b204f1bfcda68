// Package httpvar is the one table of the nginx and APISIX variables
// coregate knows ($uri, $arg_id, $http_x_user, $route_id, $status, ...),
// shared by everything that names one: route vars (worker/router), the
// plugins (plugins.Ctx.Var, their templates and keys), the access log's
// format (worker/accesslog) and the plugin test kit's fake
// (plugins/plugintest).
//
// A variable's name is resolved once, when a configuration is built
// (Parse), to a Var: its Kind and, for the families arg_, http_, cookie_
// and sent_http_, the name it carries. Reading a variable for a request is
// then a switch on the Kind, with no string compared but the header,
// argument or cookie name. The readers of the request state (the worker,
// the fake) switch on the same kinds with this package's helpers
// (QueryArg, CookieValue, HeaderIs), so that a variable reads the same
// wherever it is named.
//
// The kinds come in three groups:
//
//   - request variables (URI to Cookie): read from the request, in route
//     vars, plugins and the access log alike;
//   - exchange variables (RouteID to OTelSpanID): the matched route, the
//     consumer and the upstream node, and those a plugin sets
//     (Settable); not set while routing (route vars see them unset), set
//     for the plugins and the log once known;
//   - log variables (RemoteUser on, LogOnly): the access log's own, its
//     times, sizes and statuses; plugins.Ctx.Var answers nil for them.
//
// Names are case-insensitive, as nginx's are; the argument and cookie
// names of arg_ and cookie_ are compared as written. Everything here is
// immutable and safe for concurrent use; the helpers do not allocate.
package httpvar

import (
	"bytes"
	"sort"
	"strings"
)

// Kind says which variable a Var is.
type Kind uint8

// The kinds of variables. Names follow nginx and APISIX.
const (
	Unknown Kind = iota // a name coregate does not know: never set; Var.Name is the name

	// Request variables.
	URI           // $uri, $document_uri: the decoded, normalised path
	RequestURI    // $request_uri: the target as sent
	Args          // $args, $query_string: the query (as a plugin edited it, see plugins.Ctx)
	Host          // $host: the Host without port, lower-case
	RemoteAddr    // $remote_addr
	RemotePort    // $remote_port
	RequestMethod // $request_method
	Scheme        // $scheme
	ServerPort    // $server_port
	ServerAddr    // $server_addr: the local address of the client's connection, without port
	ServerName    // $server_name: the server block's name, "_" as APISIX's nginx configuration names it
	Hostname      // $hostname: the machine's host name
	Arg           // $arg_NAME: the raw first value of query argument NAME
	HTTP          // $http_NAME: the first request header NAME
	Cookie        // $cookie_NAME
	TLS           // $https and nginx's $ssl_* variables of the connection (tlsconf.Var); Var.Name is the name

	// Exchange variables.
	RouteID      // $route_id (APISIX)
	RouteName    // $route_name (APISIX)
	ServiceID    // $service_id (APISIX)
	ServiceName  // $service_name (APISIX)
	MatchedURI   // $matched_uri (APISIX): the route's uri pattern the request matched
	MatchedHost  // $matched_host (APISIX): the route's host pattern the request matched
	ConsumerName // $consumer_name (APISIX)
	UpstreamAddr // $upstream_addr: the node of the last attempt, ip:port (a node given by host name: the address connected to)
	BalancerIP   // $balancer_ip (APISIX): the host of that node
	// Set by a plugin for the rest of the request (plugins.Ctx.SetVar;
	// Settable): opentelemetry's set_ngx_var.
	OTelTraceparent // $opentelemetry_context_traceparent: the request's span as a traceparent
	OTelTraceID     // $opentelemetry_trace_id: its trace id, 32 hex digits
	OTelSpanID      // $opentelemetry_span_id: its span id, 16 hex digits

	// Log variables.
	RemoteUser           // $remote_user: the user of Basic authorization
	TimeLocal            // $time_local: 01/Dec/2026:12:36:17 +0000
	TimeISO8601          // $time_iso8601: 2026-12-01T12:36:17+00:00
	Msec                 // $msec: seconds with milliseconds, at the log write
	Request              // $request: the request line
	ServerProtocol       // $server_protocol: HTTP/1.1
	Status               // $status
	BodyBytesSent        // $body_bytes_sent
	BytesSent            // $bytes_sent
	RequestLength        // $request_length: head and body bytes read
	RequestTime          // $request_time: seconds with milliseconds
	UpstreamStatus       // $upstream_status: each attempt's status
	UpstreamResponseTime // $upstream_response_time
	UpstreamConnectTime  // $upstream_connect_time
	UpstreamScheme       // $upstream_scheme (APISIX)
	UpstreamHost         // $upstream_host (APISIX): the Host sent upstream
	UpstreamURI          // $upstream_uri (APISIX): the target sent upstream
	RequestID            // $request_id, $apisix_request_id: 32 hex digits
	Pid                  // $pid
	SentHTTP             // $sent_http_NAME: a response header set by a plugin
)

// Exchange reports whether k is an exchange variable: unset while routing.
func (k Kind) Exchange() bool { return k >= RouteID && k < RemoteUser }

// Settable reports whether a plugin sets k for the rest of the request
// (plugins.Ctx.SetVar), as APISIX's plugins set ngx.var of the variables
// nginx declares for them.
func (k Kind) Settable() bool { return k >= OTelTraceparent && k <= OTelSpanID }

// NumSettable is how many kinds are Settable, from OTelTraceparent on.
const NumSettable = int(OTelSpanID-OTelTraceparent) + 1

// LogOnly reports whether k is one of the access log's own variables.
func (k Kind) LogOnly() bool { return k >= RemoteUser }

// Var is a variable resolved by Parse.
type Var struct {
	Kind Kind
	// Name is the argument or cookie name of Arg and Cookie (as
	// written), the header name of HTTP and SentHTTP (lower-case, '_' for
	// '-', as HeaderIs compares it), the name of TLS (lower-case), the
	// name itself for Unknown; empty otherwise.
	Name string
}

var names = map[string]Kind{
	"uri":                    URI,
	"document_uri":           URI,
	"request_uri":            RequestURI,
	"args":                   Args,
	"query_string":           Args,
	"host":                   Host,
	"remote_addr":            RemoteAddr,
	"remote_port":            RemotePort,
	"request_method":         RequestMethod,
	"scheme":                 Scheme,
	"server_port":            ServerPort,
	"server_addr":            ServerAddr,
	"server_name":            ServerName,
	"hostname":               Hostname,
	"route_id":               RouteID,
	"route_name":             RouteName,
	"service_id":             ServiceID,
	"service_name":           ServiceName,
	"matched_uri":            MatchedURI,
	"matched_host":           MatchedHost,
	"consumer_name":          ConsumerName,
	"upstream_addr":          UpstreamAddr,
	"balancer_ip":            BalancerIP,
	"remote_user":            RemoteUser,
	"time_local":             TimeLocal,
	"time_iso8601":           TimeISO8601,
	"msec":                   Msec,
	"request":                Request,
	"server_protocol":        ServerProtocol,
	"status":                 Status,
	"body_bytes_sent":        BodyBytesSent,
	"bytes_sent":             BytesSent,
	"request_length":         RequestLength,
	"request_time":           RequestTime,
	"upstream_status":        UpstreamStatus,
	"upstream_response_time": UpstreamResponseTime,
	"upstream_connect_time":  UpstreamConnectTime,
	"upstream_scheme":        UpstreamScheme,
	"upstream_host":          UpstreamHost,
	"upstream_uri":           UpstreamURI,
	"request_id":             RequestID,
	"apisix_request_id":      RequestID,
	"pid":                    Pid,
}

// settableNames are the variables plugins set (Kind.Settable).
var settableNames = map[string]Kind{
	"opentelemetry_context_traceparent": OTelTraceparent,
	"opentelemetry_trace_id":            OTelTraceID,
	"opentelemetry_span_id":             OTelSpanID,
}

// tlsNames are the variables of kind TLS: nginx's $https ("on" on a TLS
// connection) and the $ssl_* ones coregate sets (tlsconf.Var).
var tlsNames = map[string]bool{
	"https": true, "ssl_server_name": true, "ssl_protocol": true, "ssl_cipher": true,
	"ssl_session_reused": true, "ssl_client_verify": true, "ssl_client_s_dn": true,
	"ssl_client_i_dn": true, "ssl_client_serial": true, "ssl_client_fingerprint": true,
	"ssl_client_raw_cert": true, "ssl_client_cert": true, "ssl_client_escaped_cert": true,
}

// The families of variables that carry a name, longest prefix first.
var families = []struct {
	prefix string
	kind   Kind
}{
	{"sent_http_", SentHTTP},
	{"cookie_", Cookie},
	{"http_", HTTP},
	{"arg_", Arg},
}

// Parse resolves a variable's name ("uri", "arg_id", "http_x_user",
// "cookie_sid", ...), case-insensitively. "http_X-Foo" names the header
// X-Foo (or X_Foo) as "http_x_foo" does. A name not in the table is
// Unknown, never set.
func Parse(name string) Var {
	lname := strings.ToLower(name)
	if k, ok := names[lname]; ok {
		return Var{Kind: k}
	}
	if k, ok := settableNames[lname]; ok {
		return Var{Kind: k}
	}
	if tlsNames[lname] {
		return Var{Kind: TLS, Name: lname}
	}
	for _, f := range families {
		rest, ok := strings.CutPrefix(lname, f.prefix)
		if !ok || rest == "" {
			continue
		}
		switch f.kind {
		case HTTP, SentHTTP:
			return Var{Kind: f.kind, Name: strings.ReplaceAll(rest, "-", "_")}
		}
		return Var{Kind: f.kind, Name: name[len(f.prefix):]}
	}
	return Var{Kind: Unknown, Name: name}
}

// Names returns the table's names, sorted, and its families' prefixes
// ("arg_", ...).
func Names() (exact, prefixes []string) {
	for n := range names {
		exact = append(exact, n)
	}
	for n := range tlsNames {
		exact = append(exact, n)
	}
	for n := range settableNames {
		exact = append(exact, n)
	}
	sort.Strings(exact)
	for _, f := range families {
		prefixes = append(prefixes, f.prefix)
	}
	sort.Strings(prefixes)
	return exact, prefixes
}

// HeaderIs reports whether a header's name is the one an HTTP or SentHTTP
// Var names, as nginx compares them: case-insensitively, the header's '-'
// read as '_'.
func HeaderIs[T string | []byte](header T, name string) bool {
	if len(header) != len(name) {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := header[i]
		switch {
		case 'A' <= c && c <= 'Z':
			c += 'a' - 'A'
		case c == '-':
			c = '_'
		}
		if c != name[i] {
			return false
		}
	}
	return true
}

// EqualFold reports whether a and b are equal, ASCII letters compared in
// any case (header names, tokens). It does not allocate.
func EqualFold[A, B string | []byte](a A, b B) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		x, y := a[i], b[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}

// QueryArg returns the raw first value of argument name in the query q;
// ok is false when there is none. As in nginx, an argument is name=value:
// "a" without '=' is no argument a ("a=" is, empty).
func QueryArg(q []byte, name string) (val []byte, ok bool) {
	for len(q) > 0 {
		var part []byte
		if i := bytes.IndexByte(q, '&'); i >= 0 {
			part, q = q[:i], q[i+1:]
		} else {
			part, q = q, nil
		}
		if i := bytes.IndexByte(part, '='); i >= 0 && string(part[:i]) == name {
			return part[i+1:], true
		}
	}
	return nil, false
}

// CookieValue returns the value of cookie name in a Cookie header's value.
func CookieValue(h []byte, name string) ([]byte, bool) {
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

// HostOnly returns the host of a Host header's value: without its port
// and a trailing dot, an IPv6 literal with its brackets; not lower-cased.
func HostOnly(h []byte) []byte {
	if len(h) > 0 && h[0] == '[' {
		if i := bytes.IndexByte(h, ']'); i > 0 {
			return h[:i+1]
		}
		return h
	}
	if i := bytes.LastIndexByte(h, ':'); i >= 0 {
		h = h[:i]
	}
	if len(h) > 0 && h[len(h)-1] == '.' {
		h = h[:len(h)-1]
	}
	return h
}
