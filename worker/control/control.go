package control

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"time"

	"coregate/admin/spec"
)

// Type is a frame type.
type Type uint8

// Frame types. Supervisor to worker: Config, Delta, Drain, Rejoin. Worker to
// supervisor: Ready, Applied, Stats, Fatal, Hello.
const (
	// Config carries a whole configuration: a spec.Spec in its JSON form
	// (every resource and the hash; EncodeSpec). A worker serves no request
	// before the first one.
	Config Type = iota + 1
	// Drain asks the worker to stop taking connections, finish what it
	// serves and exit (payload: DrainMsg).
	Drain
	// Ready says the worker holds its first configuration and listens
	// (payload: ReadyMsg).
	Ready
	// Stats carries the worker's counters (payload: StatsMsg).
	Stats
	// Applied acknowledges a Config (payload: AppliedMsg).
	Applied
	// Fatal says why the worker is about to exit on an error (payload:
	// FatalMsg), for the supervisor's log.
	Fatal
	// Rejoin tells a worker that the supervisor took it out of the socket
	// selector while it was silent, and that it should put its listener
	// back (no payload).
	Rejoin
	// Delta carries a configuration as the changes from the one sent
	// before it (EncodeDelta); answered with Applied, as Config is.
	Delta
	// Hello introduces a worker whose supervisor is gone to the supervisor
	// that takes it over (payload: HelloMsg), with the node's shared
	// objects passed beside it (SendFiles); the conversation then goes on
	// as on an inherited control socket.
	Hello
)

// MaxFrame bounds a frame: 64 MiB covers tens of thousands of routes.
const MaxFrame = 64 << 20

// Sentinel errors.
var (
	ErrFrameTooLarge = errors.New("control: frame too large")
	ErrUnknownType   = errors.New("control: unknown frame type")
)

// DrainMsg is the payload of Drain.
type DrainMsg struct {
	// TimeoutMS is how long in-flight requests may take before the worker
	// closes everything and exits.
	TimeoutMS int64 `json:"timeout_ms"`
}

// ReadyMsg is the payload of Ready.
type ReadyMsg struct {
	ID       int    `json:"id"`
	PID      int    `json:"pid"`
	Selector string `json:"selector"` // what steers connections to it: ebpf, cbpf, kernel-hash
}

// AppliedMsg is the payload of Applied.
type AppliedMsg struct {
	Routes int    `json:"routes"`
	Error  string `json:"error,omitempty"`
	// BuildUS is how long the worker took to decode and compile the
	// configuration, in microseconds, as logged.
	BuildUS int64 `json:"build_us,omitempty"`
	// BuildCPUUS is the CPU time of that decode and compile, in
	// microseconds, time waiting for the CPU left out: what the
	// supervisor paces a burst of configurations by (a worker's build
	// below its loop's priority on a busy machine waits many times its
	// CPU time).
	BuildCPUUS int64 `json:"build_cpu_us,omitempty"`
	// AllocBytes is what that decode and compile allocated; GCCPUUS, in
	// microseconds, the garbage collector's CPU time that costs the
	// worker, at its collector's CPU per byte allocated so far (0 until it
	// has collected since its first configuration): the rest of what a
	// configuration costs the worker's CPU, which the supervisor paces by
	// too.
	AllocBytes uint64 `json:"alloc_bytes,omitempty"`
	GCCPUUS    int64  `json:"gc_cpu_us,omitempty"`
	// Resync says the worker could not apply a Delta (it does not hold
	// the configuration it was made against) and wants the current one
	// whole.
	Resync bool `json:"resync,omitempty"`
}

// FatalMsg is the payload of Fatal.
type FatalMsg struct {
	Error string `json:"error"`
}

// StatsMsg is the payload of Stats: a worker's counters since it started
// (Accepted, Handled, Requests; Handled leaves out the connections closed
// at once because worker_connections were reached) and its client
// connections now (Active =
// Reading + Writing + Waiting), nginx's stub_status figures. A worker
// sends one every StatsEvery, as long as its event loop turns: the frames
// are also its heartbeat.
type StatsMsg struct {
	Accepted uint64 `json:"accepted"`
	Handled  uint64 `json:"handled"`
	Requests uint64 `json:"requests"`
	Active   int64  `json:"active"`
	Reading  int64  `json:"reading"`
	Writing  int64  `json:"writing"`
	Waiting  int64  `json:"waiting"`
}

// StatsEvery is how often a worker reports its StatsMsg, its heartbeat:
// four beats a second, so that a supervisor that waits a second before it
// calls a worker silent sees four of them missing, not one late.
const StatsEvery = 250 * time.Millisecond

// Conn is one end of a control socket.
type Conn struct {
	c  io.ReadWriteCloser
	r  *bufio.Reader
	mu sync.Mutex
}

// New wraps a connected stream socket.
func New(c io.ReadWriteCloser) *Conn { return &Conn{c: c, r: bufio.NewReader(c)} }

// FromFile wraps an inherited socket fd.
func FromFile(f *os.File) (*Conn, error) {
	nc, err := net.FileConn(f)
	if err != nil {
		return nil, fmt.Errorf("control: %w", err)
	}
	_ = f.Close()
	return New(nc), nil
}

