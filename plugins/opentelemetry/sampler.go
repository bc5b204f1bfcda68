package opentelemetry

import "encoding/binary"

// Sampler decides whether a new span is sampled, as the samplers of
// APISIX's sampler.name: always_on, always_off, trace_id_ratio and
// parent_base (the parent's sampled flag when the request carried a valid
// traceparent, else Root's decision). A Sampler is immutable once built
// and safe for concurrent use; Sample does not allocate.
type Sampler struct {
	kind uint8
	// bound is trace_id_ratio's: a trace is sampled when the low 63 bits
	// of its id's last 8 bytes are below fraction·2^63, as
	// OpenTelemetry's TraceIDRatioBased, so that every service that
	// samples a trace by the same ratio agrees.
	bound uint64
	root  *Sampler // parent_base's, for a request without a parent
}

const (
	samplerAlwaysOff = iota
	samplerAlwaysOn
	samplerRatio
	samplerParentBase
)

// AlwaysOn and AlwaysOff are the samplers of those names.
var (
	AlwaysOn  = Sampler{kind: samplerAlwaysOn}
	AlwaysOff = Sampler{kind: samplerAlwaysOff}
)

// TraceIDRatio samples the fraction of the traces (0 to 1; below 0 none,
// 1 and above all).
func TraceIDRatio(fraction float64) Sampler {
	switch {
	case fraction >= 1:
		return AlwaysOn
	case !(fraction > 0): // NaN too
		return Sampler{kind: samplerRatio}
	}
	return Sampler{kind: samplerRatio, bound: uint64(fraction * (1 << 63))}
}

// ParentBase follows the parent's sampled flag, and root for a request
// without a parent.
func ParentBase(root Sampler) Sampler {
	if root.kind == samplerParentBase {
		root = *root.root
	}
	return Sampler{kind: samplerParentBase, root: &root}
}

// Sample decides for a span of trace id, whose parent (when hasParent)
// is the traceparent the client sent.
func (s *Sampler) Sample(id TraceID, parent SpanContext, hasParent bool) bool {
	switch s.kind {
	case samplerAlwaysOn:
		return true
	case samplerRatio:
		return binary.BigEndian.Uint64(id[8:])>>1 < s.bound
	case samplerParentBase:
		if hasParent {
			return parent.Sampled()
		}
		return s.root.Sample(id, parent, false)
	}
	return false
}
