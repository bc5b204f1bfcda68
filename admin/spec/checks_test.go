package spec

import (
	"encoding/json"
	"testing"
	"time"
)

// TestParseChecksDefaults: what is not written takes APISIX's defaults
// (schema_def.lua), what is written wins, and passive is nil when absent.
func TestParseChecksDefaults(t *testing.T) {
	c, err := ParseChecks(json.RawMessage(`{"active":{"http_path":"/s","unhealthy":{"http_failures":1}}}`))
	if err != nil {
		t.Fatal(err)
	}
	a := c.Active
	if a.Type != "http" || a.Method != "GET" || a.Timeout != time.Second || a.HTTPPath != "/s" || !a.VerifyCert ||
		a.Healthy.Interval != time.Second || a.Healthy.Successes != 2 || !a.Healthy.HasStatus(302) ||
		a.Unhealthy.HTTPFailures != 1 || a.Unhealthy.TCPFailures != 2 || a.Unhealthy.Timeouts != 3 || !a.Unhealthy.HasStatus(505) {
		t.Fatalf("active: %+v", a)
	}
	if c.Passive != nil {
		t.Fatalf("passive without one written: %+v", c.Passive)
	}
	c, err = ParseChecks(json.RawMessage(`{"active":{"type":"tcp"},"passive":{"unhealthy":{"timeouts":2}}}`))
	if err != nil {
		t.Fatal(err)
	}
	p := c.Passive
	if p == nil || p.Type != "http" || p.Healthy.Successes != 5 || !p.Healthy.HasStatus(226) ||
		p.Unhealthy.Timeouts != 2 || p.Unhealthy.HTTPFailures != 5 || !p.Unhealthy.HasStatus(503) || p.Unhealthy.HasStatus(502) {
		t.Fatalf("passive: %+v", p)
	}
	if c, err := ParseChecks(nil); c != nil || err != nil {
		t.Fatalf("no checks: %v %v", c, err)
	}
	if _, err := ParseChecks(json.RawMessage(`{"passive":{}}`)); err == nil {
		t.Fatal("checks without active accepted")
	}
}
