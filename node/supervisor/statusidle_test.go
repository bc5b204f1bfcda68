package supervisor

import (
	"context"
	"os"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"coregate/worker/shm"
)

// TestStatusSamplerIdle: the sampler takes no sample while nobody reads
// the status (its Status stays the one it made, past several
// StatusEvery); a read wakes it and gets a sample taken then, whose rates
// start again (IntervalS 0); it samples every StatusEvery while read, and
// stops again once unread for its idle time.
func TestStatusSamplerIdle(t *testing.T) {
	seg, err := shm.CreateMetrics(1, 64)
	if err != nil {
		t.Fatal(err)
	}
	defer seg.Close()
	s := &Supervisor{series: seg, selKind: "plain", epoch: time.Now()}
	s.metrics.setState(0, stateRunning)
	s.metrics.setProc(0, os.Getpid(), new(atomic.Int64))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	st := &statusSampler{s: s, idle: 1500 * time.Millisecond, wake: make(chan chan struct{}), done: ctx.Done()}
	first := make(chan struct{})
	go func() { defer close(done); st.run(ctx, first) }()
	defer func() { cancel(); <-done }()
	<-first

	// Unread from the start: parked, the first Status kept.
	parked := func(want bool, within time.Duration) {
		t.Helper()
		for end := time.Now().Add(within); st.parked.Load() != want; time.Sleep(10 * time.Millisecond) {
			if time.Now().After(end) {
				t.Fatalf("parked %v after %v, want %v", !want, within, want)
			}
		}
	}
	parked(true, 5*time.Second)
	kept := st.latest.Load()
	time.Sleep(2*StatusEvery + StatusEvery/2)
	if st.latest.Load() != kept {
		t.Fatal("the sampler sampled with nobody reading")
	}

	// A read: a sample of now, its rates starting again.
	seg.Node(0).Requests.Add(7)
	got := st.current(ctx)
	if got == kept || got.IntervalS != 0 || got.Workers[0].RequestsTotal != 7 {
		t.Fatalf("a read after idle got %+v, want a new sample (7 requests, interval 0)", got)
	}
	// Read, it samples every StatusEvery: the next sample comes within two.
	for end := time.Now().Add(2 * StatusEvery); st.latest.Load() == got; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatal("no sample within 2 StatusEvery of a read")
		}
	}
	if next := st.current(ctx); next.IntervalS < 0.5 || next.IntervalS > 3 {
		t.Errorf("the sample after a read: interval %v s, want about 1", next.IntervalS)
	}
	// Unread for its idle time: parked again.
	parked(true, 5*time.Second)
}

// BenchmarkStatusSample: a sample of two workers' regions, each with the
// prometheus plugin's series of routes: 35 series a route (two status
// codes, 11 latency buckets of three types).
func BenchmarkStatusSample(b *testing.B) {
	for _, routes := range []int{100, 1000} {
		b.Run(strconv.Itoa(routes)+"routes", func(b *testing.B) {
			const workers = 2
			seg, err := shm.CreateMetrics(workers, routes*35+64)
			if err != nil {
				b.Fatal(err)
			}
			defer seg.Close()
			s := &Supervisor{series: seg, selKind: "plain", epoch: time.Now()}
			for w := range workers {
				s.metrics.setState(w, stateRunning)
				s.metrics.setProc(w, os.Getpid(), new(atomic.Int64))
				r, err := seg.Region(w)
				if err != nil {
					b.Fatal(err)
				}
				for i := range routes {
					id := "route-" + strconv.Itoa(i)
					for _, code := range []string{"200", "404"} {
						r.Slot("apisix_http_status", statusLabels(b, "apisix_http_status", map[string]string{"code": code, "route": id, "node": "n"})...).Add(1)
					}
					for _, le := range []string{"1", "2", "5", "10", "20", "50", "100", "200", "500", "1000", "+Inf"} {
						for _, typ := range []string{"request", "upstream", "apisix"} {
							r.Slot("apisix_http_latency_bucket", append(statusLabels(b, "apisix_http_latency", map[string]string{"type": typ, "route": id}), le)...).Add(1)
						}
					}
				}
			}
			st := &statusSampler{s: s}
			st.step()
			b.ResetTimer()
			for range b.N {
				st.step()
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N)/float64(workers*routes*35)*1000, "ns/series")
		})
	}
}
