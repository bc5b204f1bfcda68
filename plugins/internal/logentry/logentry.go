// Package logentry builds the entries of APISIX's logging plugins
// (log-util.lua): the default one of get_full_log, or a log_format's,
// as JSON, appended to a caller's buffer from a request's plugins.Ctx
// without allocating. A compiled Format is read-only and safe for
// concurrent use.
package logentry

import (
	"encoding/json"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"coregate/admin/spec"
	"coregate/httpvar"
	"coregate/internal/jsonesc"
	"coregate/plugins"
)

// maxFormatDepth is how deep log_format's objects nest, as APISIX's
// MAX_LOG_FORMAT_DEPTH: an object deeper is logged as {}.
const maxFormatDepth = 5

// field is one member of a compiled log_format: a "$variable", a
// constant, or an object of fields.
type field struct {
	key    []byte // the member's name, quoted, with its ':'
	kind   fieldKind
	v      httpvar.Var // fieldVar
	lit    []byte      // fieldLit: the constant's JSON
	sub    Format      // fieldObject
	toNull bool        // fieldVar: a variable never set here ($request_body)
}

type fieldKind uint8

const (
	fieldVar fieldKind = iota
	fieldLit
	fieldObject
)

// Format is a compiled log_format (or log_format_extra).
type Format []field

// CompileFormat compiles a log_format object, its members in name order
// (APISIX's follow Lua's table order, which is none). top: the members
// route_id and service_id are left out, as APISIX overwrites them.
func CompileFormat(raw json.RawMessage, top bool) (Format, error) {
	return compileObject(raw, 1, top)
}

func compileObject(raw json.RawMessage, depth int, top bool) (Format, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, err
	}
	fs := make(Format, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if top && (k == "route_id" || k == "service_id") {
			continue
		}
		f := field{key: append(jsonesc.AppendQuoted(nil, k, jsonesc.CJSON), ':')}
		v := m[k]
		var s string
		switch {
		case json.Unmarshal(v, &s) == nil && strings.HasPrefix(s, "$"):
			f.kind, f.v = fieldVar, httpvar.Parse(s[1:])
			f.toNull = s == "$request_body"
		case len(v) > 0 && v[0] == '{':
			f.kind = fieldObject
			if depth < maxFormatDepth {
				sub, err := compileObject(v, depth+1, false)
				if err != nil {
					return nil, err
				}
				f.sub = sub
			}
		default:
			var x any
			if err := json.Unmarshal(v, &x); err != nil {
				return nil, err
			}
			lit, err := json.Marshal(x)
			if err != nil {
				return nil, err
			}
			f.kind, f.lit = fieldLit, lit
		}
		fs = append(fs, f)
	}
	return fs, nil
}

// defaultKeys are the members of the default entry, which
// log_format_extra adds to but never replaces.
var defaultKeys = []string{"request", "response", "server", "upstream", "service_id", "route_id",
	"consumer", "client_ip", "start_time", "latency", "upstream_latency", "apisix_latency"}

// DropDefaults leaves out the fields named as a default member.
func DropDefaults(fs Format) Format {
	return slices.DeleteFunc(fs, func(f field) bool {
		var k string
		_ = json.Unmarshal(f.key[:len(f.key)-1], &k)
		return slices.Contains(defaultKeys, k)
	})
}

// appendFields appends the members fs, without braces.
func appendFields(b []byte, c plugins.Ctx, fs Format) []byte {
	for i := range fs {
		f := &fs[i]
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, f.key...)
		switch f.kind {
		case fieldLit:
			b = append(b, f.lit...)
		case fieldObject:
			b = append(b, '{')
			b = appendFields(b, c, f.sub)
			b = append(b, '}')
		default:
			b = appendVar(b, c, &f.v, f.toNull)
		}
	}
	return b
}

// appendVar appends a variable's value as a JSON string, as nginx's
// variables are, or null when it is not set. Of the access log's own
// variables, those the log phase knows in figures (Ctx.Exchange, Status)
// are given; the others are null.
func appendVar(b []byte, c plugins.Ctx, v *httpvar.Var, null bool) []byte {
	if null {
		return append(b, "null"...)
	}
	if v.Kind.LogOnly() {
		e := c.Exchange()
		switch v.Kind {
		case httpvar.Status:
			return quotedInt(b, int64(c.Status()))
		case httpvar.BytesSent:
			return quotedInt(b, e.BytesSent)
		case httpvar.RequestLength:
			return quotedInt(b, e.RequestLength)
		case httpvar.RequestTime:
			return quotedSeconds(b, e.RequestTime)
		case httpvar.UpstreamResponseTime:
			if !e.Proxied {
				return append(b, "null"...)
			}
			return quotedSeconds(b, e.UpstreamTime)
		case httpvar.Msec:
			return quotedSeconds(b, time.Duration(c.Now()))
		}
		return append(b, "null"...)
	}
	val := c.Var(*v)
	if val == nil {
		return append(b, "null"...)
	}
	return jsonesc.AppendQuoted(b, val, jsonesc.CJSON)
}

