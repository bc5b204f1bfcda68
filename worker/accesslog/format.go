package accesslog

import (
	"errors"
	"fmt"
	"strings"

	"coregate/internal/jsonesc"
)

// Kind is what a part of a format stands for: literal text or a variable.
type Kind uint8

// Part kinds. Each variable has nginx's or APISIX's meaning; a value that
// is not set is written "-", as nginx does.
const (
	Literal Kind = iota

	RemoteAddr           // $remote_addr
	RemoteUser           // $remote_user: the user of Basic authorization
	TimeLocal            // $time_local: 01/Dec/2026:12:36:17 +0000
	TimeISO8601          // $time_iso8601: 2026-12-01T12:36:17+00:00
	Msec                 // $msec: seconds with milliseconds, at the log write
	Request              // $request: the request line
	RequestMethod        // $request_method
	RequestURI           // $request_uri: the request target as sent
	URI                  // $uri, $document_uri: the normalised path
	Args                 // $args, $query_string
	ServerProtocol       // $server_protocol: HTTP/1.1
	Scheme               // $scheme
	Host                 // $host: the host without port, lower-case
	ServerPort           // $server_port
	Status               // $status
	BodyBytesSent        // $body_bytes_sent
	BytesSent            // $bytes_sent
	RequestLength        // $request_length: head and body bytes read
	RequestTime          // $request_time: seconds with milliseconds
	UpstreamAddr         // $upstream_addr: each attempt's node, ", "-separated
	UpstreamStatus       // $upstream_status: each attempt's status
	UpstreamResponseTime // $upstream_response_time
	UpstreamConnectTime  // $upstream_connect_time
	UpstreamScheme       // $upstream_scheme (APISIX)
	UpstreamHost         // $upstream_host (APISIX): the Host sent upstream
	UpstreamURI          // $upstream_uri (APISIX): the target sent upstream
	RouteID              // $route_id (APISIX)
	RouteName            // $route_name (APISIX)
	ServiceID            // $service_id (APISIX)
	ServiceName          // $service_name (APISIX)
	ConsumerName         // $consumer_name (APISIX)
	RequestID            // $request_id, $apisix_request_id: 32 hex digits
	Pid                  // $pid
	HTTP                 // $http_NAME: a request header; Part.Name is NAME with '-' for '_'
	Arg                  // $arg_NAME: a query argument's raw value
	Cookie               // $cookie_NAME
	SentHTTP             // $sent_http_NAME: a response header set by a plugin
)

var names = map[string]Kind{
	"remote_addr":            RemoteAddr,
	"remote_user":            RemoteUser,
	"time_local":             TimeLocal,
	"time_iso8601":           TimeISO8601,
	"msec":                   Msec,
	"request":                Request,
	"request_method":         RequestMethod,
	"request_uri":            RequestURI,
	"uri":                    URI,
	"document_uri":           URI,
	"args":                   Args,
	"query_string":           Args,
	"server_protocol":        ServerProtocol,
	"scheme":                 Scheme,
	"host":                   Host,
	"server_port":            ServerPort,
	"status":                 Status,
	"body_bytes_sent":        BodyBytesSent,
	"bytes_sent":             BytesSent,
	"request_length":         RequestLength,
	"request_time":           RequestTime,
	"upstream_addr":          UpstreamAddr,
	"upstream_status":        UpstreamStatus,
	"upstream_response_time": UpstreamResponseTime,
	"upstream_connect_time":  UpstreamConnectTime,
	"upstream_scheme":        UpstreamScheme,
	"upstream_host":          UpstreamHost,
	"upstream_uri":           UpstreamURI,
	"route_id":               RouteID,
	"route_name":             RouteName,
	"service_id":             ServiceID,
	"service_name":           ServiceName,
	"consumer_name":          ConsumerName,
	"request_id":             RequestID,
	"apisix_request_id":      RequestID,
	"pid":                    Pid,
}

var prefixes = []struct {
	prefix string
	kind   Kind
}{
	{"http_", HTTP},
	{"arg_", Arg},
	{"cookie_", Cookie},
	{"sent_http_", SentHTTP},
}

// Part is one piece of a compiled format.
type Part struct {
	Kind Kind
	// Text is a Literal's text.
	Text string
	// Name is the name of an HTTP, SentHTTP (lower-case, '-' for '_'),
	// Arg or Cookie part.
	Name string
}

