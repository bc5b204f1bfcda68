package router

import "net/netip"

// parseIP parses an IPv4 or IPv6 address from b without allocating (the
// standard parsers take a string and keep it in their errors). An IPv6
// address may be wrapped in brackets; zones are refused. A v4-mapped IPv6
// address is returned unmapped.
func parseIP(b []byte) (netip.Addr, bool) {
	if len(b) > 2 && b[0] == '[' && b[len(b)-1] == ']' {
		b = b[1 : len(b)-1]
	}
	for _, c := range b {
		if c == ':' {
			a, ok := parseIPv6(b)
			return a.Unmap(), ok
		}
	}
	v4, ok := parseIPv4(b)
	if !ok {
		return netip.Addr{}, false
	}
	return netip.AddrFrom4(v4), true
}

// parseIPv4 parses dotted-quad decimal, refusing leading zeros as inet_pton does.
func parseIPv4(b []byte) ([4]byte, bool) {
	var out [4]byte
	field, val, digits := 0, 0, 0
	for i := 0; i <= len(b); i++ {
		if i == len(b) || b[i] == '.' {
			if digits == 0 || field > 3 {
				return out, false
			}
			out[field] = byte(val)
			field++
			val, digits = 0, 0
			continue
		}
		c := b[i]
		if c < '0' || c > '9' {
			return out, false
		}
		if digits > 0 && val == 0 {
			return out, false // leading zero
		}
		val = val*10 + int(c-'0')
		digits++
		if val > 255 {
			return out, false
		}
	}
	return out, field == 4
}

// parseIPv6 parses RFC 4291 text form, with an optional trailing dotted quad.
func parseIPv6(b []byte) (netip.Addr, bool) {
	var ip [16]byte
	ellipsis := -1
	i := 0
	if len(b) >= 2 && b[0] == ':' && b[1] == ':' {
		ellipsis = 0
		b = b[2:]
		if len(b) == 0 {
			return netip.IPv6Unspecified(), true
		}
	}
	for i < 16 {
		off, acc := 0, uint32(0)
		for off < len(b) && off < 5 {
			d, ok := hexVal(b[off])
			if !ok {
				break
			}
			acc = acc<<4 + uint32(d)
			off++
		}
		if off == 0 || off > 4 {
			return netip.Addr{}, false
		}
		if off < len(b) && b[off] == '.' {
			if ellipsis < 0 && i != 12 || i+4 > 16 {
				return netip.Addr{}, false
			}
			v4, ok := parseIPv4(b)
			if !ok {
				return netip.Addr{}, false
			}
			copy(ip[i:], v4[:])
			i += 4
			b = nil
			break
		}
		ip[i], ip[i+1] = byte(acc>>8), byte(acc)
		i += 2
		b = b[off:]
		if len(b) == 0 {
			break
		}
		if b[0] != ':' || len(b) == 1 {
			return netip.Addr{}, false
		}
		b = b[1:]
		if b[0] == ':' {
			if ellipsis >= 0 {
				return netip.Addr{}, false
			}
			ellipsis = i
			b = b[1:]
			if len(b) == 0 {
				break
			}
		}
	}
	if len(b) != 0 {
		return netip.Addr{}, false
	}
	if i < 16 {
		if ellipsis < 0 {
			return netip.Addr{}, false
		}
		n := 16 - i
		for j := i - 1; j >= ellipsis; j-- {
			ip[j+n] = ip[j]
		}
		for j := ellipsis + n - 1; j >= ellipsis; j-- {
			ip[j] = 0
		}
	} else if ellipsis >= 0 {
		return netip.Addr{}, false // "::" must stand for at least one group
	}
	return netip.AddrFrom16(ip), true
}
