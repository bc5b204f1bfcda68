package main

import (
	"net"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestControlAPIOff: with apisix.enable_control false nothing listens on
// apisix.control's port; with it on, the same config serves /v1/routes.
func TestControlAPIOff(t *testing.T) {
	t.Parallel()
	for _, on := range []bool{false, true} {
		cport := freePort(t)
		startGatewayConfig(t, "routes: []\n#END\n", func(port int) string {
			return strings.Replace(baseConfig(port, ""), "  enable_control: false\n",
				"  enable_control: "+strconv.FormatBool(on)+"\n  control:\n    port: "+strconv.Itoa(cport)+"\n", 1)
		})
		conn, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(cport), time.Second)
		if conn != nil {
			conn.Close()
		}
		if on != (err == nil) {
			t.Errorf("enable_control %v: dial the control port: %v", on, err)
		}
		if on {
			if r := do(t, newClient(t), "GET", "http://127.0.0.1:"+strconv.Itoa(cport)+"/v1/routes", "", nil, nil); r.status != 200 || r.body != "[]" {
				t.Errorf("/v1/routes: %d %s", r.status, r.body)
			}
		}
	}
}
