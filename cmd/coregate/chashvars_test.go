package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"testing"
	"time"

	"coregate/admin/adminapi"
	"coregate/internal/e2e"
)

// TestCHashConnectionVarsThroughBinary: chash upstreams keyed by
// remote_port, server_addr, server_name and hostname are stored by the
// Admin API (201, as APISIX) and served: keyed by remote_port, a
// keep-alive connection's requests stay on one node and new connections
// (new client ports) spread over the nodes; keyed by hostname, every
// connection reaches the same node.
func TestCHashConnectionVarsThroughBinary(t *testing.T) {
	t.Parallel()
	adminPort := freePort(t)
	g := startSupervisor(t, "", etcdConfig(adminPort, adminapi.LegacyAdminKey), 1)
	c := newClient(t)
	admin := legacyAdmin(adminPort)
	var specs []nodeSpec
	for i := range 3 {
		specs = append(specs, nodeSpec{addr: e2e.TextUpstream(t, strconv.Itoa(i)).Addr(), weight: 1})
	}
	for i, key := range []string{"remote_port", "server_addr", "server_name", "hostname"} {
		body, _ := json.Marshal(obj{"uri": "/" + key, "upstream": obj{"type": "chash", "hash_on": "vars", "key": key,
			"nodes": nodeList(t, specs...)}})
		if r := admin.do(t, c, "PUT", "routes/"+strconv.Itoa(i+1), string(body)); r.status != 201 {
			t.Fatalf("PUT a chash upstream keyed by %s: %d %s", key, r.status, r.body)
		}
	}
	eventually(t, 10*time.Second, func() error {
		if r := do(t, c, "GET", g.url("/hostname"), "", nil, nil); r.status != 200 {
			return fmt.Errorf("GET /hostname = %d %q", r.status, r.body)
		}
		return nil
	})

	portNodes := map[string]int{}
	hostNodes := map[string]int{}
	for conn := range 24 {
		tr := &http.Transport{MaxIdleConnsPerHost: 1, DisableCompression: true}
		cl := &http.Client{Transport: tr, Timeout: 10 * time.Second}
		first := ""
		for n := range 3 {
			r := do(t, cl, "GET", g.url("/remote_port"), "", nil, nil)
			if r.status != 200 {
				t.Fatalf("connection %d, request %d: %d %q", conn, n, r.status, r.body)
			}
			if n == 0 {
				first = r.body
				portNodes[r.body]++
			} else if r.body != first {
				t.Fatalf("connection %d: node %s, then node %s on the same connection", conn, first, r.body)
			}
			for _, key := range []string{"server_addr", "server_name", "hostname"} {
				if r := do(t, cl, "GET", g.url("/"+key), "", nil, nil); r.status != 200 {
					t.Fatalf("%s: %d %q", key, r.status, r.body)
				} else if key == "hostname" {
					hostNodes[r.body]++
				}
			}
		}
		tr.CloseIdleConnections()
	}
	if len(portNodes) < 2 {
		t.Errorf("24 connections keyed by their port reached nodes %v, want them spread", portNodes)
	}
	if len(hostNodes) != 1 {
		t.Errorf("requests keyed by the host name reached nodes %v, want one", hostNodes)
	}
}
