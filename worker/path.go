package worker

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
