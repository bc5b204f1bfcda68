//go:build !race

package httpparse

import "testing"

// The parse path must not allocate once Headers has its capacity.

func TestAllocsParseRequest(t *testing.T) {
	buf := []byte(sampleRequest)
	var p RequestParser
	var r Request
	if err := p.Parse(buf, &r); err != nil {
		t.Fatal(err)
	}
	allocs := testing.AllocsPerRun(100, func() {
		if err := p.Parse(buf, &r); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Errorf("Parse allocates %v times per request", allocs)
	}
}

func TestAllocsParseResponse(t *testing.T) {
	buf := []byte(sampleResponse)
	var p ResponseParser
	var r Response
	if err := p.Parse(buf, &r); err != nil {
		t.Fatal(err)
	}
	allocs := testing.AllocsPerRun(100, func() {
		if err := p.Parse(buf, &r); err != nil {
			t.Fatal(err)
		}
		if ResponseBody(&r, false) != BodyLength {
			t.Fatal("wrong body mode")
		}
	})
	if allocs != 0 {
		t.Errorf("Parse allocates %v times per response", allocs)
	}
}

func TestAllocsChunked(t *testing.T) {
	buf := []byte(sampleChunked)
	var c Chunked
	allocs := testing.AllocsPerRun(100, func() {
		c.Reset()
		for i := 0; i < len(buf); i += 100 { // in pieces
			if _, _, err := c.Scan(buf[i:min(i+100, len(buf))]); err != nil {
				t.Fatal(err)
			}
		}
		if !c.Done() {
			t.Fatal("not done")
		}
	})
	if allocs != 0 {
		t.Errorf("Scan allocates %v times per body", allocs)
	}
}

func TestAllocsIncremental(t *testing.T) {
	req, resp := []byte(sampleRequest), []byte(sampleResponse)
	var (
		rp RequestParser
		r  Request
		sp ResponseParser
		s  Response
	)
	if rp.Parse(req, &r) != nil || sp.Parse(resp, &s) != nil {
		t.Fatal("samples do not parse")
	}
	allocs := testing.AllocsPerRun(10, func() {
		for k := 0; k < len(req); k++ {
			if err := rp.Parse(req[:k], &r); err != ErrNeedMore {
				t.Fatalf("request prefix %d: %v", k, err)
			}
			if err := rp.Parse(req, &r); err != nil {
				t.Fatal(err)
			}
		}
		for k := 0; k < len(sampleResponseHead); k++ {
			if err := sp.Parse(resp[:k], &s); err != ErrNeedMore {
				t.Fatalf("response prefix %d: %v", k, err)
			}
			if err := sp.Parse(resp, &s); err != nil {
				t.Fatal(err)
			}
		}
	})
	if allocs != 0 {
		t.Errorf("split parses allocate %v times", allocs)
	}
}

// FuzzAllocs checks that every input that parses does so without
// allocating, as a request, as a response and as a chunked body.
func FuzzAllocs(f *testing.F) {
	for _, s := range fuzzSeeds() {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var rp RequestParser
		r := Request{Headers: make([]Header, 0, 128)}
		if rp.Parse(data, &r) == nil {
			if a := testing.AllocsPerRun(5, func() { _ = rp.Parse(data, &r) }); a != 0 {
				t.Errorf("request parse allocates %v times", a)
			}
		}
		var sp ResponseParser
		s := Response{Headers: make([]Header, 0, 128)}
		if sp.Parse(data, &s) == nil {
			if a := testing.AllocsPerRun(5, func() { _ = sp.Parse(data, &s) }); a != 0 {
				t.Errorf("response parse allocates %v times", a)
			}
		}
		var c Chunked
		if _, _, err := c.Scan(data); err == nil {
			if a := testing.AllocsPerRun(5, func() { c.Reset(); _, _, _ = c.Scan(data) }); a != 0 {
				t.Errorf("chunked scan allocates %v times", a)
			}
		}
	})
}
