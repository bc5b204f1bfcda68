package varexpr

import (
	"net/netip"

	"coregate/admin/spec"
)

// parseIP reads the address in a request value that ipmatch tests
// (spec.ParseIP: no zone), with an IPv6 address also allowed in brackets,
// as headers carry it, and a v4-mapped one unmapped. It does not allocate.
func parseIP(b []byte) (netip.Addr, bool) {
	if len(b) > 2 && b[0] == '[' && b[len(b)-1] == ']' {
		b = b[1 : len(b)-1]
	}
	a, ok := spec.ParseIP(b)
	return a.Unmap(), ok
}
