package soak

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// MixOf returns the kind of the n-th operation of a slot. Out of every 200
// operations: one 1 MiB upload, one 1 MiB download, 10 GETs on a fresh
// connection, 10 batches of four pipelined GETs, 4 GETs of an unknown path
// (404) and 174 kept-alive GETs: a 1 MiB transfer per 228 requests, about
// 9 KiB a request on average.
func MixOf(n int) Kind {
	switch {
	case n%200 == 0:
		return Upload
	case n%200 == 100:
		return Download
	case n%20 == 5:
		return Fresh
	case n%20 == 10:
		return Pipelined
	case n%50 == 17:
		return NotFound
	}
	return KeepAlive
}

// Requests is how many requests an operation of kind k sends.
func Requests(k Kind) int {
	if k == Pipelined {
		return 4
	}
	return 1
}

// Load drives the mix at a gateway from Conns client slots.
type Load struct {
	Addr    string        // the gateway, host:port
	Conns   int           // client slots, each with its own kept-alive connection
	Rate    float64       // requests per second over all slots; 0: closed loop
	Timeout time.Duration // a request not answered within this has failed
	Epoch   time.Time     // Record times count from here
	Sink    chan<- Record // every request, as it ends

	slots []*slot // set by Run, read by Behind
	mu    sync.Mutex
}

// Behind reports how far the fixed-rate schedule is behind: the longest
// time a slot's next request has been due (0 or less when every slot is on
// time, before Run has started, and for a closed loop).
func (l *Load) Behind() time.Duration {
	l.mu.Lock()
	slots := l.slots
	l.mu.Unlock()
	now := time.Now().UnixNano()
	var most int64
	for _, s := range slots {
		if d := s.due.Load(); d != 0 { // 0: a closed loop has no schedule
			most = max(most, now-d)
		}
	}
	return time.Duration(most)
}

// Run drives the load until d has passed or stop is closed, and returns
// once every slot has finished its last request (at most Timeout later).
func (l *Load) Run(d time.Duration, stop <-chan struct{}) {
	until := time.Now().Add(d)
	var wg sync.WaitGroup
	slots := make([]*slot, l.Conns)
	for i := range l.Conns {
		s := &slot{l: l, n: i * 7}
		if l.Rate > 0 {
			s.interval = time.Duration(float64(l.Conns) / l.Rate * float64(time.Second))
			s.next = time.Now().Add(time.Duration(i) * s.interval / time.Duration(l.Conns))
			s.due.Store(s.next.UnixNano())
		}
		slots[i] = s
	}
	l.mu.Lock()
	l.slots = slots
	l.mu.Unlock()
	for _, s := range slots {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.run(until, stop)
		}()
	}
	wg.Wait()
}

// upload is the 1 MiB request body; read-only, shared by every slot.
var upload = bytes.Repeat([]byte("0123456789ABCDEF"), 64<<10)

// slot is one client: a goroutine with one kept-alive connection (and a
// fresh one now and then). Its buffers live as long as the slot.
type slot struct {
	l        *Load
	n        int // operations done, offset per slot so that slots differ
	interval time.Duration
	next     time.Time    // when the next operation is due (fixed rate)
	due      atomic.Int64 // next, in Unix nanoseconds, for Load.Behind

	c      net.Conn
	br     *bufio.Reader
	port   uint16
	dialed time.Duration
}

func (s *slot) since(t time.Time) time.Duration { return t.Sub(s.l.Epoch) }

func (s *slot) run(until time.Time, stop <-chan struct{}) {
	defer s.drop()
	for {
		select {
		case <-stop:
			return
		default:
		}
		now := time.Now()
		due := now
		if s.interval > 0 {
			if s.next.After(now) {
				if s.next.After(until) {
					return
				}
				time.Sleep(s.next.Sub(now))
			}
			due = s.next
		}
		if !due.Before(until) {
			return
		}
		k := MixOf(s.n)
		s.n++
		s.next = s.next.Add(time.Duration(Requests(k)) * s.interval)
		if s.interval > 0 {
			s.due.Store(s.next.UnixNano())
		}
		if k == Fresh {
			s.fresh(due)
		} else {
			s.keepAlive(k, due)
		}
	}
}

func (s *slot) drop() {
	if s.c != nil {
		s.c.Close()
		s.c = nil
	}
}

