package worker

import "bytes"

// normalizePath returns the path routing matches on: nginx's $uri, that is
// the request path percent-decoded, with "//" merged and "." / ".." segments
// resolved. Most paths need none of that and are returned as they are, with
// no copy; the others are written into dst (reused, grown as needed) and the
// result aliases dst. ok is false for a path nginx answers 400 to: a bad
// percent escape, an encoded NUL, or ".." above the root.
func normalizePath(p []byte, dst []byte) (out []byte, newDst []byte, ok bool) {
	if len(p) == 0 || p[0] != '/' {
		return p, dst, len(p) > 0 && p[0] == '*'
	}
	clean := true
	for i := 0; i < len(p); i++ {
		c := p[i]
		if c == '%' || (c == '/' && i+1 < len(p) && (p[i+1] == '/' || p[i+1] == '.')) {
			clean = false
			break
		}
	}
	if clean {
		return p, dst, true
	}
	// Decode first.
	d := dst[:0]
	for i := 0; i < len(p); i++ {
		c := p[i]
		if c == '%' {
			if i+2 >= len(p) {
				return nil, dst, false
			}
			h, l := unhex(p[i+1]), unhex(p[i+2])
			if h < 0 || l < 0 {
				return nil, dst, false
			}
			c = byte(h<<4 | l)
			if c == 0 {
				return nil, dst, false
			}
			i += 2
		}
		d = append(d, c)
	}
	// Resolve segments in place: w is the write index.
	w := 0
	n := len(d)
	for r := 0; r < n; {
		// d[r] == '/' here.
		for r+1 < n && d[r+1] == '/' {
			r++ // merge slashes
		}
		// segment is d[r+1 : e]
		e := r + 1
		for e < n && d[e] != '/' {
			e++
		}
		seg := d[r+1 : e]
		switch {
		case len(seg) == 1 && seg[0] == '.':
			if e == n {
				d[w] = '/'
				w++
			}
		case len(seg) == 2 && seg[0] == '.' && seg[1] == '.':
			if w == 0 {
				return nil, d, false
			}
			// drop the last written segment
			w--
			for w > 0 && d[w] != '/' {
				w--
			}
			if e == n {
				d[w] = '/'
				w++
			}
		default:
			d[w] = '/'
			w++
			w += copy(d[w:], seg)
		}
		r = e
	}
	if w == 0 {
		d[0] = '/'
		w = 1
	}
	return d[:w], d, true
}

func unhex(c byte) int {
	switch {
	case '0' <= c && c <= '9':
		return int(c - '0')
	case 'a' <= c && c <= 'f':
		return int(c-'a') + 10
	case 'A' <= c && c <= 'F':
		return int(c-'A') + 10
	}
	return -1
}

// servletPath is the path routing matches on when paths are normalised
// like a Java servlet container's (Config.NormalizeURILikeServlet,
// apisix.normalize_uri_like_servlet): p, a path from normalizePath, with
// each segment's path parameters, from its first ';' on, removed, as a
// servlet container removes them before it maps the path (Servlet 6.0
// §3.5.2): "/a;jsessionid=1/b" is "/a/b". A path without ';' is returned
// as it is, with no copy; the others are written into dst (reused, grown
// as needed) and the result aliases dst.
//
// ok is false for the paths APISIX answers 400 to, whose parameters would
// hide a segment a servlet reads otherwise than routing did: a segment
// that is "." or ".." once its parameters are removed ("/a/..;/b", which
// a servlet maps as "/b"), or "%2e" or "%2e%2e" in any case (one decoding
// from a dot segment), or a segment that is empty but for its parameters
// ("/a/;x/b") anywhere but last.
//
// One difference from APISIX: APISIX splits the path with ngx.re.split,
// which drops the empty field after a trailing '/', so that a path with a
// ';' loses its trailing '/' there ("/a;x/" is routed as "/a"), while a
// servlet keeps it. Here it is kept: "/a;x/" is "/a/", which a route
// "/a/*" matches, as the servlet it fronts would.
func servletPath(p, dst []byte) (out []byte, newDst []byte, ok bool) {
	if len(p) == 0 || p[0] != '/' || bytes.IndexByte(p, ';') < 0 {
		return p, dst, true
	}
	d := dst[:0]
	end := len(p) // the segments end here; a trailing '/' is put back last
	if p[end-1] == '/' {
		end--
	}
	for i := 0; i < end; {
		// p[i] == '/', and the segment runs to the next one.
		j := i + 1
		for j < end && p[j] != '/' {
			j++
		}
		seg := p[i+1 : j]
		if k := bytes.IndexByte(seg, ';'); k >= 0 {
			seg = seg[:k]
			if isDotSegment(seg) {
				return nil, d, false
			}
			if len(seg) == 0 {
				if j < end {
					return nil, d, false
				}
				// The last segment, empty: "/a/;x" and "/a/;x/" are "/a/".
				d = append(d, '/')
				return d, d, true
			}
		}
		d = append(d, '/')
		d = append(d, seg...)
		i = j
	}
	if end < len(p) {
		d = append(d, '/')
	}
	return d, d, true
}

// isDotSegment reports whether a segment is ".", "..", "%2e" or "%2e%2e"
// (any case).
func isDotSegment(s []byte) bool {
	switch len(s) {
	case 1:
		return s[0] == '.'
	case 2:
		return s[0] == '.' && s[1] == '.'
	case 3:
		return isPct2e(s)
	case 6:
		return isPct2e(s[:3]) && isPct2e(s[3:])
	}
	return false
}

func isPct2e(s []byte) bool { return s[0] == '%' && s[1] == '2' && s[2]|0x20 == 'e' }

// appendEscapedPath appends p to b with the bytes a request target cannot
// carry as they are percent-encoded, as nginx's ngx_escape_uri escapes a
// URI: controls, space, '"', '#', '%', '<', '>', '?', '\', '^', '`', '{',
// '|', '}', DEL and every byte above 0x7F. Decoded once, the result is p.
func appendEscapedPath(b, p []byte) []byte {
	const hex = "0123456789ABCDEF"
	for _, c := range p {
		if escapeInPath[c] {
			b = append(b, '%', hex[c>>4], hex[c&15])
		} else {
			b = append(b, c)
		}
	}
	return b
}

// escapeInPath marks the bytes appendEscapedPath encodes.
var escapeInPath = func() (t [256]bool) {
	for c := range t {
		t[c] = c <= ' ' || c >= 0x7f
	}
	for _, c := range `"#%<>?\^` + "`{|}" {
		t[c] = true
	}
	return t
}()
