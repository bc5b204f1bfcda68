// Package framingcheck is the model the gateway's framing tests check
// forwarded requests against: what the gateway's parser makes of a request
// (Expect), how a strict origin reads what reached it (Read), and whether
// the two agree (Check). The proxy owns message framing: what goes
// upstream is written from what the gateway parsed, so every request the
// gateway accepts must reach the origin as exactly one message with the
// method, target, framing and body the parse gave, without the fields
// Connection names, and a request it refuses must not reach it at all.
//
// It also has the requests a differential run starts from (Seeds), a
// generator of valid requests with random framing (Generate) and a
// mutator that edits the places that matter to framing (Mutate).
package framingcheck

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"

	"coregate/httpparse"
)

// Msg is one request as the strict origin read it.
type Msg struct {
	Method, Target string
	CLs            []string // Content-Length field values
	TEs            []string // Transfer-Encoding field values
	Headers        []string // lower-case field names, in order
	Body           string   // decoded body
	Raw            string   // the message's bytes
}

// Read parses the first whole message in buf with httpparse's request
// parser and chunked decoder and cross-checks it with net/http. n is the
// message's length, 0 when buf holds only part of one; err says what is
// wrong with bytes that can never make a valid message.
func Read(buf []byte) (m Msg, n int, err error) {
	var p httpparse.RequestParser
	var req httpparse.Request
	if err := p.Parse(buf, &req); err == httpparse.ErrNeedMore {
		return m, 0, nil
	} else if err != nil {
		return m, 0, fmt.Errorf("origin: unparsable head (%v): %q", err, buf)
	}
	m = Msg{Method: string(req.Method), Target: string(req.Target)}
	for _, h := range req.Headers {
		m.Headers = append(m.Headers, strings.ToLower(string(h.Name)))
		switch h.ID {
		case httpparse.HdrContentLength:
			m.CLs = append(m.CLs, string(h.Value))
		case httpparse.HdrTransferEncoding:
			m.TEs = append(m.TEs, string(h.Value))
		}
	}
	n = req.HeadLen
	switch {
	case req.Chunked:
		body, end, err := dechunk(buf, n)
		if err != nil {
			return m, 0, fmt.Errorf("origin: bad chunked body (%v): %q", err, buf)
		}
		if end < 0 {
			return m, 0, nil // the body is still on its way
		}
		m.Body, n = string(body), end
	case req.ContentLength > 0:
		if int64(len(buf)-n) < req.ContentLength {
			return m, 0, nil
		}
		m.Body = string(buf[n : n+int(req.ContentLength)])
		n += int(req.ContentLength)
	}
	m.Raw = string(buf[:n])
	// net/http reads the same message the same way.
	hr, err := http.ReadRequest(bufio.NewReader(strings.NewReader(m.Raw)))
	if err != nil {
		return m, 0, fmt.Errorf("net/http rejects the forwarded message (%v): %q", err, m.Raw)
	}
	hb, _ := io.ReadAll(hr.Body)
	if hr.Method != m.Method || string(hb) != m.Body {
		return m, 0, fmt.Errorf("net/http reads %s with %d body bytes, we read %s with %d: %q", hr.Method, len(hb), m.Method, len(m.Body), m.Raw)
	}
	return m, n, nil
}

// dechunk decodes the chunked body that starts at buf[n:]. end is the
// offset just past it, -1 when buf ends first.
func dechunk(buf []byte, n int) (body []byte, end int, err error) {
	var c httpparse.Chunked
	for n < len(buf) {
		k, data, last, err := c.Decode(buf[n:])
		if err != nil {
			return nil, 0, err
		}
		body = append(body, data...)
		n += k
		if last {
			return body, n, nil
		}
	}
	return nil, -1, nil
}

// Answer is the origin's response to m: 200 with the request-target as
// the body, so that the client can tell which message an answer is for.
func Answer(m Msg) string {
	return "HTTP/1.1 200 OK\r\nContent-Length: " + strconv.Itoa(len(m.Target)) + "\r\n\r\n" + m.Target
}

// Expectation is what the gateway's parser makes of a request: refused,
// or the message the origin must read.
type Expectation struct {
	Refused int // the status of a request the parser refuses, else 0
	Method  string
	Target  string // origin-form, as forwarded
	CL      int64  // -1: none
	Chunked bool
	Body    string
	Hop     bool   // the request names X-Hop in Connection
	Raw     string // the bytes to send: the first message only
}

