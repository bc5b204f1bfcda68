package e2e

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"coregate/admin/nodeconf"
	"coregate/internal/syncbuf"
)

// Options say how Start runs the binary.
type Options struct {
	// Bin is the binary's path (Build's).
	Bin string
	// Dir is the config directory; a new t.TempDir() when "".
	Dir string
	// Port is the listen port; a FreePort when 0 and Config is set (when
	// it is not, the config.yaml in Dir says, and Port may stay 0).
	Port int
	// Config makes config.yaml for the listen port. When nil, no file is
	// written: the directory's are used as they are (a restart). A TLS
	// listener in it must be on a port the test took as free (Start fails
	// the test otherwise): SSLListen(port) gives it one, or the config
	// says ssl.enable: false.
	Config func(port int) string
	// APISIX is written to apisix.yaml beside config.yaml when Config is
	// set.
	APISIX string
	// Args follow "-c <dir>/config.yaml" on the command line.
	Args []string
	// Env is added to the test process's environment (after the
	// GORACE that childEnv sets, which an entry of Env may replace).
	Env []string
	// LogFile, when set, is where the output goes instead of Out (which
	// is then nil): a file the workers, which may outlive the process
	// (a supervisor killed), go on writing to, where a pipe read by the
	// test would have Wait wait for them.
	LogFile string
	// Listen: Start returns once the listen port accepts a connection,
	// within 10 s.
	Listen bool
	// Ready: Start returns once Ready lines of the output say
	// msg="worker ready", within ReadyTimeout (10 s when 0).
	Ready        int
	ReadyTimeout time.Duration
}

// Gateway is one coregate process the test started, with its config
// directory and its output (standard output and error, together: Log).
//
// When the test ends it is stopped as Stop says, unless the test set
// Stopped, saying it stops the process itself: then it is waited for 5 s,
// and ended with its workers by SIGKILL (failing the test) past that. Either
// way a data race in its output fails the test, and its output is logged
// when the test failed.
type Gateway struct {
	T    testing.TB
	Dir  string
	Port int
	Cmd  *exec.Cmd
	Out  *syncbuf.Buffer // the output; nil with Options.LogFile
	// Done is closed once the process exited and was reaped.
	Done chan struct{}
	// Stopped is set by a test that stops the process itself.
	Stopped atomic.Bool
	logFile string
}

// Log is the output so far.
func (g *Gateway) Log() string {
	if g.logFile == "" {
		return g.Out.String()
	}
	b, _ := os.ReadFile(g.logFile)
	return string(b)
}

// Start writes the config directory as o says, runs `bin -c
// <dir>/config.yaml args...` and waits as o says (failing t when the
// process exits first or the wait passes its bound).
func Start(t testing.TB, o Options) *Gateway {
	t.Helper()
	g := &Gateway{T: t, Dir: o.Dir, Port: o.Port, Done: make(chan struct{}), logFile: o.LogFile}
	if g.Dir == "" {
		g.Dir = t.TempDir()
	}
	if g.Port == 0 && o.Config != nil {
		g.Port = FreePort(t)
	}
	if o.Config != nil {
		conf := o.Config(g.Port)
		checkTLSPorts(t, conf)
		WriteFile(t, filepath.Join(g.Dir, "config.yaml"), conf)
		WriteFile(t, filepath.Join(g.Dir, "apisix.yaml"), o.APISIX)
	}
	g.Cmd = exec.Command(o.Bin, append([]string{"-c", filepath.Join(g.Dir, "config.yaml")}, o.Args...)...)
	if o.LogFile == "" {
		g.Out = &syncbuf.Buffer{}
		g.Cmd.Stdout, g.Cmd.Stderr = g.Out, g.Out
	} else {
		f, err := os.Create(o.LogFile)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close() // the process has its own
		g.Cmd.Stdout, g.Cmd.Stderr = f, f
	}
	g.Cmd.Env = childEnv(o.Env)
	if err := g.Cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = g.Cmd.Wait(); close(g.Done) }()
	t.Cleanup(g.cleanup)
	if o.Listen {
		g.waitListen()
	}
	if o.Ready > 0 {
		timeout := o.ReadyTimeout
		if timeout == 0 {
			timeout = 10 * time.Second
		}
		g.WaitLog(`msg="worker ready"`, o.Ready, timeout)
	}
	return g
}

