package router

import (
	"coregate/httpvar"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// asciiLower lower-cases b's ASCII letters and leaves every other byte,
// as nginx does for $host (strings.ToLower would turn an invalid UTF-8
// byte into three).
func asciiLower(b []byte) string {
	out := []byte(string(b))
	for i, c := range out {
		if 'A' <= c && c <= 'Z' {
			out[i] = c + 'a' - 'A'
		}
	}
	return string(out)
}

// refMatch is a direct, slow transcription of APISIX's routers over
// lua-resty-radixtree: no hashing, no trie, no shortcut for trivial tails;
// with Match's one stated limit, a Host header over maxHost bytes. The
// randomized test checks Match against it.
func refMatch(routes []Route, mode Mode, req *Request) (int, bool) {
	fullHost := asciiLower(req.Host)
	if len(fullHost) > maxHost {
		// Longer than any DNS name and port: it matches only "*" hosts
		// (Match lower-cases the host in a buffer of maxHost bytes).
		fullHost = ""
	}
	host := fullHost
	if strings.HasPrefix(host, "[") {
		if i := strings.IndexByte(host, ']'); i >= 0 {
			host = host[:i+1]
		}
	} else if i := strings.IndexByte(host, ':'); i >= 0 {
		host = host[:i]
	}
	host = strings.TrimSuffix(host, ".")
	hostMatch := func(h string) bool {
		h = strings.ToLower(h)
		s := host
		if strings.Contains(h, ":") {
			s = fullHost
		}
		if strings.HasPrefix(h, "*") {
			return strings.HasSuffix(s, h[1:])
		}
		return s == h
	}
	if mode == URI {
		var sel []Route
		for _, r := range routes {
			if len(r.Hosts) == 0 {
				sel = append(sel, r)
				continue
			}
			for _, h := range r.Hosts {
				if hostMatch(h) {
					sel = append(sel, r)
					break
				}
			}
		}
		return refTable(sel, req)
	}
	// Host tables in lookup order: exact (port hosts, then plain), then
	// wildcards longest first (port ones before plain ones).
	type key struct {
		s          string
		wild, port bool
	}
	groups := map[key][]Route{}
	var keys []key
	var hostless []Route
	for _, r := range routes {
		if len(r.Hosts) == 0 {
			hostless = append(hostless, r)
			continue
		}
		for _, h := range r.Hosts {
			h = strings.ToLower(h)
			k := key{port: strings.Contains(h, ":")}
			if strings.HasPrefix(h, "*") {
				k.wild, h = true, h[1:]
			}
			k.s = h
			if _, ok := groups[k]; !ok {
				keys = append(keys, k)
			}
			groups[k] = append(groups[k], r)
		}
	}
	sort.SliceStable(keys, func(i, j int) bool {
		a, b := keys[i], keys[j]
		if a.wild != b.wild {
			return !a.wild
		}
		if a.port != b.port {
			return a.port
		}
		return len(a.s) > len(b.s)
	})
	for _, k := range keys {
		s := host
		if k.port {
			s = fullHost
		}
		if k.wild && !strings.HasSuffix(s, k.s) || !k.wild && s != k.s {
			continue
		}
		if i, ok := refTable(groups[k], req); ok {
			return i, true
		}
	}
	return refTable(hostless, req)
}

type refEntry struct {
	r       Route
	pathOrg string
	seq     int
}

func refTable(routes []Route, req *Request) (int, bool) {
	path := string(req.Path)
	var exact []refEntry
	prefixes := map[string][]refEntry{}
	seq := 0
	for _, r := range routes {
		for _, p := range r.URIs {
			seq++
			if i := strings.IndexByte(p, '*'); i >= 0 {
				if strings.HasPrefix(path, p[:i]) {
					prefixes[p[:i]] = append(prefixes[p[:i]], refEntry{r, p, seq})
				}
			} else if p == path {
				exact = append(exact, refEntry{r, p, seq})
			}
		}
	}
	order := func(es []refEntry) {
		sort.Slice(es, func(i, j int) bool {
			a, b := es[i], es[j]
			if a.r.Priority != b.r.Priority {
				return a.r.Priority > b.r.Priority
			}
			if len(a.pathOrg) != len(b.pathOrg) {
				return len(a.pathOrg) > len(b.pathOrg)
			}
			return a.seq < b.seq
		})
	}
	order(exact)
	for _, e := range exact {
		if refConds(e.r, req) {
			return e.r.Index, true
		}
	}
	var ps []string
	for p := range prefixes {
		ps = append(ps, p)
	}
	sort.Slice(ps, func(i, j int) bool { return len(ps[i]) > len(ps[j]) })
	for _, p := range ps {
		es := prefixes[p]
		order(es)
		for _, e := range es {
			if refConds(e.r, req) && refTail(e.pathOrg, path) {
				return e.r.Index, true
			}
		}
	}
	return 0, false
}

func refConds(r Route, req *Request) bool {
	if r.Methods != 0 && r.Methods&req.Method == 0 {
		return false
	}
	if len(r.RemoteAddrs) > 0 {
		in := false
		for _, p := range r.RemoteAddrs {
			in = in || req.RemoteAddr.IsValid() && normPrefix(p).Contains(req.RemoteAddr.Unmap())
		}
		if !in {
			return false
		}
	}
	return r.Vars.Eval(req)
}

// refTail is compare_param: always through a regular expression.
func refTail(pathOrg, path string) bool {
	items := strings.Split(pathOrg, "/")
	for len(items) > 0 && items[len(items)-1] == "" {
		items = items[:len(items)-1]
	}
	named := false
	for i, it := range items {
		switch {
		case strings.HasPrefix(it, ":"):
			items[i], named = `([^/]+)`, true
		case strings.HasPrefix(it, "*"):
			items[i], named = `((?s:.)*)`, true
		}
	}
	if !named {
		return true
	}
	pat := strings.Join(items, "/")
	if strings.HasSuffix(pathOrg, "/") {
		pat += "/"
	}
	re, err := regexp.Compile("^(?:" + pat + ")$")
	return err == nil && re.MatchString(path)
}

func TestMatchAgainstReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	segs := []string{"a", "b", "ab", ":id", "a.b", "x+"}
	tails := []string{"", "*", "/*", "*x", "/*/a", "/*/:id", "/"}
	hosts := []string{"foo.com", "*.foo.com", "*foo.com", "*", "a.foo.com", "foo.com:81", "*.com", "*:81", "*foo.com:81", "B.com"}
	reqHosts := []string{"foo.com", "a.foo.com", "x.a.foo.com", "barfoo.com", "foo.com:81", "FOO.com:82",
		"b.com", "com", "", "[::1]:81", "a.foo.com.", "a.foo.com:81"}
	paths := func() string {
		var sb strings.Builder
		for n := rng.IntN(4); n > 0; n-- {
			sb.WriteString("/" + segs[rng.IntN(len(segs))])
		}
		return sb.String()
	}
	methods := []Method{0, MethodGET, MethodPOST, MethodGET | MethodPUT}
	addrs := []netip.Addr{{}, netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("::ffff:10.0.0.2"), netip.MustParseAddr("::1")}
	nets := [][]netip.Prefix{nil, nil, {netip.MustParsePrefix("10.0.0.0/31")}, {netip.MustParsePrefix("::1/128")}}
	exprs := []Expr{{}, {}, vars(t, `[["arg_k","==","1"]]`), vars(t, `[["arg_k","!","==","1"]]`)}

	const rounds, perRound = 300, 40
	matched := 0
	for round := range rounds {
		var routes []Route
		for i := range 1 + rng.IntN(12) {
			r := Route{Index: i, Priority: rng.IntN(3) - 1, Methods: methods[rng.IntN(len(methods))],
				RemoteAddrs: nets[rng.IntN(len(nets))], Vars: exprs[rng.IntN(len(exprs))]}
			for range 1 + rng.IntN(2) {
				r.URIs = append(r.URIs, paths()+tails[rng.IntN(len(tails))])
			}
			for range rng.IntN(3) {
				r.Hosts = append(r.Hosts, hosts[rng.IntN(len(hosts))])
			}
			routes = append(routes, r)
		}
		for _, mode := range []Mode{HostURI, URI} {
			rt := mustBuild(t, routes, mode)
			for range perRound {
				p := paths()
				switch rng.IntN(4) {
				case 0:
					p += "/" + segs[rng.IntN(len(segs))] + "/"
				case 1, 2:
					// A route's own path with its '*' filled in.
					r := routes[rng.IntN(len(routes))]
					fill := []string{"", "q", "q/r", "a/b"}[rng.IntN(4)]
					p = strings.Replace(r.URIs[rng.IntN(len(r.URIs))], "*", fill, 1)
				}
				req := &Request{
					Method:     methods[1+rng.IntN(2)],
					Path:       []byte(p),
					Host:       []byte(reqHosts[rng.IntN(len(reqHosts))]),
					RemoteAddr: addrs[rng.IntN(len(addrs))],
				}
				if rng.IntN(2) == 0 {
					req.Vars = mapVars{{Kind: httpvar.Arg, Name: "k"}: []byte("1")}
				}
				gi, gok := rt.Match(req)
				wi, wok := refMatch(routes, mode, req)
				if wok {
					matched++
				}
				if gi != wi || gok != wok {
					t.Fatalf("round %d mode %d: Match(%s %q host %q addr %v) = %d,%v; reference %d,%v\nroutes: %s",
						round, mode, methodName(req.Method), req.Path, req.Host, req.RemoteAddr, gi, gok, wi, wok, dumpRoutes(routes))
				}
			}
		}
	}
	// Guard the generator: a run where almost nothing matches proves little.
	if total := rounds * perRound * 2; matched < total/5 || matched > total*9/10 {
		t.Errorf("%d of %d probes matched; want a mix", matched, total)
	}
	t.Logf("%d of %d probes matched", matched, rounds*perRound*2)
}

