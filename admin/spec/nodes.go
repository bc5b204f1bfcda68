package spec

import (
	"encoding/json"
	"net"
	"strconv"
	"strings"
)

// Addr returns the node's dial address "host:port" for an upstream of the
// given scheme: a missing port becomes 443 for https and grpcs and 80
// otherwise (APISIX's scheme_to_port); an IPv6 host is bracketed. It
// allocates; call it when compiling, not per request.
func (n Node) Addr(scheme string) string {
	port := n.Port
	if port == 0 {
		port = DefaultPort(scheme)
	}
	return net.JoinHostPort(trimBrackets(n.Host), strconv.Itoa(port))
}

// DefaultPort is the port a node without one gets: 443 for https and
// grpcs, 80 for anything else.
func DefaultPort(scheme string) int {
	switch scheme {
	case "https", "grpcs":
		return 443
	}
	return 80
}

func trimBrackets(h string) string {
	if len(h) >= 2 && h[0] == '[' && h[len(h)-1] == ']' {
		return h[1 : len(h)-1]
	}
	return h
}

// IsZero reports whether no nodes were written (not even an empty map or
// list).
func (ns Nodes) IsZero() bool { return ns.List == nil }

// MarshalJSON writes the nodes in the form they were written: a map
// {"host:port": weight} or an array of node objects.
func (ns Nodes) MarshalJSON() ([]byte, error) {
	if !ns.IsMap {
		if ns.List == nil {
			return []byte("[]"), nil
		}
		return json.Marshal(ns.List)
	}
	b := []byte{'{'}
	for i, n := range ns.List {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJSONString(b, nodeKey(n))
		b = append(b, ':')
		b = strconv.AppendInt(b, int64(n.Weight), 10)
	}
	return append(b, '}'), nil
}

// nodeKey is the map-form key of n: host[:port], an IPv6 host bracketed.
func nodeKey(n Node) string {
	h := n.Host
	if strings.IndexByte(h, ':') >= 0 {
		h = "[" + h + "]"
	}
	if n.Port != 0 {
		h += ":" + strconv.Itoa(n.Port)
	}
	return h
}

// UnmarshalJSON accepts either written form and checks it against APISIX's
// nodes schema (weight an integer ≥ 0, port 1-65535, host a host name or
// address).
func (ns *Nodes) UnmarshalJSON(b []byte) error {
	v, err := parseJSON(b)
	if err != nil {
		return err
	}
	if p := ns.fromJSON(v); p != nil {
		return p.schemaErr()
	}
	return nil
}

// errNodes is the one message APISIX gives for any nodes that fail its
// schema (an anyOf of the two forms).
const errNodes = "object matches none of the required"

func (ns *Nodes) fromJSON(v *jval) *problem {
	switch v.kind {
	case jObject:
		list := make([]Node, 0, len(v.obj))
		index := make(map[string]int, len(v.obj))
		for _, m := range v.obj {
			n, ok := parseNodeKey(m.key)
			if !ok {
				return &problem{msg: errNodes}
			}
			w, ok := m.val.integer()
			if !ok || w < 0 || w > maxWeight {
				return &problem{msg: errNodes}
			}
			n.Weight = int(w)
			if i, dup := index[m.key]; dup {
				list[i] = n // a repeated key: the last one wins, as in APISIX
				continue
			}
			index[m.key] = len(list)
			list = append(list, n)
		}
		*ns = Nodes{List: list, IsMap: true}
		return nil
	case jArray:
		list := make([]Node, 0, len(v.arr))
		for _, e := range v.arr {
			n, ok := nodeFromJSON(e)
			if !ok {
				return &problem{msg: errNodes}
			}
			list = append(list, n)
		}
		*ns = Nodes{List: list}
		return nil
	}
	return &problem{msg: errNodes}
}

// maxWeight bounds a weight so that sums over many nodes cannot overflow.
const maxWeight = 1 << 30

func nodeFromJSON(e *jval) (Node, bool) {
	var n Node
	if e.kind != jObject {
		return n, false
	}
	var hasHost, hasWeight bool
	for _, m := range e.obj {
		switch m.key {
		case "host":
			if m.val.kind != jString {
				return n, false
			}
			n.Host, hasHost = trimBrackets(m.val.s), true
		case "port":
			p, ok := m.val.integer()
			if !ok || p < 1 || p > 65535 {
				return n, false
			}
			n.Port = int(p)
		case "weight":
			w, ok := m.val.integer()
			if !ok || w < 0 || w > maxWeight {
				return n, false
			}
			n.Weight, hasWeight = int(w), true
		case "priority":
			p, ok := m.val.integer()
			if !ok || p < -maxWeight || p > maxWeight {
				return n, false
			}
			n.Priority = int(p)
		case "metadata":
			if m.val.kind != jObject {
				return n, false
			}
			n.Metadata = appendJSON(nil, m.val)
		default:
			return n, false
		}
	}
	if !hasHost || !hasWeight || n.Host == "" || !hostPattern.MatchString(n.Host) {
		return n, false
	}
	return n, true
}

// parseNodeKey splits a map-form key: "host", "host:port", "[v6]",
// "[v6]:port", or a bare IPv6 address (more than one colon, no port).
func parseNodeKey(k string) (Node, bool) {
	var n Node
	host, port := k, ""
	switch {
	case strings.HasPrefix(k, "["):
		end := strings.IndexByte(k, ']')
		if end < 0 {
			return n, false
		}
		host = k[1:end]
		rest := k[end+1:]
		if rest != "" {
			if rest[0] != ':' {
				return n, false
			}
			port = rest[1:]
			if port == "" {
				return n, false
			}
		}
	case strings.Count(k, ":") == 1:
		i := strings.IndexByte(k, ':')
		host, port = k[:i], k[i+1:]
		if port == "" {
			return n, false
		}
	}
	if host == "" || !hostPattern.MatchString(host) {
		return n, false
	}
	if strings.IndexByte(host, ':') >= 0 {
		// only an IPv6 address has colons in its host part
		if a, ok := ParseIP([]byte(host)); !ok || !a.Is6() {
			return n, false
		}
	}
	n.Host = host
	if port != "" {
		p, err := strconv.Atoi(port)
		if err != nil || p < 1 || p > 65535 {
			return n, false
		}
		n.Port = p
	}
	return n, true
}

// validNode reports whether n (normalised, as in Nodes.List) is within
// APISIX's nodes schema.
func validNode(n Node) bool {
	if n.Host == "" || !hostPattern.MatchString(n.Host) {
		return false
	}
	if n.Port < 0 || n.Port > 65535 || n.Weight < 0 || n.Weight > maxWeight {
		return false
	}
	if n.Metadata != nil {
		v, err := parseJSON(n.Metadata)
		if err != nil || v.kind != jObject {
			return false
		}
	}
	return true
}
