// Package resub is ngx.re.sub as APISIX's regex_uri uses it
// (proxy-rewrite's and redirect's): a pattern and a replacement template
// ($N, ${N}, $$), the first match of the pattern in a subject replaced by
// the template, matched and expanded without allocating in steady state.
package resub

import (
	"errors"
	"regexp"
	"strconv"
)

// ErrTemplate is ngx.re.sub's answer to a template it cannot read.
var ErrTemplate = errors.New("failed to compile the replacement template")

// seg is one piece of a template: literal bytes, or a group's text when
// group >= 0.
type seg struct {
	lit   []byte
	group int
}

// parseTemplate reads a replacement template as ngx.re.sub does.
func parseTemplate(t string) ([]seg, error) {
	var segs []seg
	var lit []byte
	flush := func() {
		if len(lit) > 0 {
			segs = append(segs, seg{lit: lit, group: -1})
			lit = nil
		}
	}
	for i := 0; i < len(t); i++ {
		if t[i] != '$' {
			lit = append(lit, t[i])
			continue
		}
		i++
		switch {
		case i < len(t) && t[i] == '$':
			lit = append(lit, '$')
		case i < len(t) && isDigit(t[i]):
			j := i
			for j < len(t) && isDigit(t[j]) {
				j++
			}
			n, err := strconv.Atoi(t[i:j])
			if err != nil {
				return nil, ErrTemplate
			}
			flush()
			segs = append(segs, seg{group: n})
			i = j - 1
		case i < len(t) && t[i] == '{':
			j := i + 1
			for j < len(t) && isDigit(t[j]) {
				j++
			}
			if j == i+1 || j >= len(t) || t[j] != '}' {
				return nil, ErrTemplate
			}
			n, err := strconv.Atoi(t[i+1 : j])
			if err != nil {
				return nil, ErrTemplate
			}
			flush()
			segs = append(segs, seg{group: n})
			i = j
		default:
			return nil, ErrTemplate
		}
	}
	flush()
	return segs, nil
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// Group is the text of capture n of a match of s (caps as regexp's
// submatch indices); empty when the pattern has no such group or it did
// not take part, as in ngx.re.sub and ngx.re.match.
func Group(s []byte, caps []int, n int) []byte {
	if n < 0 || 2*n+1 >= len(caps) || caps[2*n] < 0 {
		return nil
	}
	return s[caps[2*n]:caps[2*n+1]]
}

// expand appends ngx.re.sub's result for a match of s: s before the
// match, the template, s after it.
func expand(dst, s []byte, caps []int, segs []seg) []byte {
	dst = append(dst, s[:caps[0]]...)
	for _, g := range segs {
		if g.group < 0 {
			dst = append(dst, g.lit...)
		} else {
			dst = append(dst, Group(s, caps, g.group)...)
		}
	}
	return append(dst, s[caps[1]:]...)
}

// Rule is one pattern and its template, compiled. Match keeps scratch
// space and a cache of matches in the Rule: a Rule belongs to one plugin
// instance, so to one event loop, and is not safe for concurrent use.
type Rule struct {
	re    *regexp.Regexp
	lit   *literalRE // non-nil: matched without re
	tmpl  []seg
	cache map[string][]int // see Match
	caps  [4]int           // lit's match
}

// Compile compiles pattern, which must be one Go's RE2 compiles (APISIX's
// PCRE has lookaround and backreferences, RE2 not), and template. The
// error says which of the two is at fault, without naming them: callers
// wrap it in their message.
func Compile(pattern, template string) (*Rule, error) {
	re, err := regexp.Compile(pattern)
	if err != nil {
		return nil, errors.New("failed to compile the regex (RE2 syntax: no lookaround, no backreferences): " + err.Error())
	}
	tmpl, err := parseTemplate(template)
	if err != nil {
		return nil, err
	}
	r := &Rule{re: re, tmpl: tmpl}
	if l, ok := compileLiteral(pattern); ok {
		r.lit = l
	}
	return r, nil
}

// NumSubexp is the number of the pattern's capture groups.
func (r *Rule) NumSubexp() int { return r.re.NumSubexp() }

// Bounds of a rule's cache of matches: the subjects it holds, and the
// longest it holds.
const (
	MaxCached    = 256
	MaxCachedLen = 256
)

// Match is the submatch indices of the first match of the pattern in src,
// nil when it does not match; they are valid until the next Match and
// must not be written. A pattern of the shapes literalRE knows (^/api/(.*),
// ^/hello$…) is matched without regexp. For others, regexp allocates the
// indices of a match (a pattern that does not match costs nothing), so
// the matches of short subjects are kept, up to MaxCached of them: a
// subject seen before costs a map lookup and no allocation.
func (r *Rule) Match(src []byte) []int {
	if r.lit != nil {
		n, ok := r.lit.match(src, &r.caps)
		if !ok {
			return nil
		}
		return r.caps[:n]
	}
	if caps, ok := r.cache[string(src)]; ok {
		return caps
	}
	caps := r.re.FindSubmatchIndex(src)
	if caps != nil && len(src) <= MaxCachedLen && len(r.cache) < MaxCached {
		if r.cache == nil {
			r.cache = make(map[string][]int, MaxCached)
		}
		r.cache[string(src)] = caps
	}
	return caps
}

// Expand appends to dst ngx.re.sub's result for the match caps (as Match
// returned it) of s: s before the match, the template with the groups'
// text, s after it.
func (r *Rule) Expand(dst, s []byte, caps []int) []byte {
	return expand(dst, s, caps, r.tmpl)
}

// Template is a replacement template alone, for a caller that runs the
// pattern itself (response-rewrite's filters, which replace every match
// of a body). It is only read once parsed: safe for concurrent use.
type Template struct{ segs []seg }

// ParseTemplate reads t as ngx.re.sub reads its replacement; the error is
// ErrTemplate.
func ParseTemplate(t string) (Template, error) {
	segs, err := parseTemplate(t)
	return Template{segs}, err
}

// Append appends the template's text for the match caps of s (regexp's
// submatch indices): its literals and the groups' text, without the
// subject around the match.
func (t Template) Append(dst, s []byte, caps []int) []byte {
	for _, g := range t.segs {
		if g.group < 0 {
			dst = append(dst, g.lit...)
		} else {
			dst = append(dst, Group(s, caps, g.group)...)
		}
	}
	return dst
}

// Literal returns the template's text when it refers to no group, so
// that every match is replaced with the same bytes; ok is false when it
// refers to one. The text is the template's: read only.
func (t Template) Literal() (text []byte, ok bool) {
	switch len(t.segs) {
	case 0:
		return []byte{}, true
	case 1:
		if g := t.segs[0]; g.group < 0 {
			return g.lit, true
		}
		return nil, false
	}
	for _, g := range t.segs {
		if g.group >= 0 {
			return nil, false
		}
		text = append(text, g.lit...)
	}
	return text, true
}
