package plugintest

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"coregate/plugins"
)

// RedisServer starts a redis-server process on a free loopback port for
// the test, with extra configuration arguments ("--requirepass", "x"),
// and returns its port; it is stopped, by its PID, when the test ends.
// Without a redis-server binary the test is skipped, unless CI is set.
func RedisServer(t testing.TB, args ...string) int {
	t.Helper()
	port, _ := RedisProcess(t, args...)
	return port
}

// RedisProcess is RedisServer that also returns the server's process,
// for a test that stops it (SIGSTOP) to hang it and continues it
// (SIGCONT) to bring it back.
func RedisProcess(t testing.TB, args ...string) (int, *os.Process) {
	t.Helper()
	n := RedisNodeOf(t, args...)
	return n.Port, n.proc
}

// HangRedis stops the redis-server proc (RedisProcess's) with SIGSTOP: it
// keeps its connections and answers nothing, a hung server. The function
// it returns sends SIGCONT, once; a test that ends with the server still
// stopped has it sent then, before the cleanups registered earlier.
func HangRedis(t testing.TB, proc *os.Process) (resume func()) {
	t.Helper()
	if err := proc.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	var err error
	cont := func() { once.Do(func() { err = proc.Signal(syscall.SIGCONT) }) }
	t.Cleanup(cont)
	return func() {
		t.Helper()
		if cont(); err != nil {
			t.Fatal(err)
		}
	}
}

// RedisNode is a redis-server the test started, which it can kill and
// start again on the same port, directory and arguments: a cluster node
// started again rejoins its cluster (its nodes.conf is in the directory).
// Its methods are for the test's goroutine.
type RedisNode struct {
	// Port is the server's loopback port.
	Port   int
	t      testing.TB
	bin    string
	dir    string
	argv   []string
	proc   *os.Process
	exited chan struct{}
}

// Addr is the server's address, 127.0.0.1:Port.
func (n *RedisNode) Addr() string { return "127.0.0.1:" + strconv.Itoa(n.Port) }

// Process is the server's process while it runs.
func (n *RedisNode) Process() *os.Process { return n.proc }

// Kill ends the server with SIGKILL, by its pid, and waits until it
// exited.
func (n *RedisNode) Kill() {
	_ = n.proc.Kill()
	<-n.exited
}

// Restart starts the server Kill ended again on its port, directory and
// arguments, and waits until it answers (up to 10 s).
func (n *RedisNode) Restart() {
	n.t.Helper()
	if err := n.launch(); err != nil {
		log, _ := os.ReadFile(filepath.Join(n.dir, "redis.log"))
		n.t.Fatalf("redis-server on %s, started again: %v\n%s", n.Addr(), err, log)
	}
}

// RedisNodeOf starts a redis-server as RedisServer does, and returns it.
func RedisNodeOf(t testing.TB, args ...string) *RedisNode {
	t.Helper()
	return startRedis(t, redisBinary(t), t.TempDir(), func(port int) []string { return args })
}

// RedisCluster starts a Redis Cluster of n masters (n >= 3) on free
// loopback ports, with every slot assigned, and returns their addresses.
func RedisCluster(t testing.TB, n int) []string {
	t.Helper()
	var addrs []string
	for _, node := range RedisClusterNodes(t, n) {
		addrs = append(addrs, node.Addr())
	}
	return addrs
}

