package cluster

import (
	"strings"
	"testing"
)

func TestParseEnv(t *testing.T) {
	kv, err := ParseEnv(strings.NewReader("# written by up\nADMIN_KEY=ab12\n\nDP=10.77.0.41:9080,10.77.0.42:9080\nEMPTY=\n"))
	if err != nil {
		t.Fatal(err)
	}
	if kv["ADMIN_KEY"] != "ab12" || kv["DP"] != "10.77.0.41:9080,10.77.0.42:9080" || len(kv) != 3 {
		t.Errorf("ParseEnv: %q", kv)
	}
	if _, err := ParseEnv(strings.NewReader("ADMIN_KEY=x\nnot a pair\n")); err == nil ||
		!strings.Contains(err.Error(), "line 2") {
		t.Errorf("a line without =: %v, want an error naming line 2", err)
	}
}

func TestReportFailed(t *testing.T) {
	var r Report
	r.add("s", "a", "1", "<= 2", true)
	if r.Failed() {
		t.Error("a passing row failed the report")
	}
	r.add("s", "b", "3", "<= 2", false)
	if !r.Failed() {
		t.Error("a failing row did not fail the report")
	}
	var b strings.Builder
	r.Print(&b)
	if !strings.Contains(b.String(), "FAIL") || strings.Count(b.String(), "\n") != 3 {
		t.Errorf("table:\n%s", b.String())
	}
}