// Expect parses raw as the gateway would. ok is false for input that does
// not make one whole message (nothing to send).
func Expect(raw string) (e Expectation, ok bool) {
	var p httpparse.RequestParser
	var r httpparse.Request
	buf := []byte(raw)
	err := p.Parse(buf, &r)
	if err == httpparse.ErrNeedMore {
		return e, false
	}
	if err != nil {
		return Expectation{Refused: httpparse.Status(err), Raw: raw}, true
	}
	e = Expectation{Method: string(r.Method), CL: -1}
	e.Target = string(r.Path)
	if r.Query != nil {
		e.Target += "?" + string(r.Query)
	}
	if len(r.Target) > 0 && r.Target[0] == '/' {
		e.Target = string(r.Target)
	}
	for _, h := range r.Headers {
		if h.ID != httpparse.HdrConnection {
			continue
		}
		for _, tok := range strings.Split(string(h.Value), ",") {
			if strings.EqualFold(strings.Trim(tok, " \t"), "x-hop") {
				e.Hop = true
			}
		}
	}
	n := r.HeadLen
	switch {
	case r.Chunked:
		e.Chunked = true
		body, end, err := dechunk(buf, n)
		if err != nil {
			return Expectation{Refused: 400, Raw: raw}, true
		}
		if end < 0 {
			return e, false
		}
		e.Body, n = string(body), end
	case r.ContentLength >= 0:
		e.CL = r.ContentLength
		if int64(len(buf)-n) < r.ContentLength {
			return e, false
		}
		e.Body = string(buf[n : n+int(r.ContentLength)])
		n += int(r.ContentLength)
	}
	e.Raw = raw[:n]
	return e, true
}

// Check compares what the origin read for one request with what the
// gateway parsed: "" when they agree, else what differs.
func Check(e Expectation, m Msg) string {
	switch {
	case m.Method != e.Method:
		return "method " + m.Method
	case m.Target != e.Target:
		return "target " + m.Target
	case m.Body != e.Body:
		return fmt.Sprintf("body of %d bytes, want %d", len(m.Body), len(e.Body))
	case e.Chunked && (len(m.CLs) != 0 || fmt.Sprint(m.TEs) != "[chunked]"):
		return fmt.Sprintf("framing CL %q TE %q, want chunked", m.CLs, m.TEs)
	case !e.Chunked && len(m.TEs) != 0:
		return fmt.Sprintf("Transfer-Encoding %q", m.TEs)
	case e.CL >= 0 && fmt.Sprint(m.CLs) != fmt.Sprintf("[%d]", e.CL):
		return fmt.Sprintf("Content-Length %q, want %d", m.CLs, e.CL)
	case e.CL < 0 && !e.Chunked && len(m.CLs) != 0:
		return fmt.Sprintf("Content-Length %q, want none", m.CLs)
	}
	hosts := 0
	for _, h := range m.Headers {
		switch h {
		case "host":
			hosts++
		case "x-hop":
			if e.Hop {
				return "X-Hop forwarded though Connection names it"
			}
		case "connection", "keep-alive", "te", "trailer", "upgrade", "expect", "proxy-connection", "x-trailer":
			return "hop-by-hop field " + h + " forwarded"
		}
	}
	if hosts != 1 {
		return fmt.Sprintf("%d Host fields", hosts)
	}
	return ""
}

// Verdict judges one exchange: the status and body the client got for the
// request e describes, and the messages the origin read meanwhile. It
// returns "" when they are what the parse allows, else what is wrong: a
// refused request must get the parser's status and reach the origin not
// at all; an accepted one is proxied (200, exactly one message, as Check
// says, answered with its target) or answered by the gateway itself
// (404 for a target no route takes, as asterisk-form; 400 for a path that
// normalises above the root) without reaching the origin.
func Verdict(e Expectation, status int, body string, msgs []Msg) string {
	if e.Refused != 0 {
		if status != e.Refused {
			return fmt.Sprintf("answer %d to a request the parser refuses with %d: %q", status, e.Refused, e.Raw)
		}
	} else if status != 200 && status != 404 && status != 400 {
		return fmt.Sprintf("answer %d to %q", status, e.Raw)
	}
	if status != 200 {
		if len(msgs) != 0 {
			return fmt.Sprintf("answered %d, yet the origin read %q from %q", status, msgs[0].Raw, e.Raw)
		}
		return ""
	}
	if len(msgs) != 1 {
		return fmt.Sprintf("origin read %d messages for %q: %+v", len(msgs), e.Raw, msgs)
	}
	if body != e.Target {
		return fmt.Sprintf("answer %q, want %q", body, e.Target)
	}
	if d := Check(e, msgs[0]); d != "" {
		return fmt.Sprintf("%s\nsent %q\nforwarded %q", d, e.Raw, msgs[0].Raw)
	}
	return ""
}