// checkTLSPorts fails t when conf, a config.yaml, has the gateway listen
// for TLS, or serve the Control API, on a port that this process did not
// hand out (FreePort, TLSPort): APISIX's default 9443 where conf has no
// apisix.ssl section, 9090 where it has no apisix.control.
// A conf that does not parse is left to the gateway to refuse.
func checkTLSPorts(t testing.TB, conf string) {
	t.Helper()
	c, _, err := nodeconf.Parse([]byte(conf), "config.yaml")
	if err != nil {
		return
	}
	handed.Lock()
	defer handed.Unlock()
	if c.APISIX.EnableControl && !handed.ports[c.APISIX.Control.Port] {
		t.Fatalf("e2e: config.yaml serves the Control API on port %d, which no test took as free "+
			"(APISIX's default 9090 when apisix.control is not written): write enable_control: false, "+
			"or apisix.control with a FreePort", c.APISIX.Control.Port)
	}
	if !c.APISIX.SSL.Enable {
		return
	}
	for _, l := range c.APISIX.SSL.Listen {
		if !handed.ports[l.Port] {
			why := ""
			if l.Port == 9443 {
				why = " (APISIX's default: no apisix.ssl.listen)"
			}
			t.Fatalf("e2e: config.yaml listens for TLS on port %d, which no test took as free%s: "+
				"give it SSLListen(port), or ssl.enable: false", l.Port, why)
		}
	}
}

// Restart stops g (unless the test set Stopped: then its cleanup waits for
// it) and starts the binary again for t on the same directory and port,
// with o's other settings; o.Config is not used: the files stay as they
// are.
func (g *Gateway) Restart(t testing.TB, o Options) *Gateway {
	t.Helper()
	if !g.Stopped.Swap(true) {
		g.Stop()
	}
	o.Dir, o.Port, o.Config = g.Dir, g.Port, nil
	return Start(t, o)
}

func (g *Gateway) cleanup() {
	if !g.Stopped.Load() {
		g.Stop()
		return
	}
	select {
	case <-g.Done:
	case <-time.After(5 * time.Second):
		g.T.Errorf("the gateway did not stop")
		g.kill()
	}
	if strings.Contains(g.Log(), "WARNING: DATA RACE") {
		g.T.Errorf("the gateway has a data race")
	}
	if g.T.Failed() {
		g.T.Logf("gateway output:\n%s", g.Log())
	}
}

