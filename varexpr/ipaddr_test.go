package varexpr

import (
	"net/netip"
	"testing"
)

func checkParseIP(t *testing.T, s string) {
	t.Helper()
	got, ok := parseIP([]byte(s))
	in := s
	if len(in) > 2 && in[0] == '[' && in[len(in)-1] == ']' {
		in = in[1 : len(in)-1]
	}
	want, err := netip.ParseAddr(in)
	wantOK := err == nil && want.Zone() == ""
	if ok != wantOK || ok && got != want.Unmap() {
		t.Errorf("parseIP(%q) = %v, %v; netip says %v, %v", s, got, ok, want, err)
	}
}

func TestParseIP(t *testing.T) {
	for _, s := range []string{
		"1.2.3.4", "0.0.0.0", "255.255.255.255", "256.1.1.1", "01.2.3.4", "1.2.3", "1.2.3.4.5",
		"1..2.3", "", "::", "::1", "1::", "[::1]", "fe80::1%eth0", "2001:db8::8a2e:370:7334",
		"1:2:3:4:5:6:7:8", "1:2:3:4:5:6:7:8:9", "1:2:3:4:5:6:7::", "::1:2:3:4:5:6:7",
		"1:2:3:4:5:6:7::8", "::ffff:1.2.3.4", "1:2:3:4:5:6:1.2.3.4", "1:2:3:4:5:1.2.3.4",
		"::1.2.3.4", "1::1.2.3.4", ":1::", "1:::2", "12345::", "g::", "1:2", "::ffff:1.2.3",
		"1:2:3:4:5:6:7:1.2.3.4", "a:b:c:d:e:f:0:1", "A:B::", ":", "[]", "[1.2.3.4]",
	} {
		checkParseIP(t, s)
	}
}

func FuzzParseIP(f *testing.F) {
	for _, s := range []string{"1.2.3.4", "::1", "1:2::3.4.5.6", "[::]", "fe80::%1"} {
		f.Add(s)
	}
	f.Fuzz(checkParseIP)
}
