package spec

import (
	"encoding/json"
	"net"
	"regexp"
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
// address) and the key syntax of the map form.
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
// schema (an anyOf of the two forms); the problem's detail names the node.
const errNodes = "object matches none of the required"

// checkNodes checks nodes that passed the schema for what it cannot say:
// the map form's keys are addresses ("host", "host:port", "[v6]:port"),
// which APISIX parses only when it uses them, and weights and priorities
// are bounded so that sums over many nodes cannot overflow. v is the
// nodes value; where, its field path ("upstream.nodes"), prefixes the
// message as the schema's would ("property \"upstream\" validation
// failed: property \"nodes\" validation failed: ").
func checkNodes(v *jval, where []string) *ValidationError {
	var ns Nodes
	p := ns.fromJSON(v)
	if p == nil {
		return nil
	}
	for i := len(where) - 1; i >= 0; i-- {
		p.in(where[i])
	}
	return p.schemaErr()
}

// nodeProblem is a bad node: field is its place under nodes (["host:port"],
// or [i]), detail says what is wrong with which value.
func nodeProblem(field, detail string) *problem {
	return &problem{msg: errNodes, field: field, detail: detail}
}

func (ns *Nodes) fromJSON(v *jval) *problem {
	switch v.kind {
	case jObject:
		list := make([]Node, 0, len(v.obj))
		index := make(map[string]int, len(v.obj))
		for _, m := range v.obj {
			n, why := parseNodeKey(m.key)
			if why != "" {
				return nodeProblem(fieldJoin("", m.key, false), "node "+strconv.Quote(m.key)+": "+why)
			}
			w, ok := m.val.integer()
			if !ok || w < 0 || w > maxWeight {
				return nodeProblem(fieldJoin("", m.key, false), "node "+strconv.Quote(m.key)+": weight "+string(appendJSON(nil, m.val))+" is not an integer from 0 to "+itoa(maxWeight))
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
		for i, e := range v.arr {
			n, field, why := nodeFromJSON(e)
			if why != "" {
				f := "[" + itoa(i) + "]"
				if field != "" {
					f += "." + field
				}
				return nodeProblem(f, "node "+itoa(i+1)+": "+why)
			}
			list = append(list, n)
		}
		*ns = Nodes{List: list}
		return nil
	}
	return &problem{msg: errNodes, detail: "nodes must be an object or an array, not " + v.luaType()}
}

// maxWeight bounds a weight so that sums over many nodes cannot overflow.
const maxWeight = 1 << 30

// nodeFromJSON reads one node object; on failure, field names the member
// at fault and why says what is wrong with its value.
func nodeFromJSON(e *jval) (n Node, field, why string) {
	if e.kind != jObject {
		return n, "", "not an object but a " + e.luaType()
	}
	var hasHost, hasWeight bool
	for _, m := range e.obj {
		val := string(appendJSON(nil, m.val))
		switch m.key {
		case "host":
			if m.val.kind != jString {
				return n, m.key, "host " + val + " is not a string"
			}
			n.Host, hasHost = trimBrackets(m.val.s), true
			if n.Host == "" || !hostPattern.MatchString(n.Host) {
				return n, m.key, "host " + val + " is not a host name or address"
			}
		case "port":
			p, ok := m.val.integer()
			if !ok || p < 1 || p > 65535 {
				return n, m.key, "port " + val + " out of range"
			}
			n.Port = int(p)
		case "weight":
			w, ok := m.val.integer()
			if !ok || w < 0 || w > maxWeight {
				return n, m.key, "weight " + val + " is not an integer from 0 to " + itoa(maxWeight)
			}
			n.Weight, hasWeight = int(w), true
		case "priority":
			p, ok := m.val.integer()
			if !ok || p < -maxWeight || p > maxWeight {
				return n, m.key, "priority " + val + " is not an integer within ±" + itoa(maxWeight)
			}
			n.Priority = int(p)
		case "metadata":
			if m.val.kind != jObject {
				return n, m.key, "metadata " + val + " is not an object"
			}
			n.Metadata = appendJSON(nil, m.val)
		default:
			return n, m.key, "unknown member " + strconv.Quote(m.key)
		}
	}
	switch {
	case !hasHost:
		return n, "host", "host is missing"
	case !hasWeight:
		return n, "weight", "weight is missing"
	}
	return n, "", ""
}

// hostPattern is APISIX's host_def pattern (schema/defs.json), for the
// hosts of nodes written as map keys, which the schema does not look at.
var hostPattern = regexp.MustCompile(`^\*$|^\*?[0-9a-zA-Z-._\[\]:]+$`)

// parseNodeKey splits a map-form key: "host", "host:port", "[v6]",
// "[v6]:port", or a bare IPv6 address (more than one colon, no port). why
// says what is wrong, "" when nothing is.
func parseNodeKey(k string) (n Node, why string) {
	host, port := k, ""
	switch {
	case strings.HasPrefix(k, "["):
		end := strings.IndexByte(k, ']')
		if end < 0 {
			return n, "no ] after the IPv6 address"
		}
		host = k[1:end]
		rest := k[end+1:]
		if rest != "" {
			if rest[0] != ':' {
				return n, "unexpected " + strconv.Quote(rest) + " after the IPv6 address"
			}
			port = rest[1:]
			if port == "" {
				return n, "empty port"
			}
		}
	case strings.Count(k, ":") == 1:
		i := strings.IndexByte(k, ':')
		host, port = k[:i], k[i+1:]
		if port == "" {
			return n, "empty port"
		}
	}
	if host == "" || !hostPattern.MatchString(host) {
		return n, "host " + strconv.Quote(host) + " is not a host name or address"
	}
	if strings.IndexByte(host, ':') >= 0 {
		// only an IPv6 address has colons in its host part
		if a, ok := ParseIP([]byte(host)); !ok || !a.Is6() {
			return n, strconv.Quote(host) + " is not an IPv6 address"
		}
	}
	n.Host = host
	if port != "" {
		p, err := strconv.Atoi(port)
		if err != nil || p < 1 || p > 65535 {
			return n, "port " + port + " out of range"
		}
		n.Port = p
	}
	return n, ""
}
