//go:build !race

package worker

import (
	"bytes"
	"net"
	"strconv"
	"testing"
)

// TestAllocBalancers guards a pick and a release of each balancer, and a
// chash request's key read and hashed on the request path (one node:
// the harness answers from the last node's connection only).
func TestAllocBalancers(t *testing.T) {
	nodes := `{"127.0.0.1:1":1,"127.0.0.1:2":2,"127.0.0.1:3":1}`
	for _, typ := range []string{"roundrobin", "chash", "least_conn", "ewma"} {
		b := testBalancer(t, `{"type":"`+typ+`","key":"remote_addr","nodes":`+nodes+`}`)
		var tried triedSet
		tried.add(1)
		now := int64(1)
		allocs := testing.AllocsPerRun(500, func() {
			now += 1e6
			i := b.pick(tried, uint32(now), now)
			b.release(i, false, 5e6, now)
		})
		if allocs != 0 {
			t.Errorf("%s: a pick allocates %.1f times, want 0", typ, allocs)
		}
	}

	for _, up := range []string{
		`{"type":"chash","hash_on":"vars_combinations","key":"$remote_addr-${arg_x ?? none}$uri","nodes":{"127.0.0.1:1980":1}}`,
		`{"type":"chash","hash_on":"header","key":"user-agent","nodes":{"127.0.0.1:1980":1}}`,
		`{"type":"chash","key":"remote_port","nodes":{"127.0.0.1:1980":1}}`,
		`{"type":"chash","key":"server_addr","nodes":{"127.0.0.1:1980":1}}`,
		`{"type":"chash","key":"server_name","nodes":{"127.0.0.1:1980":1}}`,
		`{"type":"chash","key":"hostname","nodes":{"127.0.0.1:1980":1}}`,
		`{"type":"chash","hash_on":"vars_combinations","key":"$server_addr:$remote_port@$hostname/$server_name","nodes":{"127.0.0.1:1980":1}}`,
	} {
		h := newHarness(t, testSpec(t, nil, `{"id":"1","uri":"/hello","upstream":`+up+`}`))
		req := []byte("GET /hello?x=1 HTTP/1.1\r\nHost: example.com\r\nUser-Agent: bench\r\n\r\n")
		resp := []byte("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
		for i := 0; i < 10; i++ {
			h.roundTrip(req, resp)
		}
		if _, got := h.roundTrip(req, resp); !bytes.HasPrefix(got, []byte("HTTP/1.1 200 OK\r\n")) {
			t.Fatalf("unexpected answer:\n%s", got)
		}
		allocs := testing.AllocsPerRun(200, func() { h.roundTrip(req, resp) })
		if allocs != 0 {
			t.Errorf("%s: the request path allocates %.1f times per request, want 0", up, allocs)
		}
	}
}

// TestAllocLocalIP guards the reading of $server_addr from the socket of
// a connection accepted on a listener bound to every address.
func TestAllocLocalIP(t *testing.T) {
	l, err := net.Listen("tcp", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	c, err := net.Dial("tcp", net.JoinHostPort("127.0.0.3", strconv.Itoa(l.Addr().(*net.TCPAddr).Port)))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	rc, err := s.(*net.TCPConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	_ = rc.Control(func(fd uintptr) {
		if ip, ok := localIP(int(fd)); !ok || ip.String() != "127.0.0.3" {
			t.Errorf("localIP = %v, %v; want 127.0.0.3", ip, ok)
		}
		allocs := testing.AllocsPerRun(200, func() { localIP(int(fd)) })
		if allocs != 0 {
			t.Errorf("localIP allocates %.1f times, want 0", allocs)
		}
	})
}