func methodName(m Method) string {
	return map[Method]string{MethodGET: "GET", MethodPOST: "POST"}[m]
}

func dumpRoutes(rs []Route) string {
	var sb strings.Builder
	for _, r := range rs {
		fmt.Fprintf(&sb, "\n  %d uris=%q prio=%d methods=%b hosts=%q addrs=%v vars=%d",
			r.Index, r.URIs, r.Priority, r.Methods, r.Hosts, r.RemoteAddrs, r.Vars.Len())
	}
	return sb.String()
}

// FuzzMatch compares Match with the reference on a fixed, varied route set.
func FuzzMatch(f *testing.F) {
	routes := []Route{
		{Index: 0, URIs: []string{"/a", "/a/*"}, Priority: 1},
		{Index: 1, URIs: []string{"/a*", "*"}},
		{Index: 2, URIs: []string{"/a/*/b", "/c/:id/*"}, Hosts: []string{"*.foo.com", "x.com:81"}},
		{Index: 3, URIs: []string{"/a/b*"}, Hosts: []string{"*"}, Methods: MethodPOST},
		{Index: 4, URIs: []string{"/x.y/*", "/z+/*/:q"}, Hosts: []string{"foo.com", "*com"}},
		{Index: 5, URIs: []string{"/a/"}, Hosts: []string{"*.a.foo.com"}, Priority: -1},
	}
	var rts [2]*Router
	for i, m := range []Mode{HostURI, URI} {
		r, err := Build(routes, m)
		if err != nil {
			f.Fatal(err)
		}
		rts[i] = r
	}
	f.Add("/a/b", "www.foo.com", true)
	f.Add("/c/:id/x", "X.com:81", false)
	f.Add("/z+/q/:q", "foo.com", true)
	f.Fuzz(func(t *testing.T, path, host string, post bool) {
		req := &Request{Method: MethodGET, Path: []byte(path), Host: []byte(host)}
		if post {
			req.Method = MethodPOST
		}
		for i, m := range []Mode{HostURI, URI} {
			gi, gok := rts[i].Match(req)
			wi, wok := refMatch(routes, m, req)
			if gi != wi || gok != wok {
				t.Fatalf("mode %d: Match(%q, host %q) = %d,%v; reference %d,%v", m, path, host, gi, gok, wi, wok)
			}
		}
	})
}
