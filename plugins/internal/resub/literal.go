package resub

import (
	"bytes"
	"regexp/syntax"
)

// literalRE is a regex_uri pattern simple enough to match without regexp,
// and so without allocating: an optional ^, a literal, then, when
// anchored, one greedy capture of .* or .+ followed by a literal, and an
// optional $ (^/api/(.*), ^/hello$, ^/v1/(.+)/info$, /old). It matches as
// PCRE does: '.' is any byte but '\n', and '$' matches at the end or
// before a final '\n'.
type literalRE struct {
	anchored bool
	prefix   []byte
	group    bool // capture 1: .* (or .+ with plus)
	plus     bool
	suffix   []byte
	end      bool
}

// compileLiteral recognises the shapes literalRE matches; ok is false for
// any other pattern.
func compileLiteral(pattern string) (l *literalRE, ok bool) {
	re, err := syntax.Parse(pattern, syntax.Perl)
	if err != nil {
		return nil, false
	}
	subs := []*syntax.Regexp{re}
	if re.Op == syntax.OpConcat {
		subs = re.Sub
	}
	l = &literalRE{}
	i := 0
	next := func(op syntax.Op) *syntax.Regexp {
		if i < len(subs) && subs[i].Op == op {
			i++
			return subs[i-1]
		}
		return nil
	}
	literal := func() []byte {
		if i < len(subs) && subs[i].Op == syntax.OpLiteral && subs[i].Flags&syntax.FoldCase == 0 {
			i++
			return []byte(string(subs[i-1].Rune))
		}
		return nil
	}
	l.anchored = next(syntax.OpBeginText) != nil
	l.prefix = literal()
	if c := next(syntax.OpCapture); c != nil {
		rep := c.Sub[0]
		if c.Cap != 1 || (rep.Op != syntax.OpStar && rep.Op != syntax.OpPlus) || rep.Flags&syntax.NonGreedy != 0 ||
			rep.Sub[0].Op != syntax.OpAnyCharNotNL {
			return nil, false
		}
		l.group, l.plus = true, rep.Op == syntax.OpPlus
		l.suffix = literal()
	}
	l.end = next(syntax.OpEndText) != nil
	if i != len(subs) || (l.group && !l.anchored) || (!l.group && len(l.prefix) == 0) {
		return nil, false
	}
	return l, true
}

// atEnd reports whether a match may end at f in s: anywhere without $,
// else at the end or before a final '\n'.
func (l *literalRE) atEnd(s []byte, f int) bool {
	return !l.end || f == len(s) || (f == len(s)-1 && s[f] == '\n')
}

// match finds the leftmost match in s, greedy, into caps (the whole
// match, then group 1 when the pattern has it); ok is false when there is
// none.
func (l *literalRE) match(s []byte, caps *[4]int) (n int, ok bool) {
	if !l.anchored {
		// A literal: its leftmost occurrence where $ allows one.
		if !l.end {
			p := bytes.Index(s, l.prefix)
			if p < 0 {
				return 0, false
			}
			caps[0], caps[1] = p, p+len(l.prefix)
			return 2, true
		}
		if p := len(s) - 1 - len(l.prefix); p >= 0 && s[len(s)-1] == '\n' && bytes.Equal(s[p:len(s)-1], l.prefix) {
			caps[0], caps[1] = p, len(s)-1
			return 2, true
		}
		if bytes.HasSuffix(s, l.prefix) {
			caps[0], caps[1] = len(s)-len(l.prefix), len(s)
			return 2, true
		}
		return 0, false
	}
	if !bytes.HasPrefix(s, l.prefix) {
		return 0, false
	}
	q := len(l.prefix)
	if !l.group {
		if !l.atEnd(s, q) {
			return 0, false
		}
		caps[0], caps[1] = 0, q
		return 2, true
	}
	maxE := len(s)
	if nl := bytes.IndexByte(s[q:], '\n'); nl >= 0 {
		maxE = q + nl
	}
	minE := q
	if l.plus {
		minE++
	}
	for e := maxE; e >= minE; e-- {
		if bytes.HasPrefix(s[e:], l.suffix) && l.atEnd(s, e+len(l.suffix)) {
			caps[0], caps[1], caps[2], caps[3] = 0, e+len(l.suffix), q, e
			return 4, true
		}
	}
	return 0, false
}
