package control

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// TakeoverProto is the version of the takeover conversation (Hello, the
// descriptors beside it, and the frames that follow). A supervisor takes
// over only a worker that speaks its version; it replaces the others.
const TakeoverProto = 1

// HelloMsg is the payload of Hello: what a worker whose supervisor is gone
// tells the supervisor that takes it over.
type HelloMsg struct {
	Proto int `json:"proto"`
	ID    int `json:"id"`
	PID   int `json:"pid"`
	CPU   int `json:"cpu"`
	// Started is when the process started (Unix nanoseconds): of two
	// processes of one slot (a rolling restart the previous supervisor
	// did not finish), the newer is kept.
	Started int64 `json:"started"`
	// Selector and Mode are what steers connections to it (ReadyMsg's
	// Selector, bpf.Mode's name).
	Selector string `json:"selector"`
	Mode     string `json:"mode"`
	// Ready: the worker listens (it said Ready to the supervisor it had,
	// or would have).
	Ready bool `json:"ready"`
	// Settings fingerprints the config.yaml the worker read when it
	// started (supervisor.Reload.Settings), Binary the executable it runs
	// (device and inode): a worker started from another config.yaml or
	// binary is replaced, as a SIGHUP would replace it.
	Settings string `json:"settings"`
	Binary   string `json:"binary"`
	// Objects names the node's shared objects the worker uses (the
	// supervisor's --objects): only a worker of the objects a supervisor
	// takes over can serve on beside its new workers.
	Objects string `json:"objects"`
	// Files names the descriptors passed beside the frame, in order
	// (File* names below, and bpf's file names for the selector's).
	Files []string `json:"files"`
}

// Names of the node's shared objects in HelloMsg.Files, beside the eBPF
// selector's (bpf.Selector.Files' names).
const (
	FileCounters = "counters"
	FileMetrics  = "metrics"
	FileTickets  = "tickets"
)

// MaxHelloFiles bounds the descriptors a Hello may carry.
const MaxHelloFiles = 16

// ErrNoFiles is a Hello whose descriptors did not arrive whole.
var ErrNoFiles = errors.New("control: descriptors missing or cut short")

// SendFiles writes one frame, as Conn.Send, on a Unix socket with files
// passed beside it (SCM_RIGHTS). The files stay open and the caller's.
// Nothing else may be written on uc meanwhile.
func SendFiles(uc *net.UnixConn, t Type, v any, files []*os.File) error {
	payload, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("control: %w", err)
	}
	if len(payload)+1 > MaxFrame {
		return ErrFrameTooLarge
	}
	if len(files) > MaxHelloFiles {
		return fmt.Errorf("control: %d files (at most %d)", len(files), MaxHelloFiles)
	}
	frame := make([]byte, 5, 5+len(payload))
	binary.BigEndian.PutUint32(frame, uint32(len(payload)+1))
	frame[4] = byte(t)
	frame = append(frame, payload...)
	fds := make([]int, len(files))
	for i, f := range files {
		fds[i] = int(f.Fd())
	}
	n, _, err := uc.WriteMsgUnix(frame, unix.UnixRights(fds...), nil)
	if err != nil {
		return fmt.Errorf("control: %w", err)
	}
	if n < len(frame) {
		_, err = uc.Write(frame[n:])
	}
	return err
}

// RecvFiles reads one frame that SendFiles wrote, and the files passed
// beside it, which become the caller's. Nothing may have been read from uc
// before, and nothing is read past the frame: uc may be wrapped in a Conn
// afterwards.
func RecvFiles(uc *net.UnixConn) (Type, []byte, []*os.File, error) {
	var hdr [4]byte
	oob := make([]byte, unix.CmsgSpace(4*MaxHelloFiles))
	n, oobn, flags, _, err := uc.ReadMsgUnix(hdr[:], oob)
	if err != nil {
		return 0, nil, nil, err
	}
	files, ferr := filesOf(oob[:oobn])
	if ferr == nil && flags&unix.MSG_CTRUNC != 0 {
		ferr = ErrNoFiles
	}
	if ferr != nil {
		closeAll(files)
		return 0, nil, nil, ferr
	}
	if n == 0 {
		closeAll(files)
		return 0, nil, nil, io.EOF
	}
	// The descriptors came with the frame's first bytes; the rest of the
	// frame is plain data.
	if _, err := io.ReadFull(uc, hdr[n:]); err != nil {
		closeAll(files)
		return 0, nil, nil, err
	}
	size := binary.BigEndian.Uint32(hdr[:])
	if size == 0 || size > MaxFrame {
		closeAll(files)
		return 0, nil, nil, ErrFrameTooLarge
	}
	buf := make([]byte, size)
	if _, err := io.ReadFull(uc, buf); err != nil {
		closeAll(files)
		return 0, nil, nil, err
	}
	return Type(buf[0]), buf[1:], files, nil
}