func quotedInt(b []byte, n int64) []byte {
	b = append(b, '"')
	b = strconv.AppendInt(b, n, 10)
	return append(b, '"')
}

// quotedSeconds writes d as nginx's times: seconds with milliseconds.
func quotedSeconds(b []byte, d time.Duration) []byte {
	ms := d.Milliseconds()
	b = append(b, '"')
	b = strconv.AppendInt(b, ms/1000, 10)
	b = append(b, '.')
	r := ms % 1000
	b = append(b, byte('0'+r/100), byte('0'+r/10%10), byte('0'+r%10))
	return append(b, '"')
}

// AppendCustom appends the entry of a log_format: its members, then the
// route's id and its service's, as APISIX's get_custom_format_log;
// noRoute, when not empty, is the route_id of a request no route matched
// (http-logger's "no-matched").
func AppendCustom(b []byte, c plugins.Ctx, fs Format, noRoute string) []byte {
	b = append(b, '{')
	b = appendFields(b, c, fs)
	if id := c.RouteID(); id != "" {
		if len(fs) > 0 {
			b = append(b, ',')
		}
		b = append(b, `"route_id":`...)
		b = jsonesc.AppendQuoted(b, id, jsonesc.CJSON)
		if s := c.Var(varServiceID); len(s) > 0 {
			b = append(b, `,"service_id":`...)
			b = jsonesc.AppendQuoted(b, s, jsonesc.CJSON)
		}
	} else if noRoute != "" {
		if len(fs) > 0 {
			b = append(b, ',')
		}
		b = append(b, `"route_id":`...)
		b = jsonesc.AppendQuoted(b, noRoute, jsonesc.CJSON)
	}
	return append(b, '}')
}

var (
	varScheme     = httpvar.Parse("scheme")
	varHost       = httpvar.Parse("host")
	varServerPort = httpvar.Parse("server_port")
	varRequestURI = httpvar.Parse("request_uri")
	varArgs       = httpvar.Parse("args")
	varUpstream   = httpvar.Parse("upstream_addr")
	varServiceID  = httpvar.Parse("service_id")
	varRemoteAddr = httpvar.Parse("remote_addr")
)

// maxHeaders and maxArgs are how many request headers and query arguments
// the entry holds, as ngx.req.get_headers and get_uri_args read 100.
const (
	maxHeaders = 100
	maxArgs    = 100
)

