package upstream

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"time"

	"github.com/panjf2000/gnet/v2"
	"golang.org/x/sys/unix"
)

// Errors returned by this package.
var (
	ErrMalformed = errors.New("upstream: malformed request")
	ErrStarted   = errors.New("upstream: server failed to start")
)

// Body1K is the 1 KiB body of the seeds' benchmarks: "1234567890" × 102 then
// "1234".
var Body1K = []byte(string(bytes.Repeat([]byte("1234567890"), 102)) + "1234")

// Body10 is the 10-byte body of APISIX's benchmark/run.sh upstream.
var Body10 = []byte("1234567890")

// Response returns the full HTTP/1.1 response the server sends for body.
func Response(body []byte) []byte {
	h := "HTTP/1.1 200 OK\r\nServer: bench-upstream\r\nContent-Type: text/plain\r\nContent-Length: " +
		strconv.Itoa(len(body)) + "\r\nConnection: keep-alive\r\n\r\n"
	return append([]byte(h), body...)
}

// maxHeader bounds a request head; a longer one closes the connection.
const maxHeader = 16 << 10

type connState struct {
	skip int // request body bytes still to discard
}

type handler struct {
	gnet.BuiltinEventEngine
	resp  []byte
	batch []byte // resp repeated, for pipelined requests
	eng   gnet.Engine
	boot  chan gnet.Engine
}

func (h *handler) OnBoot(e gnet.Engine) gnet.Action {
	h.eng = e
	h.boot <- e
	return gnet.None
}

func (h *handler) OnOpen(c gnet.Conn) ([]byte, gnet.Action) {
	c.SetContext(&connState{})
	return nil, gnet.None
}

// OnTraffic answers every complete request in the buffer.
func (h *handler) OnTraffic(c gnet.Conn) gnet.Action {
	st := c.Context().(*connState)
	buf, _ := c.Peek(-1)
	done, n, err := Scan(buf, &st.skip)
	if err != nil {
		return gnet.Close
	}
	for n > 0 {
		k := min(n, len(h.batch)/len(h.resp))
		if _, err := c.Write(h.batch[:k*len(h.resp)]); err != nil {
			return gnet.Close
		}
		n -= k
	}
	_, _ = c.Discard(done)
	return gnet.None
}

// Scan counts the complete requests at the start of buf. It returns how many
// bytes they (and any body bytes still owed from an earlier call, tracked in
// *skip) take, and how many requests were complete. It does not allocate.
func Scan(buf []byte, skip *int) (consumed, requests int, err error) {
	if *skip > 0 {
		k := min(*skip, len(buf))
		*skip -= k
		consumed = k
		if *skip > 0 {
			return consumed, 0, nil
		}
	}
	for {
		rest := buf[consumed:]
		end := bytes.Index(rest, crlfcrlf)
		if end < 0 {
			if len(rest) > maxHeader {
				return consumed, requests, ErrMalformed
			}
			return consumed, requests, nil
		}
		head := rest[:end]
		cl, err := ContentLength(head) // -1, none: no body
		if err != nil {
			return consumed, requests, err
		}
		requests++
		consumed += end + 4
		if cl > 0 {
			k := min(cl, len(buf)-consumed)
			consumed += k
			if k < cl {
				*skip = cl - k
				return consumed, requests, nil
			}
		}
	}
}

var (
	crlfcrlf = []byte("\r\n\r\n")
	hdrCL    = []byte("\r\ncontent-length:")
	hdrTE    = []byte("\r\ntransfer-encoding:")
)

