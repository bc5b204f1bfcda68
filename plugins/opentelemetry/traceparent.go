package opentelemetry

// TraceID and SpanID are W3C Trace Context ids. The zero values are the
// invalid ids the specification names.
type (
	TraceID [16]byte
	SpanID  [8]byte
)

// SpanContext is what a traceparent field carries: the trace, the span
// and the sampled flag (bit 0 of trace-flags; the other flags are kept
// as given).
type SpanContext struct {
	TraceID TraceID
	SpanID  SpanID
	Flags   byte
}

// Sampled reports whether the sampled flag is set.
func (sc SpanContext) Sampled() bool { return sc.Flags&1 != 0 }

// traceparentLen is the length of a version 00 traceparent:
// "00-" 32 hex "-" 16 hex "-" 2 hex.
const traceparentLen = 55

// ParseTraceparent reads a traceparent header field value as the W3C
// Trace Context specification (level 1) has a vendor read it: version 00
// is exactly 55 characters; a later version may carry more after a '-';
// version ff, upper-case hex, all-zero ids and bad lengths are invalid
// (ok false: the request starts a new trace). It does not allocate.
func ParseTraceparent(v []byte) (sc SpanContext, ok bool) {
	if len(v) < traceparentLen || v[2] != '-' || v[35] != '-' || v[52] != '-' {
		return SpanContext{}, false
	}
	var ver [1]byte
	if !decodeHex(ver[:], v[0:2]) || ver[0] == 0xff {
		return SpanContext{}, false
	}
	if ver[0] == 0 && len(v) != traceparentLen || ver[0] != 0 && len(v) > traceparentLen && v[traceparentLen] != '-' {
		return SpanContext{}, false
	}
	var fl [1]byte
	if !decodeHex(sc.TraceID[:], v[3:35]) || !decodeHex(sc.SpanID[:], v[36:52]) || !decodeHex(fl[:], v[53:55]) {
		return SpanContext{}, false
	}
	if sc.TraceID == (TraceID{}) || sc.SpanID == (SpanID{}) {
		return SpanContext{}, false
	}
	sc.Flags = fl[0]
	return sc, true
}

// AppendTraceparent appends sc as a version 00 traceparent value to b.
func AppendTraceparent(b []byte, sc SpanContext) []byte {
	b = append(b, "00-"...)
	b = appendHex(b, sc.TraceID[:])
	b = append(b, '-')
	b = appendHex(b, sc.SpanID[:])
	b = append(b, '-')
	return appendHex(b, []byte{sc.Flags})
}

const hexDigits = "0123456789abcdef"

func appendHex(b, src []byte) []byte {
	for _, c := range src {
		b = append(b, hexDigits[c>>4], hexDigits[c&15])
	}
	return b
}

// decodeHex decodes lower-case hex src (twice dst's length) into dst.
func decodeHex(dst, src []byte) bool {
	if len(src) != 2*len(dst) {
		return false
	}
	for i := range dst {
		hi, ok1 := fromHex(src[2*i])
		lo, ok2 := fromHex(src[2*i+1])
		if !ok1 || !ok2 {
			return false
		}
		dst[i] = hi<<4 | lo
	}
	return true
}

func fromHex(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	}
	return 0, false
}

// ParseTraceID reads a trace id of 32 hex digits, either case, as APISIX's
// trace_id_source x-request-id reads X-Request-Id (lower-cased first); the
// all-zero id is invalid.
func ParseTraceID(v []byte) (TraceID, bool) {
	var id TraceID
	if len(v) != 32 {
		return id, false
	}
	var lower [32]byte
	for i, c := range v {
		if 'A' <= c && c <= 'F' {
			c += 'a' - 'A'
		}
		lower[i] = c
	}
	if !decodeHex(id[:], lower[:]) || id == (TraceID{}) {
		return TraceID{}, false
	}
	return id, true
}
