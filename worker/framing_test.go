package worker

import (
	"bufio"
	"bytes"
	"io"
	"math/rand/v2"
	"net/http"
	"testing"
	"time"

	"github.com/panjf2000/gnet/v2"

	"coregate/admin/spec"
	"coregate/internal/framingcheck"
)

// The proxy owns message framing, checked in memory: a worker with one
// catch-all route gets each request on a new client connection, in two
// reads cut where the input says, and what it writes to the pooled
// upstream connection is read by framingcheck's strict origin. The binary's
// own differential test (cmd/coregate TestFramingDifferential) runs the
// same check over sockets; here the worker's code runs in the test's
// process, so a fuzzer's coverage sees it, at tens of thousands of
// requests a second.

// framingSpec is one catch-all route to one node.
func framingSpec(t testing.TB) *spec.Spec {
	t.Helper()
	return testSpec(t, []string{`{"id":"1","nodes":{"127.0.0.1:1980":1}}`}, `{"id":"1","uri":"/*","upstream_id":"1"}`)
}

// traffic delivers what c's peer sent and closes c when the worker asks.
func (h *harness) traffic(c *fakeConn) {
	if c.closed {
		return
	}
	if h.w.OnTraffic(c) == gnet.Close {
		_ = h.loop.Close(c)
	}
	h.loop.runQueued()
}

// framingExchange sends raw on a new client connection, cut into two reads
// at cut (0: one read), answers every message that reaches the origin with
// framingcheck.Answer and checks both sides. It returns false when raw is
// not one whole message and was not sent.
func framingExchange(t testing.TB, h *harness, raw string, cut int) bool {
	t.Helper()
	e, ok := framingcheck.Expect(raw)
	if !ok {
		return false
	}
	if h.up == nil || h.up.closed {
		h.up = nil
		h.seedPools()
		if h.up == nil {
			t.Fatal("no upstream connection parked")
		}
	}
	up := h.up
	up.out = up.out[:0]
	cl := h.newClient()
	in := []byte(e.Raw)
	if cut = cut % (len(in) + 1); cut > 0 {
		cl.in = append(cl.in, in[:cut]...)
		h.traffic(cl)
		in = in[cut:]
	}
	cl.in = append(cl.in, in...)
	h.traffic(cl)
	if e.Refused != 0 && len(cl.out) == 0 && !cl.closed {
		// A head that ends inside a bad field line, or that has a field
		// at odds with one of the first piece: the one-pass parse of the
		// whole input saw it, the head's end will.
		cl.in = append(cl.in, "\r\n\r\n"...)
		h.traffic(cl)
	}
	// The origin reads and answers every whole message; what is left is a
	// message forwarded in part.
	var msgs []framingcheck.Msg
	for len(up.out) > 0 {
		m, n, err := framingcheck.Read(up.out)
		if err != nil {
			t.Fatalf("%v\nsent %q", err, e.Raw)
		}
		if n == 0 {
			break
		}
		up.out = up.out[n:]
		msgs = append(msgs, m)
		up.in = append(up.in, framingcheck.Answer(m)...)
		h.traffic(up)
	}
	// A chunked body is streamed: a chunk size found bad after part of the
	// body went upstream leaves that message unfinished, and the
	// connection it is on must close so that nothing can complete it.
	if len(up.out) > 0 && (e.Refused == 0 || !up.closed) {
		t.Fatalf("origin: %d bytes of an unfinished message %q (connection closed: %v)\nsent %q", len(up.out), up.out, up.closed, e.Raw)
	}
	br := bufio.NewReader(bytes.NewReader(cl.out))
	resp, err := http.ReadResponse(br, nil)
	for err == nil && resp.StatusCode < 200 {
		resp, err = http.ReadResponse(br, nil)
	}
	if err != nil {
		t.Fatalf("no answer (%v) to %q: %q", err, e.Raw, cl.out)
	}
	body, _ := io.ReadAll(resp.Body)
	status := resp.StatusCode
	if !cl.closed {
		_ = h.loop.Close(cl)
		h.loop.runQueued()
	}
	if v := framingcheck.Verdict(e, status, string(body), msgs); v != "" {
		t.Fatal(v)
	}
	return true
}

// TestFramingInMemory runs the seeds and a bounded set of generated and
// mutated requests, each cut at a random place.
func TestFramingInMemory(t *testing.T) {
	t.Parallel()
	h := newHarness(t, framingSpec(t))
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(5, seed))
	sent, refused, cut := 0, 0, 0
	for _, s := range framingcheck.Seeds {
		for c := 0; c <= len(s); c++ {
			if framingExchange(t, h, s, c) {
				sent++
			}
		}
	}
	for i := 0; i < 20000; i++ {
		raw := framingcheck.Input(rng, i)
		if e, ok := framingcheck.Expect(raw); ok && e.Refused != 0 {
			refused++
		}
		c := rng.IntN(len(raw) + 1)
		if framingExchange(t, h, raw, c) {
			sent++
			if c > 0 && c < len(raw) {
				cut++
			}
		}
	}
	t.Logf("%d requests sent, %d of them refused by the parser, %d cut in two", sent, refused, cut)
	if sent < 14000 || refused < 2000 || cut < 10000 {
		t.Errorf("the generator made too few whole requests (%d), refusals (%d) or cuts (%d)", sent, refused, cut)
	}
}

// FuzzFraming runs framingExchange on the fuzzer's requests and cuts.
func FuzzFraming(f *testing.F) {
	for _, s := range framingcheck.Seeds {
		f.Add(s, uint16(0))
		f.Add(s, uint16(len(s)/2))
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for i := 0; i < 20; i++ {
		s := framingcheck.Generate(rng, i)
		f.Add(s, uint16(rng.IntN(len(s)+1)))
	}
	h := newHarness(f, framingSpec(f))
	f.Fuzz(func(t *testing.T, raw string, cut uint16) {
		framingExchange(t, h, raw, int(cut))
	})
}