// Seeds are requests a mutation starts from: RFC 9112 edge cases beside
// ordinary ones.
var Seeds = []string{
	"GET /s HTTP/1.1\r\nHost: x\r\n\r\n",
	"POST /s HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello",
	"POST /s HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5;a=b\r\nhello\r\n0\r\nT: v\r\n\r\n",
	"POST /s HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nConnection: Content-Length\r\n\r\nhello",
	"POST /s HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nConnection: Transfer-Encoding, Host\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
	"POST /s HTTP/1.1\r\nHost: x\r\nContent-Length: 3, 3\r\nContent-Length: 3\r\n\r\nabc",
	"POST /s HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
	"POST /s HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n",
	"POST /s HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
	"POST /s HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n2 ;q=\"a\\\"b\"\r\nhi\r\n0\r\n\r\n",
	"GET http://x/s?q=1 HTTP/1.1\r\nHost: y\r\n\r\n",
	"POST /s HTTP/1.0\r\nContent-Length: 2\r\n\r\nhi",
	"GET /s HTTP/1.1\r\nHost: x\r\nX: a\r\n b\r\n\r\n",
	"GET /s HTTP/1.1\r\nHost: x\r\nX-Hop: 1\r\nConnection: x-hop\r\n\r\n",
	"PUT /s HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n",
}

// Mutate applies a few random edits at places that matter to framing.
func Mutate(rng *rand.Rand, s string) string {
	b := []byte(s)
	interesting := []byte(" \t\r\n:;,=\"\\0aF-\x00\x7f\xff")
	for n := 1 + rng.IntN(3); n > 0 && len(b) > 0; n-- {
		i := rng.IntN(len(b))
		switch rng.IntN(5) {
		case 0:
			b[i] = interesting[rng.IntN(len(interesting))]
		case 1:
			b = append(b[:i], append([]byte{interesting[rng.IntN(len(interesting))]}, b[i:]...)...)
		case 2:
			b = append(b[:i], b[i+1:]...)
		case 3: // repeat a line
			start := bytes.LastIndexByte(b[:i], '\n') + 1
			end := bytes.IndexByte(b[i:], '\n')
			if end >= 0 {
				line := append([]byte(nil), b[start:i+end+1]...)
				b = append(b[:start], append(line, b[start:]...)...)
			}
		case 4: // a digit of a size or length
			b[i] = "0123456789abcdef"[rng.IntN(16)]
		}
	}
	return string(b)
}

// Input is the i-th input of a differential run, in turns of four: a
// generated request, one generated and mutated, a seed mutated, and one
// generated and mutated.
func Input(rng *rand.Rand, i int) string {
	raw := Generate(rng, i)
	if i%2 == 1 {
		raw = Mutate(rng, raw)
	} else if i%4 == 2 {
		raw = Mutate(rng, Seeds[rng.IntN(len(Seeds))])
	}
	return raw
}

// Generate makes a valid request with random framing; id goes into its
// target.
func Generate(rng *rand.Rand, id int) string {
	var sb strings.Builder
	methods := []string{"GET", "POST", "PUT", "PATCH", "DELETE"}
	m := methods[rng.IntN(len(methods))]
	fmt.Fprintf(&sb, "%s /g/%d?x=%d HTTP/1.1\r\nHost: h%d\r\n", m, id, rng.IntN(100), rng.IntN(3))
	body := strings.Repeat(string(rune('a'+rng.IntN(26))), rng.IntN(3000))
	conn := []string{"Content-Length", "Transfer-Encoding", "Host", "X-Hop", "keep-alive", "close"}
	if rng.IntN(3) == 0 {
		sb.WriteString("X-Hop: 1\r\nConnection: " + conn[rng.IntN(len(conn))] + ", " + conn[rng.IntN(len(conn))] + "\r\n")
	}
	switch rng.IntN(3) {
	case 0:
		cl := strconv.Itoa(len(body))
		switch rng.IntN(3) {
		case 0:
			fmt.Fprintf(&sb, "Content-Length: %s\r\n", cl)
		case 1:
			fmt.Fprintf(&sb, "Content-Length: %s,%s\r\n", cl, cl)
		case 2:
			fmt.Fprintf(&sb, "Content-Length: %s\r\ncontent-length: %s\r\n", cl, cl)
		}
		sb.WriteString("\r\n" + body)
	case 1:
		sb.WriteString("Transfer-Encoding: chunked\r\n\r\n")
		for rest := body; ; {
			k := min(len(rest), 1+rng.IntN(700))
			ext := [...]string{"", ";a", ";a=b", "; a = \"q\\\"x\" ; b", ";" + strings.Repeat("e", 40)}[rng.IntN(5)]
			fmt.Fprintf(&sb, "%x%s\r\n%s\r\n", k, ext, rest[:k])
			rest = rest[k:]
			if len(rest) == 0 {
				break
			}
		}
		sb.WriteString("0\r\n")
		if rng.IntN(2) == 0 {
			sb.WriteString("X-Trailer: t\r\n")
		}
		sb.WriteString("\r\n")
	default:
		sb.WriteString("\r\n")
	}
	return sb.String()
}
