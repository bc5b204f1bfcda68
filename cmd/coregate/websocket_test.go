package main

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"coregate/internal/e2e"
)

// wsEchoOrigin is a WebSocket origin on loopback that sends every message
// back; open counts its connections not yet ended.
func wsEchoOrigin(t *testing.T) (addr string, open *atomic.Int32) {
	t.Helper()
	open = new(atomic.Int32)
	up := websocket.Upgrader{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		open.Add(1)
		defer open.Add(-1)
		defer c.Close()
		for {
			typ, rd, err := c.NextReader()
			if err != nil {
				return
			}
			wr, err := c.NextWriter(typ)
			if err != nil {
				return
			}
			if _, err := io.Copy(wr, rd); err != nil {
				return
			}
			if wr.Close() != nil {
				return
			}
		}
	}))
	t.Cleanup(srv.Close)
	return srv.Listener.Addr().String(), open
}

// wsRound sends msg on c and checks that it comes back, reading beside
// the write.
func wsRound(t *testing.T, c *websocket.Conn, msg []byte) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(20 * time.Second))
	got := make(chan error, 1)
	go func() {
		_, b, err := c.ReadMessage()
		if err == nil && !bytes.Equal(b, msg) {
			err = fmt.Errorf("echo of %d bytes came back as %d bytes, or changed", len(msg), len(b))
		}
		got <- err
	}()
	if err := c.WriteMessage(websocket.BinaryMessage, msg); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatal(err)
	}
}

func wsGateway(t *testing.T, origin string, args ...string) *gateway {
	t.Helper()
	return wsGatewayRoute(t, obj{"id": 1, "uri": "/ws", "enable_websocket": true, "upstream": upstreamOf(nodes(origin), nil)}, args...)
}

func wsGatewayRoute(t *testing.T, route obj, args ...string) *gateway {
	t.Helper()
	yaml := routesYAML(route)
	return bindGateway(e2e.Start(t, e2e.Options{Bin: binPath, APISIX: yaml, Listen: true, Args: args,
		Config: func(port int) string { return baseConfig(port, "") }}))
}

// TestWebsocketThroughBinary: echo and a 16 MiB message through the
// gateway, then 1000 quiet sockets open at once, each still echoing, and
// all of them gone from the origin once the clients close.
func TestWebsocketThroughBinary(t *testing.T) {
	t.Parallel()
	origin, open := wsEchoOrigin(t)
	g := wsGateway(t, origin)
	url := "ws://" + g.Addr() + "/ws"
	c, resp, err := websocket.DefaultDialer.Dial(url, nil)
	if err != nil {
		t.Fatalf("dial: %v (%v)", err, resp)
	}
	wsRound(t, c, []byte("hello"))
	big := make([]byte, 16<<20)
	for i := range big {
		big[i] = byte(i * 13)
	}
	wsRound(t, c, big)
	c.Close()

	const n = 1000
	cs := make([]*websocket.Conn, 0, n)
	defer func() {
		for _, c := range cs {
			c.Close()
		}
	}()
	for range n {
		c, _, err := websocket.DefaultDialer.Dial(url, nil)
		if err != nil {
			t.Fatalf("socket %d: %v", len(cs), err)
		}
		cs = append(cs, c)
	}
	time.Sleep(500 * time.Millisecond) // quiet
	for i, c := range cs {
		wsRound(t, c, []byte(fmt.Sprint("socket ", i)))
	}
	if k := open.Load(); k != n {
		t.Fatalf("the origin holds %d connections, want %d", k, n)
	}
	for _, c := range cs {
		c.Close()
	}
	cs = cs[:0]
	eventually(t, 10*time.Second, func() error {
		if k := open.Load(); k != 0 {
			return fmt.Errorf("the origin still holds %d connections", k)
		}
		return nil
	})
}

// TestWebsocketDrainBinary: SIGTERM with tunnels open: they keep working
// until the clients close them, and the gateway exits then, well before
// its shutdown timeout.
func TestWebsocketDrainBinary(t *testing.T) {
	t.Parallel()
	origin, _ := wsEchoOrigin(t)
	g := wsGateway(t, origin, "--shutdown-timeout", "30s")
	url := "ws://" + g.Addr() + "/ws"
	var cs []*websocket.Conn
	for range 10 {
		c, _, err := websocket.DefaultDialer.Dial(url, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		cs = append(cs, c)
	}
	g.Stopped.Store(true)
	if err := g.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * time.Second) // past the drain's idle closes
	for i, c := range cs {
		wsRound(t, c, []byte(fmt.Sprint("draining ", i)))
	}
	select {
	case <-g.done:
		t.Fatal("the gateway exited with tunnels open")
	default:
	}
	for _, c := range cs {
		c.Close()
	}
	select {
	case <-g.done:
	case <-time.After(10 * time.Second):
		t.Fatal("the gateway did not exit once its tunnels closed")
	}
}

// TestWebsocketLimitConn: an open tunnel is one of limit-conn's
// connections until it closes.
func TestWebsocketLimitConn(t *testing.T) {
	t.Parallel()
	origin, _ := wsEchoOrigin(t)
	g := wsGatewayRoute(t, obj{"id": 1, "uri": "/ws", "enable_websocket": true,
		"plugins":  obj{"limit-conn": obj{"conn": 1, "burst": 0, "default_conn_delay": 0.1, "key": "remote_addr"}},
		"upstream": upstreamOf(nodes(origin), nil)})
	url := "ws://" + g.Addr() + "/ws"
	first, _, err := websocket.DefaultDialer.Dial(url, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	wsRound(t, first, []byte("one"))
	if c, resp, err := websocket.DefaultDialer.Dial(url, nil); err == nil {
		c.Close()
		t.Fatal("a second tunnel opened past conn 1")
	} else if resp == nil || resp.StatusCode != 503 {
		t.Fatalf("second tunnel: %v, %v; want 503", err, resp)
	}
	first.Close()
	eventually(t, 5*time.Second, func() error {
		c, _, err := websocket.DefaultDialer.Dial(url, nil)
		if err != nil {
			return err
		}
		defer c.Close()
		wsRound(t, c, []byte("two"))
		return nil
	})
}
