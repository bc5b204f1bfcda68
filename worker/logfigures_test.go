package worker

import (
	"fmt"
	"testing"
	"time"

	"coregate/admin/spec"
)

// TestLogFigures: the log phase reads the matched route's name, its
// service's id and name, the uri and host patterns the request matched,
// the upstream node, and the exchange's times and sizes (prometheus's
// labels and figures); a request a plugin answered has no node and was not
// proxied.
func TestLogFigures(t *testing.T) {
	s := &spec.Spec{}
	for _, r := range []string{
		`{"id":"r1","name":"hello","uris":["/x","/a*"],"hosts":["*.example.com"],"service_id":"s1",` +
			`"plugins":{"p-lo":{"log_figures":true}},"upstream":{"nodes":{"127.0.0.1:1980":1}}}`,
		`{"id":"r2","uri":"/exit","plugins":{"p-hi":{"exit_at":"access","exit":403,"body":"no"},"p-lo":{"log_figures":true}}}`,
	} {
		x, err := spec.DecodeRoute([]byte(r))
		if err != nil {
			t.Fatal(err)
		}
		s.Routes = append(s.Routes, x)
	}
	sv, err := spec.DecodeService([]byte(`{"id":"s1","name":"svc"}`))
	if err != nil {
		t.Fatal(err)
	}
	s.Services = append(s.Services, sv)
	if err := s.Check(); err != nil {
		t.Fatal(err)
	}
	h, rec := pluginHarness(t, s)

	req := "POST /abc HTTP/1.1\r\nHost: www.example.com\r\nContent-Length: 5\r\n\r\nhello"
	h.cl.out = h.cl.out[:0]
	h.cl.in = append(h.cl.in, req...)
	h.w.OnTraffic(h.cl)
	h.w.now += int64(7 * time.Millisecond)
	h.up.in = append(h.up.in, upOK...)
	h.w.OnTraffic(h.up)
	sent := len(h.cl.out)
	want := "route_name=hello service_id=s1 service_name=svc matched_uri=/a* matched_host=*.example.com " +
		"balancer_ip=127.0.0.1 upstream_addr=127.0.0.1:1980 " +
		fmt.Sprintf("time=7ms up=7ms proxied=true upstreamed=true length=%d sent=%d;", len(req), sent)
	if string(rec.seen) != want {
		t.Fatalf("log saw\n%s\nwant\n%s", rec.seen, want)
	}

	rec.seen = rec.seen[:0]
	req = "GET /exit HTTP/1.1\r\nHost: x\r\n\r\n"
	_, got := h.roundTrip([]byte(req), nil)
	want = "route_name= service_id= service_name= matched_uri=/exit matched_host= balancer_ip= upstream_addr= " +
		fmt.Sprintf("time=0s up=0s proxied=false upstreamed=false length=%d sent=%d;", len(req), len(got))
	if string(rec.seen) != want {
		t.Fatalf("log saw\n%s\nwant\n%s", rec.seen, want)
	}
}
