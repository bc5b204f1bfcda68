package nodeconf

import (
	"math"
	"strconv"
	"time"
)

// nginx time units, largest first; "ms" before "m" when reading.
var nginxUnits = []struct {
	name string
	d    time.Duration
}{
	{"y", 365 * 24 * time.Hour},
	{"M", 30 * 24 * time.Hour},
	{"w", 7 * 24 * time.Hour},
	{"d", 24 * time.Hour},
	{"h", time.Hour},
	{"m", time.Minute},
	{"s", time.Second},
	{"ms", time.Millisecond},
}

// ParseNginxDuration reads nginx's time syntax: integers with the units ms,
// s, m, h, d, w, M (30 days) and y (365 days), largest first, optionally
// separated by spaces ("1h 30m", "90s"); a bare number is seconds. Errors
// match ErrNodeConfig.
func ParseNginxDuration(s string) (time.Duration, error) {
	bad := func() (time.Duration, error) {
		return 0, &NodeConfigError{Msg: "invalid time " + strconv.Quote(s) + ` (want nginx time syntax, e.g. "60s", "500ms", "1h 30m")`}
	}
	var total time.Duration
	last := -1 // index into nginxUnits of the previous part's unit
	i, parts := 0, 0
	for {
		for i < len(s) && s[i] == ' ' {
			i++
		}
		if i == len(s) {
			break
		}
		start := i
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		if i == start {
			return bad()
		}
		n, err := strconv.ParseInt(s[start:i], 10, 64)
		if err != nil {
			return bad()
		}
		unit := 6 // seconds when no unit follows
		switch {
		case i+1 < len(s) && s[i] == 'm' && s[i+1] == 's':
			unit, i = 7, i+2
		case i < len(s) && s[i] != ' ':
			unit = -1
			for u := range nginxUnits[:7] {
				if nginxUnits[u].name[0] == s[i] {
					unit = u
				}
			}
			if unit < 0 {
				return bad()
			}
			i++
		default:
			if parts > 0 {
				return bad() // a bare number only on its own
			}
		}
		if unit <= last {
			return bad()
		}
		last = unit
		d := nginxUnits[unit].d
		if n > math.MaxInt64/int64(d) || total > math.MaxInt64-time.Duration(n)*d {
			return bad()
		}
		total += time.Duration(n) * d
		parts++
	}
	if parts == 0 {
		return bad()
	}
	return total, nil
}

// ParseNginxSize reads nginx's size syntax: an integer with an optional k,
// m or g suffix (either case), in bytes; "0" is 0. Errors match
// ErrNodeConfig.
func ParseNginxSize(s string) (int64, error) {
	bad := func() (int64, error) {
		return 0, &NodeConfigError{Msg: "invalid size " + strconv.Quote(s) + ` (want nginx size syntax, e.g. "0", "512k", "1m")`}
	}
	if s == "" {
		return bad()
	}
	mult := int64(1)
	num := s
	switch s[len(s)-1] {
	case 'k', 'K':
		mult, num = 1<<10, s[:len(s)-1]
	case 'm', 'M':
		mult, num = 1<<20, s[:len(s)-1]
	case 'g', 'G':
		mult, num = 1<<30, s[:len(s)-1]
	}
	if num == "" {
		return bad()
	}
	for _, c := range num {
		if c < '0' || c > '9' {
			return bad()
		}
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n > math.MaxInt64/mult {
		return bad()
	}
	return n * mult, nil
}
