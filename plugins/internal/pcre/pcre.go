// Package pcre compiles the regular expressions of plugin configurations
// that APISIX compiles with PCRE (ngx.re's "jo"), with Go's regexp: RE2
// syntax, so no lookaround and no backreferences, and matching in time
// linear in the input. A pattern Go refuses is refused with the form of
// APISIX's message (`pcre_compile() failed: missing ) in "^b("`).
//
// Functions are pure and safe for concurrent use; a compiled Regexp is
// too, and its Match on a []byte does not allocate once warm.
package pcre

import (
	"errors"
	"regexp"
	"regexp/syntax"
	"strconv"
	"strings"
)

// pcreText is PCRE's text for the errors of Go's parser that have one.
var pcreText = map[syntax.ErrorCode]string{
	syntax.ErrMissingParen:          "missing )",
	syntax.ErrUnexpectedParen:       "unmatched parentheses",
	syntax.ErrMissingBracket:        "missing terminating ] for character class",
	syntax.ErrMissingRepeatArgument: "nothing to repeat",
	syntax.ErrTrailingBackslash:     `\ at end of pattern`,
	syntax.ErrInvalidCharRange:      "range out of order in character class",
}

// Check reports whether pattern compiles, with APISIX's message when it
// does not: PCRE's text where Go's error has one, Go's otherwise (the
// RE2 syntax Go lacks, such as lookaround, is refused so).
func Check(pattern string) error {
	_, err := regexp.Compile(pattern)
	if err == nil {
		return nil
	}
	text := err.Error()
	var se *syntax.Error
	if errors.As(err, &se) {
		text = string(se.Code)
		if t, ok := pcreText[se.Code]; ok {
			text = t
		}
	}
	return errors.New("pcre_compile() failed: " + text + " in " + strconv.Quote(pattern))
}

// Any compiles the patterns into one expression that matches where any of
// them does, as APISIX joins them with "|" (uri-blocker) or tries each
// (ua-restriction); case-insensitively when fold is set, as a "(?i)"
// prefix. The first pattern that does not compile is Check's error.
func Any(patterns []string, fold bool) (*regexp.Regexp, error) {
	var b strings.Builder
	if fold {
		b.WriteString("(?i)")
	}
	for i, p := range patterns {
		if err := Check(p); err != nil {
			return nil, err
		}
		if i > 0 {
			b.WriteByte('|')
		}
		b.WriteString("(?:")
		b.WriteString(p)
		b.WriteByte(')')
	}
	return regexp.Compile(b.String())
}
