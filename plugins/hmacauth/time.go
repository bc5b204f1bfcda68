package hmacauth

import "time"

// parseHTTPTime is nginx's ngx_parse_http_time (ngx.parse_http_time): the
// Unix seconds of an HTTP date in one of its three forms, RFC 1123 ("Sun,
// 06 Nov 1994 08:49:37 GMT"), RFC 850 ("Sunday, 06-Nov-94 08:49:37 GMT")
// and asctime ("Sun Nov  6 08:49:37 1994"), read as nginx reads them: the
// week day and the zone are not checked, a two-digit year before 70 is in
// the 2000s. It does not allocate.
func parseHTTPTime(v []byte) (int64, bool) {
	const (
		rfc822 = iota + 1
		rfc850
		isoc
	)
	// at is v[i], 0 past its end, so that a short value fails a check.
	at := func(i int) byte {
		if i < len(v) {
			return v[i]
		}
		return 0
	}
	digit := func(i int) (int, bool) {
		b := at(i)
		return int(b - '0'), '0' <= b && b <= '9'
	}
	num := func(i, n int) (int, bool) {
		x := 0
		for k := range n {
			d, ok := digit(i + k)
			if !ok {
				return 0, false
			}
			x = x*10 + d
		}
		return x, true
	}
	form := 0
	p := 0
	for ; p < len(v); p++ {
		if v[p] == ',' {
			break
		}
		if v[p] == ' ' {
			form = isoc
			break
		}
	}
	for p++; p < len(v) && v[p] == ' '; p++ {
	}
	if len(v)-p < 18 {
		return 0, false
	}
	day, year := 32, 2038
	var ok bool
	if form != isoc {
		if day, ok = num(p, 2); !ok {
			return 0, false
		}
		p += 2
		switch at(p) {
		case ' ':
			if len(v)-p < 18 {
				return 0, false
			}
			form = rfc822
		case '-':
			form = rfc850
		default:
			return 0, false
		}
		p++
	}
	var month int
	switch at(p) {
	case 'J':
		switch {
		case at(p+1) == 'a':
			month = 0
		case at(p+2) == 'n':
			month = 5
		default:
			month = 6
		}
	case 'F':
		month = 1
	case 'M':
		if at(p+2) == 'r' {
			month = 2
		} else {
			month = 4
		}
	case 'A':
		if at(p+1) == 'p' {
			month = 3
		} else {
			month = 7
		}
	case 'S':
		month = 8
	case 'O':
		month = 9
	case 'N':
		month = 10
	case 'D':
		month = 11
	default:
		return 0, false
	}
	p += 3
	if form == rfc822 && at(p) != ' ' || form == rfc850 && at(p) != '-' {
		return 0, false
	}
	p++
	switch form {
	case rfc822:
		if year, ok = num(p, 4); !ok {
			return 0, false
		}
		p += 4
	case rfc850:
		if year, ok = num(p, 2); !ok {
			return 0, false
		}
		if year < 70 {
			year += 2000
		} else {
			year += 1900
		}
		p += 2
	case isoc:
		if at(p) == ' ' {
			p++
		}
		if day, ok = digit(p); !ok {
			return 0, false
		}
		p++
		if at(p) != ' ' {
			d, ok := digit(p)
			if !ok {
				return 0, false
			}
			day = day*10 + d
			p++
		}
		if len(v)-p < 14 {
			return 0, false
		}
	}
	if at(p) != ' ' {
		return 0, false
	}
	p++
	hour, ok1 := num(p, 2)
	p += 2
	c1 := at(p) == ':'
	p++
	minute, ok2 := num(p, 2)
	p += 2
	c2 := at(p) == ':'
	p++
	sec, ok3 := num(p, 2)
	p += 2
	if !ok1 || !ok2 || !ok3 || !c1 || !c2 {
		return 0, false
	}
	if form == isoc {
		if at(p) != ' ' {
			return 0, false
		}
		if year, ok = num(p+1, 4); !ok {
			return 0, false
		}
	}
	if hour > 23 || minute > 59 || sec > 59 {
		return 0, false
	}
	leap := year%4 == 0 && (year%100 != 0 || year%400 == 0)
	if day == 29 && month == 1 {
		if !leap {
			return 0, false
		}
	} else if day > monthDays[month] {
		return 0, false
	}
	return time.Date(year, time.Month(month+1), day, hour, minute, sec, 0, time.UTC).Unix(), true
}

// monthDays is nginx's mday: February's 29th is checked apart.
var monthDays = [12]int{31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31}
