package opentelemetry

// MaxAttrs is the number of attributes a Span holds beyond its name; an
// attribute more is dropped (Span.AddAttr).
const MaxAttrs = 24

// spanData is the room of a span's name and attributes' text; what does
// not fit is cut (Span.Truncated).
const spanData = 2048

// Span is the compact record of one request's server span, written on the
// event loop into a Queue's slot with nothing allocated (its text copied
// into data) and read by the exporter once committed. It holds no
// pointer, so that a queue of them is one allocation the collector does
// not scan.
type Span struct {
	SC     SpanContext // the span's own trace id, span id and flags
	Parent SpanID      // the parent's span id; zero for a root span
	// Start and End are Unix times in nanoseconds.
	Start, End int64
	Status     uint16 // the response's status
	// FromUpstream is set when the response came from the upstream
	// (APISIX's apisix.response_source "upstream"; "apisix" otherwise).
	FromUpstream bool
	nattr        uint8
	truncated    bool
	qpos         uint64 // the queue position it was reserved for (Queue.Commit)
	// ends are the ends in data of the name (ends[0]) then of each
	// attribute's key and value.
	ends [1 + 2*MaxAttrs]uint16
	data [spanData]byte
}

// Reset empties s for a new request: no name, no attribute.
func (s *Span) Reset() {
	s.SC, s.Parent = SpanContext{}, SpanID{}
	s.Start, s.End, s.Status, s.FromUpstream = 0, 0, 0, false
	s.nattr, s.truncated = 0, false
	s.ends[0] = 0
}

// SetName sets the span's name (APISIX's "GET /hello*"), first and once,
// from the parts given, concatenated.
func (s *Span) SetName(parts ...[]byte) {
	n := 0
	for _, p := range parts {
		n += s.copyIn(n, p)
	}
	s.ends[0] = uint16(n)
}

// AddAttr adds a string attribute; it reports false, adding nothing, when
// the span has MaxAttrs already or no room is left for the key.
func (s *Span) AddAttr(key, value []byte) bool {
	if int(s.nattr) == MaxAttrs {
		s.truncated = true
		return false
	}
	at := int(s.ends[2*s.nattr])
	if at+len(key) > spanData {
		s.truncated = true
		return false
	}
	at += s.copyIn(at, key)
	s.ends[2*s.nattr+1] = uint16(at)
	at += s.copyIn(at, value)
	s.ends[2*s.nattr+2] = uint16(at)
	s.nattr++
	return true
}

// copyIn copies what of b fits into data at at, and returns how much.
func (s *Span) copyIn(at int, b []byte) int {
	n := copy(s.data[at:], b)
	if n < len(b) {
		s.truncated = true
	}
	return n
}

// Name is the span's name; it aliases s.
func (s *Span) Name() []byte { return s.data[:s.ends[0]] }

// NumAttrs is the number of attributes.
func (s *Span) NumAttrs() int { return int(s.nattr) }

// Attr is attribute i's key and value; they alias s.
func (s *Span) Attr(i int) (key, value []byte) {
	start, mid, end := s.ends[2*i], s.ends[2*i+1], s.ends[2*i+2]
	return s.data[start:mid], s.data[mid:end]
}

// Truncated reports whether text or an attribute was cut for lack of
// room.
func (s *Span) Truncated() bool { return s.truncated }
