package proxymirror

import (
	"bytes"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// job is one copy of a request on its way to a mirror. Its buffers are
// reused from one copy to the next.
type job struct {
	method, url, host []byte
	// fields are the request's fields, name and value each followed by
	// a NUL (which a field never holds).
	fields []byte
	// body is the request's body, de-chunked, when hasBody; sent with
	// its Content-Length.
	body    []byte
	hasBody bool
}

// queue is the process's copies in flight: a fixed set of jobs, filled on
// the event loops (take, send) and sent by a few goroutines, which give
// them back once the mirror answered or failed. Every method is safe for
// concurrent use, and take and send neither block nor allocate: past
// maxInFlight copies in flight, the next ones are dropped.
type queue struct {
	free, work chan *job
	client     *http.Client
	// Counts, for tests and a later metric: copies sent (the mirror
	// answered) and failed.
	sent, failed atomic.Int64
}

// The process's senders: how many copies may be in flight, the
// goroutines that send them, and how long one may take (APISIX's
// proxy_mirror_timeouts' defaults: 60 s to connect, send and read).
const (
	maxInFlight   = 1024
	numSenders    = 8
	mirrorTimeout = 60 * time.Second
	// maxDrain is how much of a mirror's answer is read, so that its
	// connection can be reused; the rest closes it.
	maxDrain = 64 << 10
	// maxKeptBody is the largest body buffer a job keeps for the next
	// copy: 1024 idle jobs hold 64 MiB at most.
	maxKeptBody = 64 << 10
)

var (
	processOnce  sync.Once
	processQueue *queue
)

// defaultQueue is the process's queue, its senders started on first use.
func defaultQueue() *queue {
	processOnce.Do(func() { processQueue = newQueue(maxInFlight, numSenders) })
	return processQueue
}

// newQueue makes a queue of n jobs and starts senders goroutines (none:
// the caller takes work itself, as tests do).
func newQueue(n, senders int) *queue {
	q := &queue{
		free: make(chan *job, n),
		work: make(chan *job, n),
		client: &http.Client{
			Transport: &http.Transport{
				DialContext:           (&net.Dialer{Timeout: mirrorTimeout}).DialContext,
				ResponseHeaderTimeout: mirrorTimeout,
				MaxIdleConnsPerHost:   senders,
				IdleConnTimeout:       60 * time.Second,
				DisableCompression:    true,
				// nginx's proxy_pass to an https mirror does not verify
				// it (proxy_ssl_verify off), nor do the copies.
				TLSClientConfig: &tls.Config{InsecureSkipVerify: true},
			},
			Timeout: 3 * mirrorTimeout,
			CheckRedirect: func(*http.Request, []*http.Request) error {
				return http.ErrUseLastResponse
			},
		},
	}
	for range n {
		q.free <- &job{}
	}
	for range senders {
		go q.run()
	}
	return q
}

// take returns an idle job, or nil when all are in flight.
func (q *queue) take() *job {
	select {
	case j := <-q.free:
		return j
	default:
		return nil
	}
}

// send hands a filled job to the senders. It never blocks: work holds
// every job there is.
func (q *queue) send(j *job) { q.work <- j }

// run is one sender: it sends jobs until the process ends.
func (q *queue) run() {
	for j := range q.work {
		q.do(j)
		if cap(j.body) > maxKeptBody {
			j.body = nil // a large body's buffer is not held by an idle job
		}
		q.free <- j
	}
}

// do sends one copy and reads the mirror's answer, which goes nowhere.
func (q *queue) do(j *job) {
	var body io.Reader
	if j.hasBody {
		body = bytes.NewReader(j.body)
	}
	req, err := http.NewRequest(string(j.method), string(j.url), body)
	if err != nil {
		q.failed.Add(1)
		return
	}
	req.Host = string(j.host)
	for rest := j.fields; len(rest) > 0; {
		i := bytes.IndexByte(rest, 0)
		if i < 0 {
			break
		}
		k := bytes.IndexByte(rest[i+1:], 0)
		if k < 0 {
			break
		}
		req.Header.Add(string(rest[:i]), string(rest[i+1:i+1+k]))
		rest = rest[i+1+k+1:]
	}
	if req.Header.Get("User-Agent") == "" {
		req.Header.Set("User-Agent", "") // none, rather than Go's
	}
	resp, err := q.client.Do(req)
	if err != nil {
		q.failed.Add(1)
		return
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxDrain))
	_ = resp.Body.Close()
	q.sent.Add(1)
}