// dial opens a connection and returns it with its local port.
func (s *slot) dial() (net.Conn, uint16, time.Duration, error) {
	t := time.Now()
	c, err := net.DialTimeout("tcp", s.l.Addr, s.l.Timeout)
	if err != nil {
		return nil, 0, s.since(t), err
	}
	return c, uint16(c.LocalAddr().(*net.TCPAddr).Port), s.since(t), nil
}

var (
	getHello  = []byte("GET /hello HTTP/1.1\r\nHost: soak\r\n\r\n")
	getBig    = []byte("GET " + BigPath + " HTTP/1.1\r\nHost: soak\r\n\r\n")
	getNone   = []byte("GET /no-such-route HTTP/1.1\r\nHost: soak\r\n\r\n")
	getClose  = []byte("GET /hello HTTP/1.1\r\nHost: soak\r\nConnection: close\r\n\r\n")
	postHead  = []byte("POST /hello HTTP/1.1\r\nHost: soak\r\nContent-Type: application/octet-stream\r\nContent-Length: 1048576\r\n\r\n")
	pipeBatch = bytes.Repeat(getHello, 4)
)

// keepAlive sends an operation of kind k on the slot's kept-alive
// connection, opening one if it has none.
func (s *slot) keepAlive(k Kind, due time.Time) {
	start := time.Now()
	rec := Record{Kind: k, Due: s.since(due), Start: s.since(start)}
	if s.c == nil {
		c, port, dialed, err := s.dial()
		if err != nil {
			rec.Outcome, rec.End, rec.Dialed = dialFailure(err), s.since(time.Now()), dialed
			for range Requests(k) {
				s.l.Sink <- rec
			}
			return
		}
		s.c, s.port, s.dialed = c, port, dialed
		s.br = bufio.NewReaderSize(c, 32<<10)
	}
	rec.Port, rec.Dialed = s.port, s.dialed
	_ = s.c.SetDeadline(start.Add(s.l.Timeout))
	var werr error
	switch k {
	case Pipelined:
		_, werr = s.c.Write(pipeBatch)
	case Upload:
		if _, werr = s.c.Write(postHead); werr == nil {
			_, werr = s.c.Write(upload)
		}
	case Download:
		_, werr = s.c.Write(getBig)
	case NotFound:
		_, werr = s.c.Write(getNone)
	default:
		_, werr = s.c.Write(getHello)
	}
	keep := true
	for range Requests(k) {
		r := rec
		if keep {
			keep = readAnswer(s.br, &r)
		} else {
			r.Outcome = Broken // an earlier answer of the batch failed
		}
		if werr != nil && r.Outcome != OK && r.Status == 0 {
			r.Outcome = classify(werr, false)
		}
		r.End = s.since(time.Now())
		s.l.Sink <- r
	}
	if !keep || werr != nil {
		s.drop()
	}
}

// fresh sends one GET with Connection: close on a new connection.
func (s *slot) fresh(due time.Time) {
	start := time.Now()
	rec := Record{Kind: Fresh, Due: s.since(due), Start: s.since(start)}
	c, port, dialed, err := s.dial()
	rec.Dialed = dialed
	if err != nil {
		rec.Outcome, rec.End = dialFailure(err), s.since(time.Now())
		s.l.Sink <- rec
		return
	}
	defer c.Close()
	rec.Port = port
	_ = c.SetDeadline(start.Add(s.l.Timeout))
	if _, err := c.Write(getClose); err != nil {
		rec.Outcome = classify(err, false)
	} else {
		readAnswer(bufio.NewReaderSize(c, 4<<10), &rec)
	}
	rec.End = s.since(time.Now())
	s.l.Sink <- rec
}

// dialFailure names a failed dial: a timeout (a SYN lost or dropped, or
// queued where nothing answers) or a refusal.
func dialFailure(err error) Outcome {
	if classify(err, false) == Timeout {
		return ConnectTimeout
	}
	return ConnectErr
}

// readAnswer reads one response into r (Outcome, Status) and reports
// whether the connection can carry another request.
func readAnswer(br *bufio.Reader, r *Record) bool {
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		r.Outcome = classify(err, false)
		return false
	}
	r.Status = resp.StatusCode
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if err != nil {
		r.Outcome = classify(err, true)
		return false
	}
	if r.Status != r.Kind.Expect() {
		r.Outcome = BadStatus
	}
	return !resp.Close
}

// classify names a read or write error; head tells whether the answer's
// head had arrived.
func classify(err error, head bool) Outcome {
	var ne net.Error
	switch {
	case errors.Is(err, os.ErrDeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return Timeout
	case head:
		return Truncated
	}
	return Broken
}
