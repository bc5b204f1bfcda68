package router

import "fmt"

// Method is a set of HTTP methods, one bit per method, in the order
// lua-resty-radixtree numbers them. The zero Method is the empty set; as a
// route condition it means "any method".
type Method uint16

// The methods APISIX routes accept.
const (
	MethodGET Method = 1 << iota
	MethodPOST
	MethodPUT
	MethodDELETE
	MethodPATCH
	MethodHEAD
	MethodOPTIONS
	MethodCONNECT
	MethodTRACE
	MethodPURGE
)

// ParseMethod returns the bit of the request method m (case-sensitive, as
// HTTP methods are), or 0 for a method APISIX does not know. A request with
// method 0 matches only routes without a methods condition. It does not
// allocate and keeps no reference to m.
func ParseMethod(m []byte) Method {
	switch string(m) {
	case "GET":
		return MethodGET
	case "POST":
		return MethodPOST
	case "PUT":
		return MethodPUT
	case "DELETE":
		return MethodDELETE
	case "PATCH":
		return MethodPATCH
	case "HEAD":
		return MethodHEAD
	case "OPTIONS":
		return MethodOPTIONS
	case "CONNECT":
		return MethodCONNECT
	case "TRACE":
		return MethodTRACE
	case "PURGE":
		return MethodPURGE
	}
	return 0
}

// ParseMethods returns the set of the named methods, as a route's methods
// field lists them. An unknown name is an error wrapping ErrMethod.
func ParseMethods(names []string) (Method, error) {
	var set Method
	for _, n := range names {
		m := ParseMethod([]byte(n))
		if m == 0 {
			return 0, fmt.Errorf("%w: %q", ErrMethod, n)
		}
		set |= m
	}
	return set, nil
}
