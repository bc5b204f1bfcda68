package varexpr

import (
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParsePrefix(t *testing.T) {
	in := []string{"10.0.0.1", "10.1.2.3/8", "::1", "::ffff:10.0.0.0/104", "::ffff:0:0/64", "fe80::/10"}
	var got []netip.Prefix
	for _, s := range in {
		p, err := parsePrefix(s)
		if err != nil {
			t.Fatalf("parsePrefix(%s): %v", s, err)
		}
		got = append(got, p)
	}
	want := []netip.Prefix{
		netip.MustParsePrefix("10.0.0.1/32"), netip.MustParsePrefix("10.0.0.0/8"),
		netip.MustParsePrefix("::1/128"), netip.MustParsePrefix("10.0.0.0/8"),
		netip.MustParsePrefix("::/64"), netip.MustParsePrefix("fe80::/10"),
	}
	if diff := cmp.Diff(want, got, cmp.Comparer(func(a, b netip.Prefix) bool { return a == b })); diff != "" {
		t.Errorf("parsePrefix (-want +got):\n%s", diff)
	}
}
