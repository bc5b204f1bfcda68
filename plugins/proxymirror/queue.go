package proxymirror

import (
	"bytes"
	"crypto/tls"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// job is one copy of a request on its way to a mirror. Its buffers are
// reused from one copy to the next. id is its number in its queue
// (queue.job), fixed; next chains the jobs of one request that wait for
// its body (Rewrite, Log), on the request's event loop.
type job struct {
	id   uint64
	next *job

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
	all        []*job // every job, by id-1; read-only once made
	client     *http.Client
	// Counts, for tests and a later metric: copies sent (the mirror
	// answered) and failed; copies not sent because the request's body
	// was longer than MaxBody (tooLong) or did not all arrive before the
	// exchange ended (cutShort).
	sent, failed, tooLong, cutShort atomic.Int64
}

// warnedLong: a copy was dropped for a body over MaxBody, and said so in
// the log; the process says it once.
var warnedLong atomic.Bool

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
	q.all = make([]*job, n)
	for i := range q.all {
		q.all[i] = &job{id: uint64(i) + 1}
		q.free <- q.all[i]
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

// sendWith sends j with body, the request's (nil: none); body is copied
// into the job's buffer, which keeps its capacity for the next copy.
func (q *queue) sendWith(j *job, body []byte) {
	j.body = append(j.body[:0], body...)
	j.hasBody = body != nil
	q.send(j)
}

// job returns the job numbered id (job.id): a job of q taken and not
// yet sent or given back.
func (q *queue) job(id uint64) *job { return q.all[id-1] }

// drop gives back a taken job without sending it.
func (q *queue) drop(j *job) {
	j.next = nil
	q.free <- j
}

// unsent gives back a job that waited for a body the copy cannot carry:
// long, over MaxBody (said once in the log), or cut short.
func (q *queue) unsent(j *job, long bool) {
	if !long {
		q.cutShort.Add(1)
	} else if q.tooLong.Add(1); !warnedLong.Swap(true) {
		slog.Warn("proxy-mirror: a request whose body is over 1 MiB is not mirrored; later ones are not said",
			"max_body", MaxBody)
	}
	q.drop(j)
}

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