// Send writes one frame; v is marshalled to JSON (nil: empty payload).
func (c *Conn) Send(t Type, v any) error {
	var payload []byte
	if v != nil {
		var err error
		if payload, err = json.Marshal(v); err != nil {
			return fmt.Errorf("control: %w", err)
		}
	}
	return c.SendPayload(t, payload)
}

// SendPayload writes one frame whose payload is already encoded, so that a
// payload made once (EncodeSpec) goes to every worker as the same bytes.
// payload is only read, and not kept after SendPayload returns.
func (c *Conn) SendPayload(t Type, payload []byte) error {
	if len(payload)+1 > MaxFrame {
		return ErrFrameTooLarge
	}
	var hdr [5]byte
	binary.BigEndian.PutUint32(hdr[:], uint32(len(payload)+1))
	hdr[4] = byte(t)
	bufs := net.Buffers{hdr[:], payload}
	c.mu.Lock()
	defer c.mu.Unlock()
	_, err := bufs.WriteTo(c.c)
	return err
}

// Recv reads one frame. The payload is the caller's.
func (c *Conn) Recv() (Type, []byte, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(c.r, hdr[:]); err != nil {
		return 0, nil, err
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if n == 0 || n > MaxFrame {
		return 0, nil, ErrFrameTooLarge
	}
	buf := make([]byte, n)
	if _, err := io.ReadFull(c.r, buf); err != nil {
		return 0, nil, err
	}
	t := Type(buf[0])
	if t < Config || t > Hello {
		return t, nil, ErrUnknownType
	}
	return t, buf[1:], nil
}

// Close closes the socket.
func (c *Conn) Close() error { return c.c.Close() }

// EncodeSpec encodes s as a Config payload: the whole Spec (every
// resource, consumers, plugin configs and global rules included) and its
// Hash, in spec.Spec's own JSON form. The supervisor encodes a
// configuration once and sends the same bytes to every worker
// (SendPayload). An encoding over MaxFrame is ErrFrameTooLarge.
//
// A Spec marked checked (spec.Spec.Checked) carries its mark as the
// payload's first member, "checked" (hex), which is not part of the Spec's
// own JSON form.
func EncodeSpec(s *spec.Spec) ([]byte, error) {
	// MarshalJSON itself, not through json.Marshal, which compacts and
	// checks the whole of what it returns again (at 50 000 routes 14 MB,
	// 80-100 ms of CPU).
	b, err := s.MarshalJSON()
	if err != nil {
		return nil, fmt.Errorf("control: config: %w", err)
	}
	if s.Checked != ([32]byte{}) && len(b) >= 2 && b[0] == '{' {
		m := make([]byte, 0, len(b)+len(checkedMember)+66)
		m = append(m, '{')
		m = appendChecked(m, s.Checked)
		if len(b) > 2 {
			m = append(m, ',')
		}
		b = append(m, b[1:]...)
	}
	if len(b)+1 > MaxFrame {
		return nil, ErrFrameTooLarge
	}
	return b, nil
}

// DecodeSpec parses a Config payload and checks the references between its
// objects (spec.Spec.Check); the objects themselves were validated where
// they were loaded or stored. each, if not nil, is called after every
// object is decoded (spec.UnmarshalEach). The mark "checked", when the
// payload begins with it, is the Spec's Checked.
func DecodeSpec(payload []byte, each func()) (*spec.Spec, error) {
	s := new(spec.Spec)
	checked, rest, err := cutChecked(payload)
	if err != nil {
		return nil, fmt.Errorf("control: config: %w", err)
	}
	if err := spec.UnmarshalEach(rest, s, each); err != nil {
		return nil, fmt.Errorf("control: config: %w", err)
	}
	s.Checked = checked
	compactPlugins(s.Routes, nil)
	if err := s.Check(); err != nil {
		return nil, fmt.Errorf("control: config: %w", err)
	}
	return s, nil
}

// checkedMember begins a payload's mark: `"checked":"<hex>"`.
const checkedMember = `"checked":"`

func appendChecked(b []byte, sum [32]byte) []byte {
	b = append(b, checkedMember...)
	b = hex.AppendEncode(b, sum[:])
	return append(b, '"')
}

// cutChecked reads the mark a Config payload may begin with: its value,
// and the payload without it (a Spec's JSON form).
func cutChecked(payload []byte) (sum [32]byte, rest []byte, err error) {
	p, ok := bytes.CutPrefix(payload, []byte("{"+checkedMember))
	if !ok {
		return sum, payload, nil
	}
	if len(p) < 65 || p[64] != '"' {
		return sum, nil, errors.New("checked: want 64 hex digits")
	}
	if sum, err = spec.ParseHash(string(p[:64])); err != nil {
		return sum, nil, fmt.Errorf("checked: %w", err)
	}
	p = p[65:]
	if len(p) > 0 && p[0] == ',' {
		p = p[1:]
	}
	// The Spec's JSON form: '{' and what followed the mark. The payload
	// is the caller's, so it is copied rather than written over.
	rest = make([]byte, 0, len(p)+1)
	return sum, append(append(rest, '{'), p...), nil
}
