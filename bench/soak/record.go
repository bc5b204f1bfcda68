package soak

import (
	"bufio"
	"fmt"
	"os"
	"time"
)

// Kind is one kind of request in the mix.
type Kind uint8

// The kinds of request the load sends.
const (
	KeepAlive Kind = iota // GET /hello on the slot's kept-alive connection
	Fresh                 // GET /hello with Connection: close on a new connection
	Pipelined             // one of four GET /hello written at once
	NotFound              // GET of a path no route serves: 404 expected
	Upload                // POST /hello with a 1 MiB body
	Download              // GET /big: a 1 MiB answer
	numKinds
)

var kindNames = [numKinds]string{"keep-alive", "new connection", "pipelined", "404", "upload 1 MiB", "download 1 MiB"}

func (k Kind) String() string {
	if k < numKinds {
		return kindNames[k]
	}
	return fmt.Sprintf("kind(%d)", k)
}

// Small reports whether the kind moves a small body: its latency goes into
// the p99 that soak judges (a 1 MiB transfer is another scale).
func (k Kind) Small() bool { return k != Upload && k != Download }

// Expect is the status a correct gateway answers a request of this kind.
func (k Kind) Expect() int {
	if k == NotFound {
		return 404
	}
	return 200
}

// Outcome is how a request ended.
type Outcome uint8

// Outcomes of a request.
const (
	OK             Outcome = iota // the expected status, body complete
	BadStatus                     // a complete answer with another status
	ConnectErr                    // the connection was refused or reset before it was made
	ConnectTimeout                // no answer to the connection's SYN within the timeout
	Timeout                       // no complete answer within the timeout
	Broken                        // the connection failed before the answer's head
	Truncated                     // the head came, the body was cut short
	numOutcomes
)

var outcomeNames = [numOutcomes]string{"ok", "status", "connect", "connect timeout", "timeout", "broken", "truncated"}

func (o Outcome) String() string {
	if o < numOutcomes {
		return outcomeNames[o]
	}
	return fmt.Sprintf("outcome(%d)", o)
}

// Record is one request. Times are since the run's epoch.
type Record struct {
	Kind    Kind
	Outcome Outcome
	Status  int           // the answer's status, 0 without one
	Port    uint16        // the client's local port, 0 without a connection
	Dialed  time.Duration // when the request's connection was opened
	Due     time.Duration // when the schedule wanted it sent
	Start   time.Duration // when it was sent
	End     time.Duration // when it completed or failed
}

// Failed reports whether the request did not get the answer it should have.
func (r *Record) Failed() bool { return r.Outcome != OK }

// Latency is the time from when the request was due to its end.
func (r *Record) Latency() time.Duration { return r.End - r.Due }

// Service is the time from when the request was sent to its end: what the
// gateway took, without the wait behind the slot's earlier requests.
func (r *Record) Service() time.Duration { return r.End - r.Start }

// Overlaps reports whether the request was outstanding at some time in
// [from, to].
func (r *Record) Overlaps(from, to time.Duration) bool { return r.Start <= to && r.End >= from }

// WriteRecords writes recs to path as CSV, one request a line, times in
// microseconds since the run's epoch.
func WriteRecords(path string, recs []Record) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	fmt.Fprintln(w, "kind,outcome,status,port,dialed_us,due_us,start_us,end_us")
	for i := range recs {
		r := &recs[i]
		fmt.Fprintf(w, "%s,%s,%d,%d,%d,%d,%d,%d\n", r.Kind, r.Outcome, r.Status, r.Port,
			r.Dialed.Microseconds(), r.Due.Microseconds(), r.Start.Microseconds(), r.End.Microseconds())
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