func filesOf(oob []byte) ([]*os.File, error) {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return nil, fmt.Errorf("control: %w", err)
	}
	var files []*os.File
	for _, m := range msgs {
		fds, err := unix.ParseUnixRights(&m)
		if err != nil {
			continue
		}
		for _, fd := range fds {
			unix.CloseOnExec(fd)
			files = append(files, os.NewFile(uintptr(fd), "hello"))
		}
	}
	return files, nil
}

func closeAll(files []*os.File) {
	for _, f := range files {
		_ = f.Close()
	}
}

// TakeoverAddr is the abstract Unix socket on which the worker pid of slot
// waits for a supervisor of the node named key once its own is gone
// (TakeoverKey).
func TakeoverAddr(key string, slot, pid int) string {
	return "@" + takeoverPrefix + key + "/" + strconv.Itoa(slot) + "/" + strconv.Itoa(pid)
}

const takeoverPrefix = "coregate-takeover/"

// soAcceptCon is the kernel's __SO_ACCEPTCON, the Flags bit of a listening
// socket in /proc/net/unix.
const soAcceptCon = 1 << 16

// TakeoverSocket is one worker waiting to be taken over.
type TakeoverSocket struct {
	Addr      string
	Slot, PID int
}

// FindTakeover lists the workers of the node named key that wait to be
// taken over: the listening abstract sockets named by TakeoverAddr in
// /proc/net/unix (this network namespace's).
func FindTakeover(key string) ([]TakeoverSocket, error) {
	f, err := os.Open("/proc/net/unix")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return parseTakeover(f, key)
}

// parseTakeover reads /proc/net/unix's format: "Num RefCount Protocol
// Flags Type St Inode Path", Flags 00010000 for a listening socket, the
// path of an abstract one starting with '@'.
func parseTakeover(r io.Reader, key string) ([]TakeoverSocket, error) {
	prefix := "@" + takeoverPrefix + key + "/"
	var out []TakeoverSocket
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 8 || !strings.HasPrefix(f[7], prefix) {
			continue
		}
		flags, err := strconv.ParseUint(f[3], 16, 32)
		if err != nil || flags&soAcceptCon == 0 {
			continue
		}
		slot, pid, ok := strings.Cut(strings.TrimPrefix(f[7], prefix), "/")
		s, err1 := strconv.Atoi(slot)
		p, err2 := strconv.Atoi(pid)
		if !ok || err1 != nil || err2 != nil || s < 0 || p <= 0 {
			continue
		}
		out = append(out, TakeoverSocket{Addr: f[7], Slot: s, PID: p})
	}
	return out, sc.Err()
}

// BinaryID identifies the executable at path (its device and inode), so
// that a supervisor can tell a worker that runs another binary than the
// one it would start (an upgrade): BinaryID("/proc/self/exe") in the
// worker, of the supervisor's executable in the supervisor. "" when path
// cannot be read.
func BinaryID(path string) string {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return ""
	}
	return fmt.Sprintf("%d:%d", st.Dev, st.Ino)
}

// PeerCred returns the process and user at the other end of a Unix socket
// (SO_PEERCRED: for a connecting side, the listener's at listen time).
func PeerCred(uc *net.UnixConn) (pid, uid int, err error) {
	rc, err := uc.SyscallConn()
	if err != nil {
		return 0, 0, err
	}
	var cred *unix.Ucred
	var cerr error
	if err := rc.Control(func(fd uintptr) {
		cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return 0, 0, err
	}
	if cerr != nil {
		return 0, 0, fmt.Errorf("control: SO_PEERCRED: %w", cerr)
	}
	return int(cred.Pid), int(cred.Uid), nil
}