// AppendFull appends APISIX's default entry (log-util's get_full_log),
// then extra's members; noRoute as AppendCustom's. reqBody, when not nil,
// is the request's body (Body.Of of NewReqBody's), request.body;
// respBody, when not nil, the start of the response body (Body.Of of
// NewRespBody's), response.body. tmp is
// scratch for names and arguments, kept by the caller for its capacity.
func AppendFull(b []byte, tmp *[]byte, c plugins.Ctx, extra Format, noRoute string, reqBody, respBody []byte) []byte {
	e := c.Exchange()
	b = append(b, `{"request":{"url":`...)
	b = append(b, '"')
	b = jsonesc.Append(b, c.Var(varScheme), jsonesc.CJSON)
	b = append(b, "://"...)
	b = jsonesc.Append(b, c.Var(varHost), jsonesc.CJSON)
	b = append(b, ':')
	b = jsonesc.Append(b, c.Var(varServerPort), jsonesc.CJSON)
	b = jsonesc.Append(b, c.Var(varRequestURI), jsonesc.CJSON)
	b = append(b, `","uri":`...)
	b = jsonesc.AppendQuoted(b, c.Var(varRequestURI), jsonesc.CJSON)
	b = append(b, `,"method":`...)
	b = jsonesc.AppendQuoted(b, c.Method(), jsonesc.CJSON)
	b = append(b, `,"headers":`...)
	b = appendHeaders(b, tmp, c, false)
	b = append(b, `,"querystring":`...)
	b = appendArgs(b, tmp, c.Var(varArgs))
	b = append(b, `,"size":`...)
	b = strconv.AppendInt(b, e.RequestLength, 10)
	if reqBody != nil {
		b = append(b, `,"body":`...)
		b = jsonesc.AppendQuoted(b, reqBody, jsonesc.CJSON)
	}
	b = append(b, `},"response":{"status":`...)
	b = strconv.AppendInt(b, int64(c.Status()), 10)
	b = append(b, `,"headers":`...)
	b = appendHeaders(b, tmp, c, true)
	b = append(b, `,"size":`...)
	b = strconv.AppendInt(b, e.BytesSent, 10)
	if respBody != nil {
		b = append(b, `,"body":`...)
		b = jsonesc.AppendQuoted(b, respBody, jsonesc.CJSON)
	}
	b = append(b, `},"server":{"hostname":`...)
	b = jsonesc.AppendQuoted(b, hostname, jsonesc.CJSON)
	b = append(b, `,"version":"`+spec.CompatVersion+`"}`...)
	if up := c.Var(varUpstream); up != nil {
		b = append(b, `,"upstream":`...)
		b = jsonesc.AppendQuoted(b, up, jsonesc.CJSON)
	}
	if id := c.RouteID(); id != "" {
		b = append(b, `,"service_id":`...)
		b = jsonesc.AppendQuoted(b, c.Var(varServiceID), jsonesc.CJSON)
		b = append(b, `,"route_id":`...)
		b = jsonesc.AppendQuoted(b, id, jsonesc.CJSON)
	} else {
		b = append(b, `,"service_id":`...)
		b = jsonesc.AppendQuoted(b, c.Var(varHost), jsonesc.CJSON)
		if noRoute != "" {
			b = append(b, `,"route_id":`...)
			b = jsonesc.AppendQuoted(b, noRoute, jsonesc.CJSON)
		}
	}
	if k := c.Consumer(); k != nil {
		b = append(b, `,"consumer":{"username":`...)
		b = jsonesc.AppendQuoted(b, k.Username, jsonesc.CJSON)
		b = append(b, '}')
	}
	b = append(b, `,"client_ip":`...)
	b = jsonesc.AppendQuoted(b, c.Var(varRemoteAddr), jsonesc.CJSON)
	b = append(b, `,"start_time":`...)
	b = strconv.AppendInt(b, (c.Now()-int64(e.RequestTime))/int64(time.Millisecond), 10)
	latency := millis(e.RequestTime)
	b = append(b, `,"latency":`...)
	b = strconv.AppendFloat(b, latency, 'f', -1, 64)
	apisix := latency
	if e.Proxied {
		up := millis(e.UpstreamTime)
		b = append(b, `,"upstream_latency":`...)
		b = strconv.AppendFloat(b, up, 'f', -1, 64)
		apisix = max(latency-up, 0)
	}
	b = append(b, `,"apisix_latency":`...)
	b = strconv.AppendFloat(b, apisix, 'f', -1, 64)
	if len(extra) > 0 {
		b = append(b, ',')
		b = appendFields(b, c, extra)
	}
	return append(b, '}')
}

