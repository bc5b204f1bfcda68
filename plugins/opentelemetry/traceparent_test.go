package opentelemetry

import (
	"encoding/hex"
	"testing"
)

// TestParseTraceparent: the W3C Trace Context's valid and invalid
// traceparent values, and a valid one written back unchanged.
func TestParseTraceparent(t *testing.T) {
	const good = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	sc, ok := ParseTraceparent([]byte(good))
	if !ok || hex.EncodeToString(sc.TraceID[:]) != "4bf92f3577b34da6a3ce929d0e0e4736" ||
		hex.EncodeToString(sc.SpanID[:]) != "00f067aa0ba902b7" || !sc.Sampled() {
		t.Fatalf("%s: %+v, %v", good, sc, ok)
	}
	if got := string(AppendTraceparent(nil, sc)); got != good {
		t.Errorf("written back: %s", got)
	}
	if sc, ok := ParseTraceparent([]byte("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00")); !ok || sc.Sampled() {
		t.Errorf("flags 00: %+v, %v", sc, ok)
	}
	// A later version may carry more fields after its own.
	if _, ok := ParseTraceparent([]byte("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra")); !ok {
		t.Error("version 01 with a field more: refused")
	}
	for _, bad := range []string{
		"",
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-",  // version 00 is 55 characters
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-1",    // short flags
		"ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",   // version ff
		"00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",   // upper-case
		"00-00000000000000000000000000000000-00f067aa0ba902b7-01",   // zero trace id
		"00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",   // zero span id
		"00_4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",   // separator
		"00-4bf92f3577b34da6a3ce929d0e0e473g-00f067aa0ba902b7-01",   // not hex
		"01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01x",  // more, without '-'
		"0x-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",   // version not hex
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0g",   // flags not hex
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01 ",  // trailing space
		" 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",  // leading space
		"00-4bf92f3577b34da6a3ce929d0e0e47360-0f067aa0ba902b7-01",   // misplaced '-'
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-x", // version 00 with more
	} {
		if sc, ok := ParseTraceparent([]byte(bad)); ok {
			t.Errorf("%q: accepted as %+v", bad, sc)
		}
	}
}

// TestParseTraceID: X-Request-Id as a trace id, 32 hex digits of either
// case, not all zero.
func TestParseTraceID(t *testing.T) {
	id, ok := ParseTraceID([]byte("4BF92F3577B34DA6a3ce929d0e0e4736"))
	if !ok || hex.EncodeToString(id[:]) != "4bf92f3577b34da6a3ce929d0e0e4736" {
		t.Errorf("mixed case: %x, %v", id, ok)
	}
	for _, bad := range []string{"", "4bf92f35-77b3-4da6-a3ce-929d0e0e4736", "00000000000000000000000000000000",
		"4bf92f3577b34da6a3ce929d0e0e473", "4bf92f3577b34da6a3ce929d0e0e4736a", "4bf92f3577b34da6a3ce929d0e0e473z"} {
		if id, ok := ParseTraceID([]byte(bad)); ok {
			t.Errorf("%q: accepted as %x", bad, id)
		}
	}
}
