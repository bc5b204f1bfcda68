package plugintest

import (
	"io"
	"net"
	"strconv"
	"testing"
	"time"
)

// TestStartRedisRetries: a cluster node whose bus port another process
// holds exits while starting; startRedis starts it again on other ports
// and returns once that one answers.
func TestStartRedisRetries(t *testing.T) {
	bin := redisBinary(t)
	held, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	taken := held.Addr().(*net.TCPAddr).Port
	tries := 0
	n := startRedis(t, bin, t.TempDir(), func(int) []string {
		tries++
		bus := taken
		if tries > 1 {
			bus = FreePort(t)
		}
		return []string{"--cluster-enabled", "yes", "--cluster-port", strconv.Itoa(bus), "--cluster-config-file", "nodes.conf"}
	})
	if tries != 2 {
		t.Fatalf("%d tries, want 2: the first with the held bus port", tries)
	}
	if got, err := RedisCommand(n.Addr(), "PING"); err != nil || got != "PONG" {
		t.Fatalf("PING: %q, %v", got, err)
	}
}

// TestRedisNodeRestart: a killed server answers no more; started again it
// answers on the same port, as a new process.
func TestRedisNodeRestart(t *testing.T) {
	n := RedisNodeOf(t)
	if _, err := RedisCommand(n.Addr(), "SET", "k", "v"); err != nil {
		t.Fatal(err)
	}
	pid := n.Process().Pid
	n.Kill()
	if _, err := RedisCommand(n.Addr(), "PING"); err == nil {
		t.Fatal("the killed server answered")
	}
	n.Restart()
	if n.Process().Pid == pid {
		t.Fatalf("pid %d again: not started again", pid)
	}
	if got, err := RedisCommand(n.Addr(), "GET", "k"); err != nil || got != "" {
		t.Fatalf("GET k on the new server: %q, %v; want nothing, a server without persistence", got, err)
	}
}

// TestHangRedis: a hung server takes connections and answers nothing;
// resume (twice is once) has it answer again, and so does the end of a
// test that left it hung.
func TestHangRedis(t *testing.T) {
	port, proc := RedisProcess(t)
	addr := "127.0.0.1:" + strconv.Itoa(port)
	answers := func() bool {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(300 * time.Millisecond))
		if _, err := c.Write([]byte("PING\r\n")); err != nil {
			return false
		}
		b := make([]byte, 7)
		n, _ := io.ReadFull(c, b)
		return string(b[:n]) == "+PONG\r\n"
	}
	if !answers() {
		t.Fatal("no PONG before the hang")
	}
	resume := HangRedis(t, proc)
	if answers() {
		t.Fatal("a hung server answered")
	}
	resume()
	resume()
	if !answers() {
		t.Fatal("no PONG after resume")
	}
	t.Run("left hung", func(t *testing.T) {
		HangRedis(t, proc)
		if answers() {
			t.Fatal("a hung server answered")
		}
	})
	if !answers() {
		t.Fatal("no PONG after a test that left the server hung ended")
	}
}