// Escape is how variable values are escaped (nginx's log_format escape=).
type Escape uint8

// Escapes.
const (
	// EscapeDefault writes '"', '\\' and bytes below 0x20 or above 0x7e
	// as \xHH.
	EscapeDefault Escape = iota
	// EscapeJSON writes values as in a JSON string.
	EscapeJSON
	// EscapeNone writes values as they are.
	EscapeNone
)

// ParseEscape reads access_log_format_escape: default, json or none.
func ParseEscape(s string) (Escape, error) {
	switch s {
	case "", "default":
		return EscapeDefault, nil
	case "json":
		return EscapeJSON, nil
	case "none":
		return EscapeNone, nil
	}
	return 0, fmt.Errorf("access log: unknown escape %q (want default, json or none)", s)
}

// Format is a compiled log format. It is immutable and may be shared.
type Format struct {
	Parts  []Part
	Escape Escape
}

// ErrFormat is matched by the errors of Compile.
var ErrFormat = errors.New("access log format")

// Compile reads an nginx log format: text with $name or ${name}
// variables, names made of letters, digits and '_'. An unknown variable is
// an error, as in nginx.
func Compile(format string, esc Escape) (*Format, error) {
	f := &Format{Escape: esc}
	var lit strings.Builder
	flush := func() {
		if lit.Len() > 0 {
			f.Parts = append(f.Parts, Part{Kind: Literal, Text: lit.String()})
			lit.Reset()
		}
	}
	for i := 0; i < len(format); {
		c := format[i]
		if c != '$' {
			lit.WriteByte(c)
			i++
			continue
		}
		i++
		braced := i < len(format) && format[i] == '{'
		if braced {
			i++
		}
		start := i
		for i < len(format) && isNameByte(format[i]) {
			i++
		}
		name := format[start:i]
		if braced {
			if i >= len(format) || format[i] != '}' {
				return nil, fmt.Errorf("%w: missing } after ${%s", ErrFormat, name)
			}
			i++
		}
		if name == "" {
			return nil, fmt.Errorf("%w: $ without a variable name at offset %d", ErrFormat, start-1)
		}
		p, err := variable(name)
		if err != nil {
			return nil, err
		}
		flush()
		f.Parts = append(f.Parts, p)
	}
	flush()
	return f, nil
}

func variable(name string) (Part, error) {
	lname := strings.ToLower(name)
	if k, ok := names[lname]; ok {
		return Part{Kind: k}, nil
	}
	for _, p := range prefixes {
		if rest, ok := strings.CutPrefix(lname, p.prefix); ok && rest != "" {
			switch p.kind {
			case HTTP, SentHTTP:
				return Part{Kind: p.kind, Name: strings.ReplaceAll(rest, "_", "-")}, nil
			default:
				return Part{Kind: p.kind, Name: name[len(p.prefix):]}, nil
			}
		}
	}
	return Part{}, fmt.Errorf("%w: unknown variable $%s", ErrFormat, name)
}

func isNameByte(c byte) bool {
	return c == '_' || '0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
}

const hexDigits = "0123456789ABCDEF"

// AppendUnset appends what stands for a value that is not set: "-", or
// nothing for EscapeJSON, as nginx writes them.
func AppendUnset(b []byte, esc Escape) []byte {
	if esc == EscapeJSON {
		return b
	}
	return append(b, '-')
}

// AppendValue appends a variable's value (set, possibly empty) escaped as
// esc.
func AppendValue(b, v []byte, esc Escape) []byte {
	switch esc {
	case EscapeNone:
		return append(b, v...)
	case EscapeJSON:
		return jsonesc.Append(b, v, jsonesc.Nginx)
	}
	i := 0
	for i < len(v) && !escDefault(v[i]) {
		i++
	}
	b = append(b, v[:i]...) // most values need no escape: one copy
	for _, c := range v[i:] {
		if escDefault(c) {
			b = append(b, '\\', 'x', hexDigits[c>>4], hexDigits[c&15])
			continue
		}
		b = append(b, c)
	}
	return b
}

func escDefault(c byte) bool { return c == '"' || c == '\\' || c < 0x20 || c > 0x7e }
