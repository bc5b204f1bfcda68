package realip

import (
	_ "embed"
	"encoding/json"
	"errors"
	"math"
	"net/netip"

	"coregate/admin/spec"
	"coregate/httpvar"
	"coregate/plugins"
)

// Name is the plugin's wire name.
const Name = "real-ip"

//go:embed schema.json
var schema []byte

func init() { plugins.Register(Name, Plugin{}) }

// Plugin is real-ip's implementation; its zero value is ready.
type Plugin struct{}

var (
	_ plugins.Plugin       = Plugin{}
	_ plugins.RewritePhase = (*instance)(nil)
)

// Schema implements plugins.Plugin.
func (Plugin) Schema() []byte { return schema }

// conf is a configuration, with APISIX's defaults.
type conf struct {
	TrustedAddresses []string `json:"trusted_addresses"`
	Source           string   `json:"source"`
	Recursive        bool     `json:"recursive"`
}

// Check implements plugins.Plugin: every trusted address must parse as
// an address or a CIDR, which the schema's patterns do not ensure
// ("::1/129"), with APISIX's message.
func (Plugin) Check(raw json.RawMessage) error {
	_, err := compile(raw)
	return err
}

// Build implements plugins.Plugin.
func (Plugin) Build(raw json.RawMessage, _ plugins.Env) (plugins.Instance, error) {
	return compile(raw)
}

// xffSource is the source read from the last X-Forwarded-For header's
// last address (or, recursive, its last untrusted one).
const xffSource = "http_x_forwarded_for"

func compile(raw json.RawMessage) (*instance, error) {
	var c conf
	if err := json.Unmarshal(raw, &c); err != nil {
		return nil, err
	}
	in := &instance{source: httpvar.Parse(c.Source), xff: c.Source == xffSource}
	if c.TrustedAddresses != nil {
		in.trusted = make([]netip.Prefix, 0, len(c.TrustedAddresses))
		for _, s := range c.TrustedAddresses {
			p, ok := spec.ParseIPOrCIDR(s)
			if !ok {
				return nil, errors.New("invalid ip address: " + s)
			}
			in.trusted = append(in.trusted, p)
		}
		in.recursive = c.Recursive
	}
	return in, nil
}

// instance is one configuration, built: read-only, shared by the requests
// of its routes.
type instance struct {
	source    httpvar.Var
	xff       bool           // source is http_x_forwarded_for
	trusted   []netip.Prefix // nil: every client is trusted
	recursive bool           // with trusted and xff
}

var remoteAddr = httpvar.Parse("remote_addr")

// Rewrite implements plugins.RewritePhase, as real-ip.lua's rewrite: a
// client that trusted_addresses (when set) trusts has its address
// replaced by the one source gives, when that is an IPv4 or IPv6
// address, with a port or not ([v6]:port); anything else leaves the
// address as it is.
func (in *instance) Rewrite(c plugins.Ctx) {
	if in.trusted != nil && !in.isTrusted(c.Var(remoteAddr)) {
		return
	}
	var addr []byte
	if in.xff {
		addr = in.fromXFF(c)
	} else {
		addr = c.Var(in.source)
	}
	if addr == nil {
		return
	}
	if ip, port, ok := parseAddr(addr); ok {
		c.SetClientAddr(ip, port)
	}
}

// isTrusted reports whether addr, an address's text, is in trusted.
func (in *instance) isTrusted(addr []byte) bool {
	a, ok := spec.ParseIP(addr)
	if !ok {
		return false
	}
	a = a.Unmap()
	for _, p := range in.trusted {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// fromXFF is real-ip.lua's get_addr for http_x_forwarded_for: in the last
// X-Forwarded-For header, its one address, or the last one (white space
// after the comma skipped); recursive, the last one trusted_addresses does
// not trust, the first when it trusts them all. nil when there is no
// header.
func (in *instance) fromXFF(c plugins.Ctx) []byte {
	var v []byte
	found := false
	for i := 0; ; i++ {
		h, ok := c.HeaderAt("X-Forwarded-For", i)
		if !ok {
			break
		}
		v, found = h, true
	}
	if !found {
		return nil
	}
	if v == nil {
		v = []byte{}
	}
	last := lastComma(v)
	if last < 0 {
		return v
	}
	if !in.recursive {
		i := last + 1
		for i < len(v) && v[i] == ' ' {
			i++
		}
		return v[i:]
	}
	// From the end down to the second address, as ngx.re.split on ",\s*".
	end := len(v)
	for k := last; k >= 0; k = lastComma(v[:k]) {
		a := trimLeftSpace(v[k+1 : end])
		if !in.isTrusted(a) {
			return a
		}
		end = k
	}
	return v[:end]
}

func lastComma(b []byte) int {
	for i := len(b) - 1; i >= 0; i-- {
		if b[i] == ',' {
			return i
		}
	}
	return -1
}

// trimLeftSpace trims what PCRE's \s matches.
func trimLeftSpace(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] >= '\t' && b[0] <= '\r') {
		b = b[1:]
	}
	return b
}

// parseAddr is core.utils.parse_addr and real-ip's checks of its result:
// "ip", "ip:port", "[ipv6]", "[ipv6]:port" or a bare IPv6 address; ok
// false when the host is no IPv4 or IPv6 address or the port is not one
// of 1 to 65535. port is 0 when the address has none.
func parseAddr(addr []byte) (ip netip.Addr, port uint16, ok bool) {
	host, portText, hasPort := splitAddr(addr)
	if len(host) > 2 && host[0] == '[' && host[len(host)-1] == ']' {
		host = host[1 : len(host)-1]
	}
	if ip, ok = spec.ParseIP(host); !ok {
		return netip.Addr{}, 0, false
	}
	if hasPort {
		// tonumber(port): not a number is no port at all.
		if n, isNum := spec.LuaNumber(portText); isNum {
			if n < 1 || n > 65535 || n != math.Trunc(n) {
				return netip.Addr{}, 0, false
			}
			port = uint16(n)
		}
	}
	return ip, port, true
}

// splitAddr splits addr as parse_addr does: a '[' starts an IPv6 literal,
// with a port after "]:"; otherwise an address with a '.' before any
// second ':' has its port after the last ':', one with two ':' first is
// IPv6 without a port.
func splitAddr(addr []byte) (host, port []byte, hasPort bool) {
	if len(addr) > 0 && addr[0] == '[' {
		if addr[len(addr)-1] == ']' {
			return addr, nil, false
		}
		pos := lastColon(addr[:len(addr)-1])
		if pos < 1 || addr[pos-1] != ']' {
			return addr, nil, false // malformed: no address
		}
		return addr[:pos], addr[pos+1:], true
	}
	colons := 0
	for _, ch := range addr {
		if ch == '.' {
			break
		}
		if ch == ':' {
			if colons++; colons == 2 {
				return addr, nil, false
			}
		}
	}
	if len(addr) == 0 {
		return addr, nil, false
	}
	pos := lastColon(addr[:len(addr)-1])
	if pos < 0 {
		return addr, nil, false
	}
	return addr[:pos], addr[pos+1:], true
}

func lastColon(b []byte) int {
	for i := len(b) - 1; i >= 0; i-- {
		if b[i] == ':' {
			return i
		}
	}
	return -1
}