// RedisClusterNodes is RedisCluster returning the masters, for a test
// that kills one and starts it again.
func RedisClusterNodes(t testing.TB, n int) []*RedisNode {
	t.Helper()
	bin := redisBinary(t)
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		needRedis(t, "redis-cli")
	}
	var nodes []*RedisNode
	var addrs []string
	for range n {
		node := startRedis(t, bin, t.TempDir(), func(int) []string {
			return []string{"--cluster-enabled", "yes", "--cluster-port", strconv.Itoa(FreePort(t)),
				"--cluster-config-file", "nodes.conf", "--cluster-node-timeout", "5000"}
		})
		nodes = append(nodes, node)
		addrs = append(addrs, node.Addr())
	}
	cmd := exec.Command(cli, append(append([]string{"--cluster", "create"}, addrs...), "--cluster-replicas", "0", "--cluster-yes")...)
	if out, err := cmd.CombinedOutput(); err != nil {
		var logs strings.Builder
		for _, node := range nodes {
			log, _ := os.ReadFile(filepath.Join(node.dir, "redis.log"))
			fmt.Fprintf(&logs, "--- %s\n%s", node.Addr(), log)
		}
		t.Fatalf("redis-cli --cluster create: %v\n%s\n%s", err, out, logs.String())
	}
	deadline := time.Now().Add(20 * time.Second)
	for _, a := range addrs {
		for {
			reply, err := RedisCommand(a, "CLUSTER", "INFO")
			if err == nil && strings.Contains(reply, "cluster_state:ok") {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("cluster node %s not ready: %q, %v", a, reply, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	return nodes
}

// FreePort is a loopback TCP port that was free a moment ago.
func FreePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func redisBinary(t testing.TB) string {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		needRedis(t, "redis-server")
	}
	return bin
}

func needRedis(t testing.TB, what string) {
	t.Helper()
	if os.Getenv("CI") != "" {
		t.Fatalf("%s not found: install redis-server (apt-get install redis-server)", what)
	}
	t.Skipf("%s not found", what)
}

// startRedis starts a redis-server on a free loopback port with the
// arguments args gives for that port, in dir, and returns it once the
// server answers a command (a dial alone can succeed before the server
// has finished starting, and on a port that a server then fails to keep).
// A server that exits while starting, for example because another process
// took its cluster bus port first, is started again on other ports; the
// test fails after three such tries. The server is killed, by its PID, when
// the test ends (a stopped one too).
func startRedis(t testing.TB, bin, dir string, args func(port int) []string) *RedisNode {
	t.Helper()
	n := &RedisNode{t: t, bin: bin, dir: dir}
	t.Cleanup(func() {
		if n.proc != nil {
			n.Kill()
		}
	})
	for try := 1; ; try++ {
		_ = os.Remove(filepath.Join(dir, "nodes.conf")) // a cluster node's, from a failed try
		n.Port = FreePort(t)
		n.argv = append([]string{"--port", strconv.Itoa(n.Port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
			"--dir", dir, "--logfile", filepath.Join(dir, "redis.log"), "--daemonize", "no"}, args(n.Port)...)
		err := n.launch()
		if err == nil {
			return n
		}
		if err != errExited || try == 3 {
			log, _ := os.ReadFile(filepath.Join(dir, "redis.log"))
			t.Fatalf("redis-server on %s: %v\n%s", n.Addr(), err, log)
		}
	}
}

// launch runs the server on n's arguments and waits until it answers.
func (n *RedisNode) launch() error {
	cmd := exec.Command(n.bin, n.argv...)
	if err := cmd.Start(); err != nil {
		return err
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	n.proc, n.exited = cmd.Process, exited
	return awaitRedis(n.Addr(), exited)
}

var errExited = errors.New("exited while starting")

// awaitRedis waits, for up to 10 s, until the Redis at addr answers a
// command; it gives up at once with errExited when exited is closed.
func awaitRedis(addr string, exited <-chan struct{}) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		// Any reply, NOAUTH included, says the server is serving.
		_, err := RedisCommand(addr, "PING")
		var reply replyError
		if err == nil || errors.As(err, &reply) {
			return nil
		}
		select {
		case <-exited:
			return errExited
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("did not start: %w", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// replyError is an error reply from Redis ("-ERR ...", "-NOAUTH ...").
type replyError string

func (e replyError) Error() string { return "redis: " + string(e) }

// RedisCommand sends one command to the Redis at addr and returns its
// reply as text: a status or bulk string as it is, an integer in decimal,
// an array's elements one per line; an error reply is an error.
func RedisCommand(addr string, args ...string) (string, error) {
	r, err := RedisCommands(addr, args)
	if err != nil {
		return "", err
	}
	return r[0], nil
}

// RedisCommands sends commands one after the other on one connection
// (AUTH, SELECT, then what they allow) and returns their replies, as
// RedisCommand; the first error reply ends it.
func RedisCommands(addr string, cmds ...[]string) ([]string, error) {
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	br := bufio.NewReader(c)
	var out []string
	for _, args := range cmds {
		var b strings.Builder
		fmt.Fprintf(&b, "*%d\r\n", len(args))
		for _, a := range args {
			fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
		}
		if _, err := c.Write([]byte(b.String())); err != nil {
			return out, err
		}
		r, err := readReply(br)
		if err != nil {
			return out, err
		}
		out = append(out, r)
	}
	return out, nil
}

func readReply(r *bufio.Reader) (string, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return "", err
	}
	line = strings.TrimRight(line, "\r\n")
	if line == "" {
		return "", fmt.Errorf("empty reply line")
	}
	switch line[0] {
	case '+', ':':
		return line[1:], nil
	case '-':
		return "", replyError(line[1:])
	case '$':
		n, _ := strconv.Atoi(line[1:])
		if n < 0 {
			return "", nil
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return "", err
		}
		return string(buf[:n]), nil
	case '*':
		n, _ := strconv.Atoi(line[1:])
		var parts []string
		for range n {
			s, err := readReply(r)
			if err != nil {
				return "", err
			}
			parts = append(parts, s)
		}
		return strings.Join(parts, "\n"), nil
	}
	return "", fmt.Errorf("unexpected reply %q", line)
}

// CheckRedisFields checks that plugin name refuses a Redis configuration
// missing what its policy needs, with the field's name, and takes a
// complete one: base is the plugin's own members, without braces
// (`"rate":1,"burst":1,"key":"remote_addr"`).
func CheckRedisFields(t *testing.T, name, base string) {
	t.Helper()
	conf := func(redis string) string { return "{" + base + "," + redis + "}" }
	for _, tc := range []struct{ conf, want string }{
		{conf(`"policy":"redis"`), "redis_host"},
		{conf(`"policy":"redis-cluster","redis_cluster_nodes":["127.0.0.1:7000"]`), "redis_cluster_name"},
		{conf(`"policy":"redis-cluster","redis_cluster_name":"c","redis_cluster_nodes":["nohost"]`), "failed to parse address: nohost"},
	} {
		err := plugins.Check(name, json.RawMessage(tc.conf))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error naming %q", tc.conf, err, tc.want)
		}
	}
	for _, c := range []string{
		conf(`"policy":"redis","redis_host":"127.0.0.1","redis_port":6379`),
		conf(`"policy":"redis-cluster","redis_cluster_name":"c","redis_cluster_nodes":["127.0.0.1:7000","[::1]:7001"]`),
	} {
		if err := plugins.Check(name, json.RawMessage(c)); err != nil {
			t.Errorf("%s: %v", c, err)
		}
	}
}
