package spec

import "net/netip"

// The one parser of IP addresses and CIDRs: route remote_addrs, vars
// ipmatch patterns and config.yaml's address lists are checked with it,
// and the worker compiles them and reads request addresses with it.
// APISIX accepts no IPv6 zone in any of these ("fe80::1%eth0"), nor a
// bracketed address; neither does it.

// ParseIP parses an IPv4 address (dotted quad, no leading zeros, as
// inet_pton) or an IPv6 address (RFC 4291 text form, with an optional
// trailing dotted quad) from b. Zones and brackets are refused; a v4-mapped
// IPv6 address comes back as written (Unmap it to compare with IPv4). It
// does not allocate (the standard parser takes a string and keeps it in its
// errors), so the worker can read request values with it; it accepts
// exactly what netip.ParseAddr accepts, zones excepted.
func ParseIP(b []byte) (netip.Addr, bool) {
	for _, c := range b {
		if c == ':' {
			return parseIPv6(b)
		}
	}
	v4, ok := parseIPv4(b)
	if !ok {
		return netip.Addr{}, false
	}
	return netip.AddrFrom4(v4), true
}

// ParseIPOrCIDR parses an IP address or a CIDR ("10.0.0.0/8",
// "fe80::/10"; prefix length in decimal without leading zeros) as APISIX
// accepts them. The prefix comes back masked, with a v4-mapped IPv6 prefix
// of 96 bits or more turned into the IPv4 prefix it covers, and an address
// as the prefix of that address alone, so that Contains on an unmapped
// address gives the answer.
func ParseIPOrCIDR(s string) (netip.Prefix, bool) {
	addr, bits := s, ""
	slash := false
	for i := 0; i < len(s); i++ {
		if s[i] == '/' {
			addr, bits, slash = s[:i], s[i+1:], true
			break
		}
	}
	a, ok := ParseIP([]byte(addr))
	if !ok {
		return netip.Prefix{}, false
	}
	n := a.BitLen()
	if slash {
		if n, ok = prefixLen(bits, a.BitLen()); !ok {
			return netip.Prefix{}, false
		}
	}
	p := netip.PrefixFrom(a, n)
	if a.Is4In6() && n >= 96 {
		p = netip.PrefixFrom(a.Unmap(), n-96)
	}
	return p.Masked(), true
}

// ValidIPOrCIDR reports whether s is an IP address or a CIDR prefix, as
// APISIX's schema accepts them in remote_addrs, ipmatch and real_ip_from.
func ValidIPOrCIDR(s string) bool {
	_, ok := ParseIPOrCIDR(s)
	return ok
}

// prefixLen reads a prefix length: decimal, no sign, no leading zero, at
// most max.
func prefixLen(s string, max int) (int, bool) {
	if s == "" || len(s) > 1 && s[0] == '0' || len(s) > 3 {
		return 0, false
	}
	n := 0
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
		n = n*10 + int(s[i]-'0')
	}
	return n, n <= max
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

func hexVal(c byte) (byte, bool) {
	switch {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10, true
	case c >= 'A' && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}
