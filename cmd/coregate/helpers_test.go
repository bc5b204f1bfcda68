package main

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"testing"

	"coregate/admin/adminapi"
	"coregate/internal/e2e"
)

// obj is one APISIX object (route, upstream, service) as it is written in
// apisix.yaml.
type obj = e2e.Obj

var (
	standaloneYAML = e2e.StandaloneYAML
	routesYAML     = e2e.RoutesYAML
	nodes          = e2e.Nodes
	upstreamOf     = e2e.UpstreamOf
	newClient      = e2e.NewClient
	newReader      = e2e.NewReader
	expectClosed   = e2e.ExpectClosed
	okResponse     = e2e.OKResponse
	treeRSS        = e2e.TreeRSS
	rss            = e2e.RSS
)

// result is a response read whole (e2e.Result).
type result struct {
	status int
	header http.Header
	body   string
	close  bool // Connection: close (net/http takes it out of header)
}

func resultOf(r e2e.Result) result {
	return result{status: r.Status, header: r.Header, body: r.Body, close: r.Close}
}

// do sends one request and reads the whole answer; host, when set,
// replaces the Host header.
func do(t testing.TB, c *http.Client, method, url, host string, hdr map[string]string, body io.Reader) result {
	t.Helper()
	return resultOf(e2e.Do(t, c, method, url, host, hdr, body))
}

func tryDo(c *http.Client, method, url, host string, hdr map[string]string, body io.Reader) (result, error) {
	r, err := e2e.TryDo(c, method, url, host, hdr, body)
	return resultOf(r), err
}

// readOne reads one response, body included, from br.
func readOne(t testing.TB, br *bufio.Reader, method string) result {
	t.Helper()
	return resultOf(e2e.ReadOne(t, br, method))
}

// The origins: an httptest server, and one scripted byte by byte.
type (
	httpUpstream = e2e.HTTPUpstream
	rawUpstream  = e2e.RawUpstream
	rawConn      = e2e.RawConn
)

var (
	newHTTPUpstream = e2e.NewHTTPUpstream
	textUpstream    = e2e.TextUpstream
	newRawUpstream  = e2e.NewRawUpstream
)

// dialGateway opens a raw connection to the gateway.
func dialGateway(t testing.TB, g *gateway) net.Conn {
	t.Helper()
	return e2e.Dial(t, g.Addr())
}

// adminAPI is a node's Admin API (e2e.Admin).
type adminAPI struct{ e2e.Admin }

// legacyAdmin is the Admin API on 127.0.0.1:port with the legacy key.
func legacyAdmin(port int) adminAPI {
	return adminAPI{e2e.Admin{Port: port, Key: adminapi.LegacyAdminKey}}
}

// do sends method on path (under /apisix/admin/) with body ("": none).
func (a adminAPI) do(t testing.TB, c *http.Client, method, path, body string) result {
	t.Helper()
	return resultOf(a.Do(t, c, method, path, body))
}