// ContentLength finds the Content-Length header in a message head (without
// its final CRLFCRLF), its name in any case: -1 when there is none. A value
// that is not 1 to 9 digits, or a Transfer-Encoding header, is
// ErrMalformed.
func ContentLength(head []byte) (int, error) {
	cl := -1
	for i := 0; i+len(hdrCL) <= len(head); i++ {
		if head[i] != '\r' {
			continue
		}
		switch {
		case hasPrefixFold(head[i:], hdrCL):
			v := bytes.TrimSpace(lineAt(head[i+len(hdrCL):]))
			n := 0
			if len(v) == 0 || len(v) > 9 {
				return 0, ErrMalformed
			}
			for _, b := range v {
				if b < '0' || b > '9' {
					return 0, ErrMalformed
				}
				n = n*10 + int(b-'0')
			}
			cl = n
		case hasPrefixFold(head[i:], hdrTE):
			return 0, ErrMalformed
		}
	}
	return cl, nil
}

func lineAt(b []byte) []byte {
	if i := bytes.IndexByte(b, '\r'); i >= 0 {
		return b[:i]
	}
	return b
}

// hasPrefixFold reports whether b starts with lower, ASCII case-insensitively.
func hasPrefixFold(b, lower []byte) bool {
	if len(b) < len(lower) {
		return false
	}
	for i, c := range lower {
		x := b[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if x != c {
			return false
		}
	}
	return true
}

// quietLogger keeps gnet's informational lines off stdout, where the
// upstream command reports its address; errors go to stderr.
type quietLogger struct{}

func (quietLogger) Debugf(string, ...any) {}
func (quietLogger) Infof(string, ...any)  {}
func (quietLogger) Warnf(string, ...any)  {}
func (quietLogger) Errorf(format string, a ...any) {
	fmt.Fprintf(os.Stderr, "upstream: "+format+"\n", a...)
}
func (quietLogger) Fatalf(format string, a ...any) {
	fmt.Fprintf(os.Stderr, "upstream: "+format+"\n", a...)
	os.Exit(1)
}

// Server is a running upstream.
type Server struct {
	Addr string // host:port it listens on
	eng  gnet.Engine
	done chan error
}

// Start listens on addr (host:port, port 0 for a free one) and serves body
// on loops event loops (at least one) until Stop. With more than one, a
// main loop accepts and hands connections round-robin to the others. The
// returned Server's Addr holds the port actually bound.
func Start(addr string, body []byte, loops int) (*Server, error) {
	resp := Response(body)
	h := &handler{resp: resp, boot: make(chan gnet.Engine, 1)}
	h.batch = bytes.Repeat(resp, max(1, (64<<10)/len(resp)))
	s := &Server{done: make(chan error, 1)}
	go func() {
		s.done <- gnet.Run(h, "tcp://"+addr,
			gnet.WithMulticore(loops > 1),
			gnet.WithNumEventLoop(max(1, loops)),
			gnet.WithLockOSThread(true),
			gnet.WithTCPNoDelay(gnet.TCPNoDelay),
			gnet.WithTCPKeepAlive(0),
			gnet.WithLogger(quietLogger{}),
		)
	}()
	select {
	case s.eng = <-h.boot:
	case err := <-s.done:
		return nil, fmt.Errorf("%w: %v", ErrStarted, err)
	case <-time.After(10 * time.Second):
		return nil, ErrStarted
	}
	fd, err := s.eng.Dup()
	if err != nil {
		_ = s.Stop()
		return nil, fmt.Errorf("%w: %v", ErrStarted, err)
	}
	sa, err := unix.Getsockname(fd)
	_ = unix.Close(fd)
	if err != nil {
		_ = s.Stop()
		return nil, fmt.Errorf("%w: %v", ErrStarted, err)
	}
	a, ok := sa.(*unix.SockaddrInet4)
	if !ok {
		_ = s.Stop()
		return nil, fmt.Errorf("%w: not an IPv4 listener", ErrStarted)
	}
	s.Addr = net.JoinHostPort(net.IP(a.Addr[:]).String(), strconv.Itoa(a.Port))
	return s, nil
}

// Stop shuts the server down and waits for its loop to end.
func (s *Server) Stop() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := s.eng.Stop(ctx)
	select {
	case <-s.done:
	case <-ctx.Done():
	}
	return err
}
