package harness

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"coregate/bench/procstat"
)

// Errors returned by this package.
var (
	ErrNotReady = errors.New("harness: gateway did not become ready")
	ErrExited   = errors.New("harness: process exited")
	ErrNoTarget = errors.New("harness: nothing to measure")
)

// Proc is a child process started by the harness.
type Proc struct {
	Name string
	Log  string // file holding its stdout and stderr
	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

var (
	liveMu sync.Mutex
	live   = map[*Proc]bool{}
)

// Start runs argv with env added to this process's environment, pinned to
// cpus (nil: not pinned), its output going to logFile (nil stdout: returned
// through the pipe instead when pipeStdout is set).
func Start(name string, cpus []int, env []string, logFile string, pipeStdout bool, argv ...string) (*Proc, io.Reader, error) {
	lf, err := os.Create(logFile)
	if err != nil {
		return nil, nil, err
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stderr = lf
	var out io.Reader
	if pipeStdout {
		if out, err = cmd.StdoutPipe(); err != nil {
			lf.Close()
			return nil, nil, err
		}
	} else {
		cmd.Stdout = lf
	}
	// The child dies with the harness even if the harness is killed.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	start := cmd.Start
	if len(cpus) > 0 {
		err = procstat.OnCPUs(cpus, start)
	} else {
		err = start()
	}
	if err != nil {
		lf.Close()
		return nil, nil, fmt.Errorf("harness: start %s: %w", name, err)
	}
	p := &Proc{Name: name, Log: logFile, cmd: cmd, done: make(chan struct{})}
	liveMu.Lock()
	live[p] = true
	liveMu.Unlock()
	go func() {
		p.err = cmd.Wait()
		lf.Close()
		close(p.done)
	}()
	return p, out, nil
}

// PID returns the process id.
func (p *Proc) PID() int { return p.cmd.Process.Pid }

// PIDs returns the process and its live descendants.
func (p *Proc) PIDs() []int {
	pids, err := procstat.Tree(p.PID())
	if err != nil {
		return []int{p.PID()}
	}
	return pids
}

// Exited reports whether the process has ended.
func (p *Proc) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Stop sends SIGTERM to the process, waits up to grace, then SIGKILLs it;
// descendants still alive afterwards (by the PIDs seen before stopping) are
// killed too. Stop is idempotent.
func (p *Proc) Stop(grace time.Duration) {
	liveMu.Lock()
	delete(live, p)
	liveMu.Unlock()
	if p.Exited() {
		return
	}
	kids := p.PIDs()[1:]
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
	for _, k := range kids {
		if st, err := procstat.ReadStat(k); err == nil && st.State != 'Z' {
			_ = syscall.Kill(k, syscall.SIGKILL)
		}
	}
}

// Tail returns the last n lines of the process's log.
func (p *Proc) Tail(n int) string {
	b, err := os.ReadFile(p.Log)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// StopAll stops every process the harness started and has not stopped yet.
// It is safe to call from a signal handler goroutine.
func StopAll() {
	liveMu.Lock()
	ps := make([]*Proc, 0, len(live))
	for p := range live {
		ps = append(ps, p)
	}
	liveMu.Unlock()
	var wg sync.WaitGroup
	for _, p := range ps {
		wg.Add(1)
		go func() { defer wg.Done(); p.Stop(3 * time.Second) }()
	}
	wg.Wait()
}

// UpstreamProcs is the GOMAXPROCS of an upstream with loops event loops
// (see StartUpstream).
func UpstreamProcs(loops int) int { return loops + 1 }

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func FreePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// StartUpstream runs "self upstream" with one event loop per CPU of cpus
// (one if cpus is empty) and returns its process and address.
//
// The upstream has a P per loop and one more (UpstreamProcs) for the
// goroutine that accepts its connections (gnet's main reactor), so that a
// new connection is not held until a busy loop lets go of its P. With a
// P per loop only, a connection opened beside steady traffic on kept-alive
// ones waited for its first response 0.65-0.77 ms at the median, and
// 7.4-89 ms at most, in four runs of 400 connections with two CPU-bound
// processes beside; with the extra P, 0.41-0.48 ms and 5.5-10.4 ms. In
// bench admin a request on a connection the gateway had just opened
// waited 372 ms for the upstream once.
func StartUpstream(self string, cpus []int, body int, dir string) (*Proc, string, error) {
	loops := max(1, len(cpus))
	p, out, err := Start("upstream", cpus, []string{"GOMAXPROCS=" + strconv.Itoa(UpstreamProcs(loops))}, dir+"/upstream.log", true,
		self, "upstream", "-listen", "127.0.0.1:0", "-body", strconv.Itoa(body), "-loops", strconv.Itoa(loops))
	if err != nil {
		return nil, "", err
	}
	addr, err := UpstreamAddr(p, out)
	if err != nil {
		return nil, "", err
	}
	return p, addr, nil
}

// UpstreamAddr reads the address an upstream or floor process p reports on
// out, its first line "listening ADDR", and drains the rest of out. It stops
// p when the line is not that or does not come within 10 s.
func UpstreamAddr(p *Proc, out io.Reader) (string, error) {
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		if sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
		_, _ = io.Copy(io.Discard, out)
	}()
	select {
	case l, ok := <-lines:
		addr, found := strings.CutPrefix(l, "listening ")
		if !ok || !found {
			p.Stop(time.Second)
			return "", fmt.Errorf("harness: upstream: %q: %s", l, p.Tail(5))
		}
		return addr, nil
	case <-time.After(10 * time.Second):
		p.Stop(time.Second)
		return "", fmt.Errorf("harness: upstream did not report its address: %s", p.Tail(5))
	}
}

// WaitReady polls GET path on addr until it answers 200, the process
// exits, or timeout passes.
func WaitReady(p *Proc, addr, path, header string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	var last string
	for time.Now().Before(deadline) {
		if p != nil && p.Exited() {
			return fmt.Errorf("%w: %s exited: %v\n%s", ErrExited, p.Name, p.err, p.Tail(20))
		}
		st, err := get(addr, path, header)
		if err == nil && st == 200 {
			return nil
		}
		last = fmt.Sprintf("status %d, %v", st, err)
		time.Sleep(50 * time.Millisecond)
	}
	name := "target"
	tail := ""
	if p != nil {
		name, tail = p.Name, p.Tail(20)
	}
	return fmt.Errorf("%w: %s at %s: %s\n%s", ErrNotReady, name, addr, last, tail)
}

// get sends one GET and returns the status code.
func get(addr, path, header string) (int, error) {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: %s\r\n%sConnection: close\r\n\r\n", path, addr, header); err != nil {
		return 0, err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return 0, err
	}
	f := strings.Fields(line)
	if len(f) < 2 {
		return 0, fmt.Errorf("harness: bad status line %q", line)
	}
	return strconv.Atoi(f[1])
}
