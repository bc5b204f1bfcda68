// Package batch is APISIX's batch processor (apisix/utils/batch-processor
// .lua) for the logging plugins: entries pushed from the event loops are
// gathered into batches of up to batch_max_size, a batch going out when
// it is full, when no entry came for inactive_timeout seconds, or when
// its first entry is buffer_duration seconds old; a batch whose sending
// fails is retried max_retry_count times, retry_delay seconds apart, then
// dropped.
//
// Push copies the entry into one of a fixed set of buffers and queues it
// for the processor's goroutine, never blocking and, once the buffers
// have grown to the entries' size, never allocating: when every buffer is
// taken (queued, in a batch, or being sent) the entry is dropped and
// counted. The batches are sent by a second goroutine, one at a time, so
// that a slow or failing destination holds its buffers, not the loops.
//
// A plugin keeps its processors in a Registry, one per configuration,
// shared by the instances built with it (Shared): once none holds it, a
// configuration change having dropped them, the processor sends what it
// gathered and stops, as APISIX's batch-processor-manager removes stale
// processors.
package batch

import (
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// Config is a batch processor's settings, the members APISIX's logging
// plugins take (batch-processor.lua's schema); times are in seconds.
type Config struct {
	Name            string `json:"name"`
	MaxRetryCount   int    `json:"max_retry_count"`
	RetryDelay      int    `json:"retry_delay"`
	BufferDuration  int    `json:"buffer_duration"`
	InactiveTimeout int    `json:"inactive_timeout"`
	BatchMaxSize    int    `json:"batch_max_size"`
}

// Defaults is APISIX's defaults, for the members a configuration leaves
// out: a plugin unmarshals its configuration over a copy of it.
var Defaults = Config{Name: "log buffer", RetryDelay: 1, BufferDuration: 60, InactiveTimeout: 5, BatchMaxSize: 1000}

// SendFunc sends a batch: entries, in the order pushed, valid during the
// call only. It returns nil when all were sent; else the error and how
// many of the first entries were sent nonetheless (APISIX's first_fail
// less one), which are not sent again.
type SendFunc func(entries [][]byte) (sent int, err error)

// Processor is one batch processor. Push is safe for concurrent use;
// Close is called once, by its owner.
type Processor struct {
	cfg   Config
	send  SendFunc
	log   *slog.Logger
	queue chan *[]byte
	free  chan *[]byte
	out   chan []*[]byte
	done  chan struct{}
	wg    sync.WaitGroup
	close sync.Once
	// onClose runs at the end of Close (OnClose).
	onClose func()
	// failedTo counts the entries dropped after their retries too
	// (CountFailed); nil when none.
	failedTo *atomic.Uint64

	dropped atomic.Uint64 // pushed while every buffer was taken
	failed  atomic.Uint64 // dropped after the retries
	sent    atomic.Uint64
}

// New starts a processor of cfg (a plugin starts from Defaults) sending
// with send, with buffers for n entries. log gets its errors
// (slog.Default when nil).
func New(cfg Config, send SendFunc, n int, log *slog.Logger) (*Processor, error) {
	if send == nil || n < 1 {
		return nil, errors.New("batch: a send function and at least one buffer are needed")
	}
	if cfg.BatchMaxSize < 1 || cfg.InactiveTimeout < 1 || cfg.BufferDuration < 1 || cfg.RetryDelay < 0 || cfg.MaxRetryCount < 0 {
		return nil, errors.New("batch: batch_max_size, inactive_timeout and buffer_duration must be at least 1")
	}
	if log == nil {
		log = slog.Default()
	}
	p := &Processor{cfg: cfg, send: send, log: log,
		queue: make(chan *[]byte, n), free: make(chan *[]byte, n),
		out: make(chan []*[]byte, n), done: make(chan struct{})}
	for range n {
		b := []byte(nil)
		p.free <- &b
	}
	open.Add(1)
	p.wg.Add(2)
	go p.gather()
	go p.sendLoop()
	return p, nil
}

// Push queues a copy of entry; false when every buffer is taken and the
// entry is dropped (counted in Dropped). It does not block.
func (p *Processor) Push(entry []byte) bool {
	select {
	case b := <-p.free:
		*b = append((*b)[:0], entry...)
		p.queue <- b // never blocks: as many slots as buffers
		return true
	default:
		p.dropped.Add(1)
		return false
	}
}

// Stats is the count of entries sent, dropped when pushed (no buffer
// free) and dropped after the retries of their batch.
func (p *Processor) Stats() (sent, dropped, failed uint64) {
	return p.sent.Load(), p.dropped.Load(), p.failed.Load()
}

// Close sends what is gathered, as APISIX flushes its buffers when a
// worker exits (without retries' delays), and stops the goroutines. No
// Push may follow it.
func (p *Processor) Close() {
	p.close.Do(func() {
		close(p.done)
		p.wg.Wait()
		if p.onClose != nil {
			p.onClose()
		}
		open.Add(-1)
	})
}

// CountFailed has the entries dropped after their batch's retries counted
// in c too (a metric's slot), from the processor's goroutine: set by the
// processor's maker before the processor is shared.
func (p *Processor) CountFailed(c *atomic.Uint64) { p.failedTo = c }

// OnClose has f run at the end of Close, once the last batch was sent
// (an HTTP sender's idle connections closed): set by the processor's
// maker before the processor is shared.
func (p *Processor) OnClose(f func()) { p.onClose = f }

func seconds(n int) time.Duration { return time.Duration(n) * time.Second }

// gather builds the batches and hands them to sendLoop.
func (p *Processor) gather() {
	defer p.wg.Done()
	defer close(p.out)
	var (
		cur      []*[]byte
		first    time.Time
		inactive = time.NewTimer(time.Hour)
		duration = time.NewTimer(time.Hour)
	)
	inactive.Stop()
	duration.Stop()
	flush := func() {
		if len(cur) > 0 {
			p.out <- cur
			cur = nil
		}
		inactive.Stop()
		duration.Stop()
	}
	for {
		select {
		case b := <-p.queue:
			cur = append(cur, b)
			if len(cur) == 1 {
				first = time.Now()
				duration.Reset(seconds(p.cfg.BufferDuration))
			}
			if len(cur) >= p.cfg.BatchMaxSize {
				flush()
				continue
			}
			inactive.Reset(seconds(p.cfg.InactiveTimeout))
		case <-inactive.C:
			flush()
		case <-duration.C:
			if len(cur) > 0 && time.Since(first) >= seconds(p.cfg.BufferDuration) {
				flush()
			}
		case <-p.done:
			for {
				select {
				case b := <-p.queue:
					cur = append(cur, b)
					if len(cur) >= p.cfg.BatchMaxSize {
						flush()
					}
					continue
				default:
				}
				break
			}
			flush()
			return
		}
	}
}

// sendLoop sends the batches one at a time, with their retries.
func (p *Processor) sendLoop() {
	defer p.wg.Done()
	entries := make([][]byte, 0, p.cfg.BatchMaxSize)
	for batch := range p.out {
		rest := batch
		for retry := 0; ; retry++ {
			entries = entries[:0]
			for _, b := range rest {
				entries = append(entries, *b)
			}
			sent, err := p.send(entries)
			if err == nil {
				p.sent.Add(uint64(len(rest)))
				break
			}
			sent = min(max(sent, 0), len(rest))
			p.sent.Add(uint64(sent))
			rest = rest[sent:]
			if retry >= p.cfg.MaxRetryCount || len(rest) == 0 {
				if len(rest) > 0 {
					p.failed.Add(uint64(len(rest)))
					if p.failedTo != nil {
						p.failedTo.Add(uint64(len(rest)))
					}
					p.log.Error("Batch Processor["+p.cfg.Name+"] exceeded the max_retry_count, dropping the entries",
						"entries", len(rest), "err", err)
				}
				break
			}
			p.log.Error("Batch Processor["+p.cfg.Name+"] failed to process entries", "entries", len(rest), "err", err)
			select {
			case <-time.After(seconds(p.cfg.RetryDelay)):
			case <-p.done:
				// Closing: the rest of the retries without their delays.
			}
		}
		for _, b := range batch {
			p.free <- b
		}
	}
}