// waitListen waits until the listen port accepts a connection.
func (g *Gateway) waitListen() {
	g.T.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", g.Addr(), 200*time.Millisecond)
		if err == nil {
			c.Close()
			return
		}
		select {
		case <-g.Done:
			g.T.Fatalf("gateway exited at start:\n%s", g.Log())
		default:
		}
		if time.Now().After(deadline) {
			g.T.Fatalf("gateway did not listen within 10s:\n%s", g.Log())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// PID is the gateway process's (the supervisor's) pid.
func (g *Gateway) PID() int { return g.Cmd.Process.Pid }

// Addr is the listen address, 127.0.0.1:port.
func (g *Gateway) Addr() string { return "127.0.0.1:" + strconv.Itoa(g.Port) }

// TLSAddr is the address of the TLS listener of a gateway whose
// config.yaml has SSLListen(Port): 127.0.0.1:TLSPort(Port).
func (g *Gateway) TLSAddr() string { return "127.0.0.1:" + strconv.Itoa(TLSPort(g.Port)) }

// URL is the http URL of path on the listen address.
func (g *Gateway) URL(path string) string { return "http://" + g.Addr() + path }

// Stop ends the process the test started: SIGTERM, then, after 5 s, SIGKILL
// to it and to its worker processes. It fails the test when the process
// had exited before, exits with a status other than 0, does not stop
// within 5 s, or its output shows a data race; it logs the output when the
// test failed.
func (g *Gateway) Stop() {
	select {
	case <-g.Done:
		g.T.Errorf("the gateway exited before the test ended: %v", g.Cmd.ProcessState)
	default:
		_ = g.Cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-g.Done:
			if code := g.Cmd.ProcessState.ExitCode(); code != 0 {
				g.T.Errorf("the gateway exited with status %d on SIGTERM", code)
			}
		case <-time.After(5 * time.Second):
			g.T.Errorf("the gateway did not stop within 5s of SIGTERM")
			g.kill()
		}
	}
	if strings.Contains(g.Log(), "WARNING: DATA RACE") {
		g.T.Errorf("the gateway has a data race")
	}
	if g.T.Failed() {
		g.T.Logf("gateway output:\n%s", g.Log())
	}
}

// kill ends the process and its workers with SIGKILL and waits for it:
// the workers would outlive it (they wait for the next supervisor).
func (g *Gateway) kill() {
	ws := Workers(g.T, g.PID())
	_ = g.Cmd.Process.Kill()
	for _, w := range ws {
		_ = syscall.Kill(w.PID, syscall.SIGKILL)
	}
	<-g.Done
}

// Signal sends sig to the gateway process, failing the test when it
// cannot.
func (g *Gateway) Signal(sig syscall.Signal) {
	g.T.Helper()
	if err := g.Cmd.Process.Signal(sig); err != nil {
		g.T.Fatal(err)
	}
}

// WaitLog waits until the output holds n lines that match re, and returns
// them. It fails the test when the timeout passes, or when the process
// exits first unless its output goes to a LogFile (which its workers may
// go on writing to).
func (g *Gateway) WaitLog(re string, n int, timeout time.Duration) []string {
	g.T.Helper()
	rx := regexp.MustCompile(re)
	deadline := time.Now().Add(timeout)
	for {
		var got []string
		for _, l := range strings.Split(g.Log(), "\n") {
			if rx.MatchString(l) {
				got = append(got, l)
			}
		}
		if len(got) >= n {
			return got
		}
		if g.logFile == "" {
			select {
			case <-g.Done:
				g.T.Fatalf("gateway exited while waiting for %d lines matching %q:\n%s", n, re, g.Log())
			default:
			}
		}
		if time.Now().After(deadline) {
			g.T.Fatalf("after %v: %d lines match %q, want %d", timeout, len(got), re, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// LogLine returns the first line of the output that matches re, waiting
// for it up to timeout; it fails t with t.Errorf (and returns "") when
// none comes in time.
func (g *Gateway) LogLine(t testing.TB, re string, timeout time.Duration) string {
	t.Helper()
	rx := regexp.MustCompile(re)
	deadline := time.Now().Add(timeout)
	for {
		for _, l := range strings.Split(g.Log(), "\n") {
			if rx.MatchString(l) {
				return l
			}
		}
		if time.Now().After(deadline) {
			t.Errorf("no log line matches %q", re)
			return ""
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Rewrite replaces apisix.yaml atomically, its mtime a second ahead so
// that it moves even on coarse-grained file systems.
func (g *Gateway) Rewrite(apisixYAML string) {
	g.T.Helper()
	tmp := filepath.Join(g.Dir, ".apisix.yaml.tmp")
	WriteFile(g.T, tmp, apisixYAML)
	future := time.Now().Add(time.Second)
	_ = os.Chtimes(tmp, future, future)
	if err := os.Rename(tmp, filepath.Join(g.Dir, "apisix.yaml")); err != nil {
		g.T.Fatal(err)
	}
}

// LogField returns the value of key in a log line (logfmt), "" if absent.
func LogField(line, key string) string {
	rx := regexp.MustCompile(`(?:^| )` + regexp.QuoteMeta(key) + `=("[^"]*"|\S*)`)
	m := rx.FindStringSubmatch(line)
	if m == nil {
		return ""
	}
	return strings.Trim(m[1], `"`)
}

// Run runs `bin args...` to its end, killed (by its pid) when it still
// runs after timeout, and returns its output, standard output and error
// together, and the error Wait returned.
func Run(bin string, timeout time.Duration, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = childEnv(nil)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// childEnv is the environment of a process the harness starts: the test
// process's, GORACE with atexit_sleep_ms=0 added to the options it has,
// then extra. A race-enabled build otherwise sleeps 1 s at every exit,
// the supervisor's and each of its workers' (which inherit it), and every
// gateway a test stops waited that out, beside its 5 s bound.
func childEnv(extra []string) []string {
	gorace := "atexit_sleep_ms=0"
	if v := os.Getenv("GORACE"); v != "" {
		gorace = v + " " + gorace
	}
	// exec.Cmd keeps the last value of a name given twice.
	return append(append(os.Environ(), "GORACE="+gorace), extra...)
}

// WriteFile writes data to path (mode 0644), failing the test when it
// cannot. It writes a file beside path and renames it over path, as a
// configuration tool should: a gateway reloading on an earlier signal
// may read path at any moment, and a file rewritten in place can be read
// half written, which still parses (a config.yaml cut before its
// error_log_level took the log to its default level until the next
// reload, and with it the lines a test was waiting for).
func WriteFile(t testing.TB, path, data string) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// Eventually polls f every 50 ms until it returns nil, and fails the test
// with f's last error when timeout passes first.
func Eventually(t testing.TB, timeout time.Duration, f func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %v", timeout, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