func millis(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// appendHeaders appends the request's headers as ngx.req.get_headers
// gives them, or with resp the response's the client got as
// ngx.resp.get_headers does: names in lower case, a repeated header's
// values in an array, in the order sent.
func appendHeaders(b []byte, tmp *[]byte, c plugins.Ctx, resp bool) []byte {
	b = append(b, '{')
	first := true
	for i := 0; i < maxHeaders; i++ {
		name, _, ok := headerAt(c, resp, i)
		if !ok {
			break
		}
		if seenHeader(c, resp, name, i) {
			continue
		}
		if !first {
			b = append(b, ',')
		}
		first = false
		t := (*tmp)[:0]
		for _, ch := range name {
			if 'A' <= ch && ch <= 'Z' {
				ch += 'a' - 'A'
			}
			t = append(t, ch)
		}
		*tmp = t
		b = jsonesc.AppendQuoted(b, t, jsonesc.CJSON)
		b = append(b, ':')
		n := 0
		for j := i; j < maxHeaders; j++ {
			nj, _, ok := headerAt(c, resp, j)
			if !ok {
				break
			}
			if httpvar.EqualFold(nj, name) {
				n++
			}
		}
		if n > 1 {
			b = append(b, '[')
		}
		k := 0
		for j := i; j < maxHeaders; j++ {
			nj, vj, ok := headerAt(c, resp, j)
			if !ok {
				break
			}
			if httpvar.EqualFold(nj, name) {
				if k > 0 {
					b = append(b, ',')
				}
				k++
				b = jsonesc.AppendQuoted(b, vj, jsonesc.CJSON)
			}
		}
		if n > 1 {
			b = append(b, ']')
		}
	}
	return append(b, '}')
}

// seenHeader reports whether a header before the i-th has name.
func seenHeader(c plugins.Ctx, resp bool, name []byte, i int) bool {
	for j := 0; j < i; j++ {
		nj, _, _ := headerAt(c, resp, j)
		if httpvar.EqualFold(nj, name) {
			return true
		}
	}
	return false
}

// headerAt is the i-th field of the request's head, or with resp of the
// response's.
func headerAt(c plugins.Ctx, resp bool, i int) (name, value []byte, ok bool) {
	if resp {
		return c.ResponseHeaderAt(i)
	}
	return c.RequestHeaderAt(i)
}

// appendArgs appends the query's arguments as ngx.req.get_uri_args gives
// them: names and values decoded ('+' a space), an argument without '='
// true, a repeated one's values in an array, in the order sent; empty
// names are left out.
func appendArgs(b []byte, tmp *[]byte, q []byte) []byte {
	b = append(b, '{')
	first := true
	n := 0
	for rest := q; len(rest) > 0 && n < maxArgs; {
		var kv []byte
		kv, rest = cut(rest)
		key, _, _ := splitArg(kv)
		if len(key) == 0 {
			continue
		}
		n++
		if argSeen(q, kv, key) {
			continue
		}
		if !first {
			b = append(b, ',')
		}
		first = false
		*tmp = unescape((*tmp)[:0], key)
		b = jsonesc.AppendQuoted(b, *tmp, jsonesc.CJSON)
		b = append(b, ':')
		count := 0
		for r := rest; len(r) > 0; {
			var x []byte
			x, r = cut(r)
			if k, _, _ := splitArg(x); string(k) == string(key) {
				count++
			}
		}
		if count > 0 {
			b = append(b, '[')
		}
		b = appendArgValue(b, tmp, kv)
		for r := rest; len(r) > 0; {
			var x []byte
			x, r = cut(r)
			if k, _, _ := splitArg(x); string(k) == string(key) {
				b = append(b, ',')
				b = appendArgValue(b, tmp, x)
			}
		}
		if count > 0 {
			b = append(b, ']')
		}
	}
	return append(b, '}')
}

// argSeen reports whether an argument of q before kv (a slice of q) has
// the name key.
func argSeen(q, kv, key []byte) bool {
	for rest := q; len(rest) > 0; {
		var x []byte
		x, rest = cut(rest)
		if len(x) > 0 && &x[0] == &kv[0] {
			return false
		}
		if k, _, _ := splitArg(x); len(k) > 0 && string(k) == string(key) {
			return true
		}
	}
	return false
}

func appendArgValue(b []byte, tmp *[]byte, kv []byte) []byte {
	_, v, hasEq := splitArg(kv)
	if !hasEq {
		return append(b, "true"...)
	}
	*tmp = unescape((*tmp)[:0], v)
	return jsonesc.AppendQuoted(b, *tmp, jsonesc.CJSON)
}

// cut returns the argument before the first '&' and the rest after it.
func cut(q []byte) (kv, rest []byte) {
	for i, ch := range q {
		if ch == '&' {
			return q[:i], q[i+1:]
		}
	}
	return q, nil
}

func splitArg(kv []byte) (key, val []byte, hasEq bool) {
	for i, ch := range kv {
		if ch == '=' {
			return kv[:i], kv[i+1:], true
		}
	}
	return kv, nil, false
}

// unescape appends s percent-decoded, '+' as a space, to dst; a '%' not
// followed by two hex digits is kept as it is, as ngx.unescape_uri does.
func unescape(dst, s []byte) []byte {
	for i := 0; i < len(s); i++ {
		switch ch := s[i]; {
		case ch == '+':
			dst = append(dst, ' ')
		case ch == '%' && i+2 < len(s) && isHex(s[i+1]) && isHex(s[i+2]):
			dst = append(dst, unhex(s[i+1])<<4|unhex(s[i+2]))
			i += 2
		default:
			dst = append(dst, ch)
		}
	}
	return dst
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func unhex(c byte) byte {
	switch {
	case c <= '9':
		return c - '0'
	case c >= 'a':
		return c - 'a' + 10
	}
	return c - 'A' + 10
}

// hostname is the server.hostname of the default entry.
var hostname = func() string {
	h, _ := os.Hostname()
	return h
}()
