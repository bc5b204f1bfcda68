package accesslog

import (
	"strconv"
	"time"
)

// Clock keeps the text of the current second for $time_local and
// $time_iso8601, in the local time zone as nginx writes them, rebuilt when
// the second changes. It belongs to one goroutine (the worker's loop).
type Clock struct {
	// Loc is the zone the text is written in; nil means time.Local, read
	// once per second.
	Loc        *time.Location
	sec        int64
	local, iso []byte // valid until the second changes
}

func (c *Clock) at(unixNano int64) {
	sec := unixNano / int64(time.Second)
	if c.local != nil && sec == c.sec {
		return
	}
	c.sec = sec
	loc := c.Loc
	if loc == nil {
		loc = time.Local
	}
	t := time.Unix(sec, 0).In(loc)
	c.local = t.AppendFormat(c.local[:0], "02/Jan/2006:15:04:05 -0700")
	c.iso = t.AppendFormat(c.iso[:0], "2006-01-02T15:04:05-07:00")
}

// AppendTimeLocal appends $time_local for the wall-clock time unixNano.
func (c *Clock) AppendTimeLocal(b []byte, unixNano int64) []byte {
	c.at(unixNano)
	return append(b, c.local...)
}

// AppendISO8601 appends $time_iso8601 for the wall-clock time unixNano.
func (c *Clock) AppendISO8601(b []byte, unixNano int64) []byte {
	c.at(unixNano)
	return append(b, c.iso...)
}

// AppendMillis appends nanoseconds as seconds with three decimals, as
// nginx writes $msec and $request_time (a negative value as 0.000).
func AppendMillis(b []byte, ns int64) []byte {
	if ns < 0 {
		ns = 0
	}
	ms := ns / int64(time.Millisecond)
	b = strconv.AppendInt(b, ms/1000, 10)
	frac := ms % 1000
	return append(b, '.', byte('0'+frac/100), byte('0'+frac/10%10), byte('0'+frac%10))
}
