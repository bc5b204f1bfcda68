package router

import (
	"regexp"
	"strings"
)

// tailPattern returns the check lua-resty-radixtree's compare_param makes on
// a prefix route, or nil when that check always passes for a path that
// already starts with the route's literal prefix (the common "/foo/*" and
// "/foo*" forms). never reports a pattern that does not compile: such a
// route cannot match through its prefix, as in APISIX where ngx.re.match
// fails.
//
// The check, as in lua-resty-radixtree: split the route path on '/' (empty
// trailing items dropped); an item starting with ':' becomes "([^/]+)", one
// starting with '*' becomes "(.*)" (newlines included), others stay as they
// are (regular expression text); join with "/", add "/" when the path ends
// with '/'; the whole request path must match. When no item starts with ':'
// or '*' the check passes.
func tailPattern(pathOrg string, star int) (re *regexp.Regexp, never bool) {
	items := strings.Split(pathOrg, "/")
	for len(items) > 0 && items[len(items)-1] == "" {
		items = items[:len(items)-1]
	}
	named := false
	for _, it := range items {
		if it != "" && (it[0] == ':' || it[0] == '*') {
			named = true
		}
	}
	if !named {
		return nil, false
	}
	// The usual shape: the first '*' opens the last item, and every item
	// before it is ':'-led (matched by its own literal text) or plain text
	// without regexp syntax. Any path with the literal prefix then matches.
	trivial := (star == 0 || pathOrg[star-1] == '/') &&
		strings.IndexByte(pathOrg[star:], '/') < 0
	if trivial {
		for _, it := range strings.Split(pathOrg[:star], "/") {
			if it != "" && it[0] != ':' && regexp.QuoteMeta(it) != it {
				trivial = false
				break
			}
		}
	}
	if trivial {
		return nil, false
	}
	var sb strings.Builder
	sb.WriteString(`^(?:`)
	for i, it := range items {
		if i > 0 {
			sb.WriteString(`/`)
		}
		switch {
		case it != "" && it[0] == ':':
			sb.WriteString(`([^/]+)`)
		case it != "" && it[0] == '*':
			sb.WriteString(`((?s:.)*)`)
		default:
			sb.WriteString(it)
		}
	}
	if strings.HasSuffix(pathOrg, "/") {
		sb.WriteString(`/`)
	}
	sb.WriteString(`)$`)
	re, err := regexp.Compile(sb.String())
	if err != nil {
		return nil, true
	}
	return re, false
}
