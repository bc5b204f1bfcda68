package worker

import (
	"bufio"
	"fmt"
	"hash/crc32"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"testing"
	"time"
)

// TestCHashConnectionVars proxies through a worker listening on every
// address, on real sockets: a chash upstream keyed by remote_port,
// server_addr, server_name or hostname sends each request to the node the
// ring gives that variable's value (the client's port, the address the
// client dialled, "_", the machine's name); the client ports spread the
// connections over the nodes, and a connection's requests stay on one.
func TestCHashConnectionVars(t *testing.T) {
	addrs, _ := idServers(t, 3, nil)
	nodes := fmt.Sprintf(`{"%s":1,"%s":1,"%s":1}`, addrs[0], addrs[1], addrs[2])
	up := func(key string) string {
		return `{"type":"chash","hash_on":"vars","key":"` + key + `","nodes":` + nodes + `}`
	}
	keys := []string{"remote_port", "server_addr", "server_name", "hostname"}
	var routes []string
	for i, key := range keys {
		routes = append(routes, fmt.Sprintf(`{"id":"%d","uri":"/%s","upstream":%s}`, i, key, up(key)))
	}
	w, _ := runWorker(t, Config{Listen: []string{"0.0.0.0:0"}}, testSpec(t, nil, routes...))
	port := w.Addr().Port
	// The ring the worker builds for these nodes: the node owning a value.
	ring := testBalancer(t, up("uri"))
	owner := func(val string) string {
		return ring.nodes[ring.pick(0, crc32.ChecksumIEEE([]byte(val)), 0)].addr
	}
	host, err := os.Hostname()
	if err != nil || host == "" {
		t.Fatalf("os.Hostname: %q, %v", host, err)
	}

	byPort := map[string]int{}
	for n := 0; n < 30; n++ {
		ip := []string{"127.0.0.1", "127.0.0.2"}[n%2]
		c, err := net.DialTimeout("tcp", net.JoinHostPort(ip, strconv.Itoa(port)), 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		_, rport, _ := net.SplitHostPort(c.LocalAddr().String())
		want := map[string]string{
			"remote_port": owner(rport), "server_addr": owner(ip),
			"server_name": owner("_"), "hostname": owner(host),
		}
		br := bufio.NewReader(c)
		for round := 0; round < 2; round++ {
			for _, key := range keys {
				fmt.Fprintf(c, "GET /%s HTTP/1.1\r\nHost: example.com\r\n\r\n", key)
				resp, err := http.ReadResponse(br, nil)
				if err != nil {
					t.Fatalf("%s via %s:%s: %v", key, ip, rport, err)
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				i, err := strconv.Atoi(string(b))
				if resp.StatusCode != 200 || err != nil {
					t.Fatalf("%s via %s:%s: %d %q", key, ip, rport, resp.StatusCode, b)
				}
				if addrs[i] != want[key] {
					t.Errorf("%s via %s:%s: answered by %s, the ring gives %s", key, ip, rport, addrs[i], want[key])
				}
				if key == "remote_port" && round == 0 {
					byPort[addrs[i]]++
				}
			}
		}
		c.Close()
	}
	if len(byPort) < 2 {
		t.Errorf("30 client ports all on one node: %v", byPort)
	}
}
