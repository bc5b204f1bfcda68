package main

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"coregate/internal/e2e"
)

// The gateway's listening sockets set SO_REUSEADDR, as nginx's do: the
// connections a server closed first stay in TIME_WAIT on its port for a
// minute, and Linux lets another socket bind the port meanwhile only if
// both that socket and the closed connections' listener set SO_REUSEADDR
// (SO_REUSEPORT alone admits only sockets that set it too). Without it,
// nginx could not take the port of a gateway that had closed keep-alive
// clients, nor the gateway that of an nginx.

// closeFirst makes one request on a new connection to addr asking the
// server to close it, reads the answer to the end (the server's FIN), and
// only then closes its end: the server's side of the connection is left in
// TIME_WAIT. It returns the answer's status line.
func closeFirst(t *testing.T, addr string) string {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: reuse.test\r\nConnection: close\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(c)
	if err != nil {
		t.Fatalf("reading to the server's close: %v", err)
	}
	status, _, _ := strings.Cut(string(b), "\r\n")
	return status
}

// timeWait counts the connections with local port port in TIME_WAIT, IPv4
// and IPv6 (a dual-stack listener's are IPv4-mapped): what
// `ss -tan state time-wait` lists, from /proc/net/tcp and tcp6.
func timeWait(t *testing.T, port int) int {
	t.Helper()
	local := fmt.Sprintf(":%04X", port)
	n := 0
	for _, name := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		b, err := os.ReadFile(name)
		if err != nil {
			t.Skipf("cannot count TIME_WAIT: %v", err)
		}
		for _, line := range strings.Split(string(b), "\n") {
			// sl local_address rem_address st ...
			f := strings.Fields(line)
			if len(f) > 3 && strings.HasSuffix(f[1], local) && f[3] == "06" {
				n++
			}
		}
	}
	return n
}

// reuseConfig is a node whose workers listen on 127.0.0.1:ports[0] and for
// TLS on ports[3], its Admin API on ports[1] (on its embedded etcd) and its
// Prometheus export server on ports[2]: every listening socket the gateway
// opens. ports[3] is e2e.TLSPort(ports[0]) (reusePorts).
func reuseConfig(ports []int) func(int) string {
	return func(int) string { return exportEtcdConfig(ports[1], ports[2])(ports[0]) }
}

// reusePorts are the four ports of a reuseConfig, free.
func reusePorts(t *testing.T) []int {
	ports := []int{freePort(t), freePort(t), freePort(t)}
	return append(ports, e2e.TLSPort(ports[0]))
}

// closedFirst checks closeFirst's answer from the gateway's port i of
// reusePorts: an HTTP answer, but from the TLS listener (ports[3]), which
// closes a client that does not speak TLS without one.
func closedFirst(t *testing.T, i int, status string) {
	t.Helper()
	if i == 3 && status != "" || i != 3 && !strings.HasPrefix(status, "HTTP/1.1 ") {
		t.Fatalf("listener %d answered %q", i, status)
	}
}

// awaitListening waits until something listens on each of ports.
func awaitListening(t *testing.T, ports []int) {
	t.Helper()
	for _, p := range ports {
		eventually(t, 30*time.Second, func() error {
			c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(p), time.Second)
			if err == nil {
				c.Close()
			}
			return err
		})
	}
}

// TestPortsReusableAfterGateway: once a gateway whose listeners (proxy,
// TLS, Admin API, Prometheus export) closed their clients' connections first
// has stopped, a server that sets SO_REUSEADDR but not SO_REUSEPORT, as
// nginx does, binds their ports at once.
func TestPortsReusableAfterGateway(t *testing.T) {
	ports := reusePorts(t)
	g := startSupervisor(t, "", reuseConfig(ports), 1)
	awaitListening(t, ports)
	for i, p := range ports {
		for range 3 {
			closedFirst(t, i, closeFirst(t, "127.0.0.1:"+strconv.Itoa(p)))
		}
		if timeWait(t, p) == 0 {
			t.Fatalf("no connection of port %d in TIME_WAIT: the test cannot tell", p)
		}
	}
	g.stopped.Store(true)
	g.stop()
	// Go's listener sets SO_REUSEADDR and not SO_REUSEPORT, as nginx's
	// does without reuseport: on the address the gateway had, on 0.0.0.0
	// (nginx's listen 80) and on the IPv6 wildcard, dual-stack.
	for i, p := range ports {
		for _, addr := range []string{"127.0.0.1:", "0.0.0.0:", "[::]:"} {
			network := "tcp4"
			if addr[0] == '[' {
				network = "tcp"
			}
			l, err := net.Listen(network, addr+strconv.Itoa(p))
			if err != nil {
				t.Fatalf("binding the stopped gateway's port %d (listener %d), %d connections in TIME_WAIT on it: %v",
					p, i, timeWait(t, p), err)
			}
			l.Close()
		}
	}
}

// TestGatewayTakesPortsAfterServer: the gateway starts at once, every
// listener of it, on the ports of servers (with SO_REUSEADDR, as Go's and
// nginx's listeners set it) that closed their clients' connections first
// and stopped.
func TestGatewayTakesPortsAfterServer(t *testing.T) {
	ports := reusePorts(t)
	for _, p := range ports {
		l, err := net.Listen("tcp4", "127.0.0.1:"+strconv.Itoa(p))
		if err != nil {
			t.Fatal(err)
		}
		srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			_, _ = io.WriteString(w, "before")
		})}
		srv.SetKeepAlivesEnabled(false) // the server closes first
		served := make(chan struct{})
		go func() { _ = srv.Serve(l); close(served) }()
		for range 3 {
			if s := closeFirst(t, l.Addr().String()); s != "HTTP/1.1 200 OK" {
				t.Fatalf("the server answered %q", s)
			}
		}
		if timeWait(t, p) == 0 {
			t.Fatalf("no connection of port %d in TIME_WAIT: the test cannot tell", p)
		}
		_ = srv.Close()
		<-served
	}
	g := startSupervisor(t, "", reuseConfig(ports), 1)
	g.port = ports[0]
	awaitListening(t, ports)
	for i, p := range ports {
		closedFirst(t, i, closeFirst(t, "127.0.0.1:"+strconv.Itoa(p)))
	}
}
